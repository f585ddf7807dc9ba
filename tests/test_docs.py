"""The README and docs/ as a user reads them: the README stays short, its commands are the ones CI
runs, its library example runs as printed, and every relative link (and its #anchor) resolves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
#: [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # no headings in code blocks
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```|`[^`\n]*`", "", page.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) <= 200


def test_the_readme_commands_are_the_ones_ci_runs_and_install_the_projects_extras():
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text().split("## Set up", 1)[1].split("\n## ", 1)[0], re.S)
    assert [b.strip() for b in blocks] == [
        "pip install -r requirements.txt && streamlit run app.py",
        "pip install -r requirements-test.txt && python -m pytest",
    ]
    assert blocks[1].strip() in (ROOT / ".ci" / "run").read_text().splitlines()


def test_every_relative_link_of_the_readme_and_docs_resolves():
    broken = []
    for page in PAGES:
        for target in links(page):
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no heading #{anchor} in {file.name})")
    assert broken == []


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "guide.md").write_text("# Guide\n\n## The app's settings\n\n```\n# not a heading\n```\n")
    page = tmp_path / "index.md"
    page.write_text(
        "[ok](guide.md#the-apps-settings) [gone](nope.md) [bad](guide.md#not-a-heading) "
        "[web](https://example.org/x.md) `[code](nope.md)`\n"
    )
    assert links(page) == ["guide.md#the-apps-settings", "nope.md", "guide.md#not-a-heading"]
    assert anchors(tmp_path / "guide.md") == {"guide", "the-apps-settings"}


def test_every_page_of_the_app_is_named_in_the_readme_and_the_app_guide():
    titles = re.findall(r'st\.Page\("app_pages/\w+\.py", title="([^"]+)"', (ROOT / "app.py").read_text())
    assert len(titles) >= 6
    readme_app = README.read_text().split("## The app", 1)[1].split("\n## ", 1)[0]
    guide = (ROOT / "docs" / "app.md").read_text()
    assert [t for t in titles if f"**{t}**" not in readme_app or f"**{t}**" not in guide] == []


def test_every_lesson_has_a_row_in_the_app_guide():
    rows = re.findall(r"^\| `([\w-]+)` \|", (ROOT / "docs" / "app.md").read_text(), flags=re.M)
    assert sorted(rows) == sorted(p.stem for p in (ROOT / "lessons").glob("*.md"))


@pytest.mark.slow
def test_the_readme_library_example_runs_as_printed(tmp_path):
    section = README.read_text().split("## The library", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    r2 = float(lines[0].split()[0])
    assert r2 > 0.95 and "IterationRecord(iteration=20" in lines[0]  # the fit, its last record
    assert float(lines[1]) > 0.9  # the classifier's accuracy
    stated = re.search(r"\(here about ([\d.]+ GiB)\)", README.read_text()).group(1)  # the README's own figure
    assert lines[2].startswith(f"Falkon on n=60,000 points (d=10, float64) needs about {stated} at its peak"), lines[2]
