"""The product's text speaks of the product: no date, clock time, issue reference or team-process
word in the README, docs/, lessons/, the configuration files, nor in any ``.py`` file's comments and
docstrings.

What is prose: all of a Markdown or configuration file; in Python, the comments (``tokenize``) and the docstrings of
modules, classes and functions (``ast``). Other string literals are data (a data set's year column,
a time format) and are not read. The rules are :data:`RULES`, and
:func:`test_the_rules_find_each_planted_violation_and_spare_data_and_ordinary_numbers` shows what
each one catches:

* a date: year-month-day with a year 1900–2099, a month 01–12 and a day 01–31;
* a clock time: hours and minutes with a two-digit hour 00–23, not part of a longer number or an
  address (host and port); or a one-digit hour followed by a time zone or am/pm;
* an issue reference: the word issue(s), PR or pull request followed by a number, or a hash sign
  and one to four digits standing alone (six hex digits are a colour, not an issue);
* a team-process word: a lock file of the machine the team shares, or talk of its other users.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RULES = {
    "date": re.compile(r"(?<!\d)(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?!\d)"),
    "clock time": re.compile(
        r"(?<![\w:.])(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?![\w:])"
        r"|(?<![\w:.])\d{1,2}:[0-5]\d\s*(?:UTC|GMT|CES?T|[ap]\.?m\b)"
    ),
    "issue reference": re.compile(r"(?i)\b(?:issues?|PR|pull request)[\s-]*#?\d+|(?<![\w&#/])#\d{1,4}(?![\w])"),
    "team-process word": re.compile(r"(?i)krr-[\w-]+\.lock|heavy[- ]CPU lock|other engineers"),
}

#: Folders that hold no product text (build output, caches, results, virtual environments).
SKIPPED = {"build", "dist", "benchmark-results", "artifacts", "__pycache__", "node_modules"}


def python_prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every module, class and function docstring."""
    lines = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines += [(first.lineno + i, line) for i, line in enumerate(first.value.value.splitlines())]
    return sorted(lines)


def violations(path: Path, root: Path) -> list[tuple[str, int, str, str, str]]:
    """(file, line, rule, matched text, the line) of every match of a rule in ``path``'s prose."""
    text = path.read_text(encoding="utf-8")
    prose = python_prose(text) if path.suffix == ".py" else list(enumerate(text.splitlines(), start=1))
    return [
        (path.relative_to(root).as_posix(), line_no, rule, match.group(0), line.strip())
        for line_no, line in prose
        for rule, pattern in RULES.items()
        for match in pattern.finditer(line)
    ]


def report(found) -> str:
    return "\n".join(f"{file}:{line}: {rule} {text!r} in {where[:100]!r}" for file, line, rule, text, where in found)


#: Configuration and scripts a user reads, all of their text.
CONFIG_FILES = (
    "pyproject.toml",
    "requirements.txt",
    "requirements-test.txt",
    "pytest.ini",
    ".streamlit/config.toml",
    ".ci/run",
)


def product_text_files(root: Path) -> list[Path]:
    """README.md, docs/*.md, lessons/*.md, the configuration files and every .py file outside hidden
    and output folders."""
    files = [
        root / "README.md",
        *sorted((root / "docs").glob("*.md")),
        *sorted((root / "lessons").glob("*.md")),
        *(root / name for name in CONFIG_FILES),
    ]
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts[:-1]
        if not any(
            p.startswith(".")
            or p in SKIPPED
            or p.endswith(".egg-info")
            or (root / Path(*parts[: i + 1]) / "pyvenv.cfg").exists()
            for i, p in enumerate(parts)
        ):
            files.append(path)
    return [f for f in files if f.is_file()]


def test_the_product_text_has_no_dates_clock_times_issue_numbers_or_process_words():
    files = product_text_files(ROOT)
    names = {f.relative_to(ROOT).as_posix() for f in files}
    assert {
        "README.md",
        "docs/measurements.md",
        "lessons/first-model.md",
        ".streamlit/config.toml",
        "app.py",
        "krrcore/__init__.py",
        "krr_app/settings.py",
        "tests/test_text_hygiene.py",
        "benchmarks/suite.py",
    } <= names
    found = [v for path in files for v in violations(path, ROOT)]
    assert found == [], report(found)


