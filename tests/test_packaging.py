"""Packaging: pyproject.toml builds a wheel holding the library, the app and the ``krr-explorer``
command; installed, krrcore imports from outside the repository and the command serves the app.

The cheap, automatic form of a clean install: the wheel is built from a copy of the sources (no
build/ or egg-info left in the checkout) and installed with ``--no-deps`` into a throw-away virtual
environment whose dependencies are those of the interpreter running the tests — its site
directories, added by a ``.pth`` file — whether that interpreter is the system Python or itself a
virtual environment (a fully clean environment would download ~1 GB of dependencies).
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SOURCES = ("pyproject.toml", "README.md", "app.py", "app_pages", ".streamlit", "lessons", "krrcore", "krr_app")


def test_every_package_of_the_tree_is_listed():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("krrcore", "krr_app")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert listed - {"krr_explorer"} == on_disk


def test_dependencies_pin_torch_and_extras_cover_app_cluster_data_and_tests():
    project = PYPROJECT["project"]
    assert "torch==2.13.0" in project["dependencies"]
    extras = project["optional-dependencies"]
    assert any(dep.startswith("dask[distributed]") for dep in extras["cluster"])
    assert "streamlit==1.67.0" in extras["app"] and "krr-explorer[cluster,data]" in extras["app"]
    assert any(dep.startswith("pytest") for dep in extras["test"])
    assert project["scripts"] == {"krr-explorer": "krr_app.cli:main"}
    # The README's commands install exactly this project with these extras.
    assert "-e .[app]" in (ROOT / "requirements.txt").read_text().splitlines()
    assert "-e .[test]" in (ROOT / "requirements-test.txt").read_text().splitlines()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("krr_explorer-*.whl")
    return built


def test_wheel_holds_library_app_and_entry_point(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for source in ("krrcore", "krr_app"):
        for path in (ROOT / source).rglob("*.py"):
            assert path.relative_to(ROOT).as_posix() in names, f"{path} missing from the wheel"
    for path in ("app.py", "app_pages/explore.py", "app_pages/conditioning.py", ".streamlit/config.toml"):
        assert f"krr_explorer/{path}" in names
    for path in (ROOT / "lessons").glob("*.md"):  # lessons are data files, not code
        assert f"krr_explorer/lessons/{path.name}" in names
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
    assert "Requires-Dist: torch==2.13.0" in metadata
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert "krr-explorer = krr_app.cli:main" in entry_points


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment_with_our_dependencies(env_dir: Path) -> Path:
    """A virtual environment that sees the packages of the interpreter running this test, and
    returns its python. ``venv.create(system_site_packages=True)`` would lend it the *base*
    interpreter's packages: from inside a virtual environment, not the ones installed there. So it
    is created plain, and a ``.pth`` file adds this interpreter's site directories after its own
    (``site.addsitedir``, so that their own ``.pth`` files apply too): what is installed into the
    new environment comes first."""
    venv.create(env_dir, system_site_packages=False, with_pip=False)  # this pip installs into it
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    ours = [d for d in [*site.getsitepackages(), site.getusersitepackages()] if os.path.isdir(d)]
    (Path(purelib) / "_krr_test_dependencies.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in ours)
    )
    return python


def _without_pythonpath() -> dict:
    """This environment minus PYTHONPATH, which would put a checkout ahead of the installed wheel."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.mark.slow
def test_installed_wheel_imports_outside_the_repo_and_its_command_serves_the_app(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    python = environment_with_our_dependencies(env_dir)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    where = subprocess.run(
        [
            python,
            "-c",
            "import krrcore, krr_app.cli, krr_app.settings as s; print(krrcore.__file__); "
            "print(krr_app.cli.app_dir()); print(s.LESSONS_DIR); print(len(list(s.LESSONS_DIR.glob('*.md'))))",
        ],
        cwd=tmp_path,
        env=_without_pythonpath(),
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.split()
    site = str(env_dir)
    assert all(path.startswith(site) for path in where[:3])  # the wheel's copies, not the checkout's
    assert int(where[3]) == len(list((ROOT / "lessons").glob("*.md")))  # the installed app has its lessons

    port = _free_port()
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [
                env_dir / "bin" / "krr-explorer",
                "--server.port",
                str(port),
                "--server.headless",
                "true",
                "--server.address",
                "127.0.0.1",
            ],
            cwd=tmp_path,
            env=_without_pythonpath(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline, health = time.monotonic() + 90, None
        while time.monotonic() < deadline and health is None:
            assert server.poll() is None, f"krr-explorer exited early:\n{log.read_text()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                    health = response.read().decode()
            except OSError:
                time.sleep(0.5)
        assert health == "ok", log.read_text()
        cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes().decode().split("\0")
        script = cmdline[cmdline.index("run") + 1]  # python -m streamlit run <app.py>
        assert script.startswith(site) and script.endswith("krr_explorer/app.py")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
