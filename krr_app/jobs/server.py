"""``streamlit run app.py`` as a child process on 127.0.0.1, for the browser tests, the load test,
the lifecycle tests and the app benchmark: started on a free port, ready once its health endpoint
answers, stopped (with its Dask workers) on exit."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerFailed(RuntimeError):
    """The app did not start; the message holds its log."""


@contextmanager
def running_app(
    log_path: Path,
    *,
    port: int | None = None,
    timeout: float = 90.0,
    env: dict | None = None,
    args: tuple[str, ...] = (),
    new_session: bool = False,
):
    """Yield ``(url, process)`` of a headless ``streamlit run app.py``; its output goes to ``log_path``.

    ``args``: more Streamlit options. ``new_session``: the server leads a process group of its
    own, as a shell's foreground job does (``os.killpg(process.pid, signal.SIGINT)`` is Ctrl-C).
    On exit the server is stopped, and whatever it started and left running is killed."""
    port = port or free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.headless",
                "true",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--server.fileWatcherType",
                "none",
                *args,
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=new_session,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise ServerFailed(f"streamlit did not start:\n{Path(log_path).read_text()}")
            time.sleep(0.3)
        yield url, proc
    finally:
        started = _descendants(proc.pid)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for child in started:
            try:
                child.kill()
            except Exception:  # gone already
                pass


def _descendants(pid: int) -> list:
    try:
        import psutil

        return psutil.Process(pid).children(recursive=True)
    except Exception:  # the server is gone (a test ended it)
        return []