PLANTED_PY = '''\
"""Fitted on 2025-03-14 by the team."""                         # date in a module docstring
YEARS = {"founded": "2024-01-31", "at": "12:30"}                 # data: never read
FORMAT = "%H:%M"


def fit():
    """Slow since 14:05 UTC."""                                  # clock time in a docstring
    return 1  # see issue 12


class Model:
    """Fine: σ = 0.5, ratio 3:1, 10.0.0.1:8786, colour #1f77b4 and #000000, x[:, 1:3]."""

    def predict(self):
        # held the krr-heavy.lock; fixed in #27
        return "issue 12 in a string literal is data"


# a comment at 9:30 am, and a plain one
'''

PLANTED_MD = """\
# Benchmarks

Run series B at 04:56, replaced at 06:40/07:10.
Measured 2026-11-23 with `python -m benchmarks --case app` (fixes issue #14, see issues 22 and 25).
One hold of the heavy-CPU lock; other engineers' jobs were running.
Fine: a 2-core machine, n = 40,000, ports 8600:8609 aside, `10.0.0.1:8786`, ratio 16:9, colour #1f77b4.
"""


def test_the_rules_find_each_planted_violation_and_spare_data_and_ordinary_numbers(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "planted.py").write_text(PLANTED_PY)
    (tmp_path / "docs" / "planted.md").write_text(PLANTED_MD)
    (tmp_path / "README.md").write_text("A library for kernel ridge regression.\n")
    venv = tmp_path / "venv" / "lib"  # a virtual environment's files are not ours
    venv.mkdir(parents=True)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "site.py").write_text("# released 2024-01-01\n")

    files = product_text_files(tmp_path)
    assert [f.relative_to(tmp_path).as_posix() for f in files] == ["README.md", "docs/planted.md", "pkg/planted.py"]
    found = [v for path in files for v in violations(path, tmp_path)]
    hits = [v[:4] for v in found]
    assert sorted(hits) == sorted(
        [
            ("docs/planted.md", 3, "clock time", "04:56"),
            ("docs/planted.md", 3, "clock time", "06:40"),
            ("docs/planted.md", 3, "clock time", "07:10"),
            ("docs/planted.md", 4, "date", "2026-11-23"),
            ("docs/planted.md", 4, "issue reference", "issue #14"),
            ("docs/planted.md", 4, "issue reference", "issues 22"),
            ("docs/planted.md", 5, "team-process word", "heavy-CPU lock"),
            ("docs/planted.md", 5, "team-process word", "other engineers"),
            ("pkg/planted.py", 1, "date", "2025-03-14"),
            ("pkg/planted.py", 7, "clock time", "14:05"),
            ("pkg/planted.py", 8, "issue reference", "issue 12"),
            ("pkg/planted.py", 15, "team-process word", "krr-heavy.lock"),
            ("pkg/planted.py", 15, "issue reference", "#27"),
            ("pkg/planted.py", 19, "clock time", "9:30 am"),
        ]
    ), report(found)


@pytest.mark.parametrize(
    "line",
    [
        "ratio 3:1",
        "10.0.0.1:8786",
        "tcp://host:8786",
        "x[:, 1:3]",
        "#1f77b4",
        "#000000",
        "&#10;",
        "n = 2,000-10,000",
        "1.17 to 1.08x",
        "σ ∈ [0.5, 2]",
        "float32: 1e-5·M",
        "step 12 of the lesson",
        "https://arxiv.org/abs/2407.10070",
    ],
)
def test_ordinary_product_text_is_not_flagged(line, tmp_path):
    path = tmp_path / "page.md"
    path.write_text(textwrap.dedent(line) + "\n")
    assert violations(path, tmp_path) == []
