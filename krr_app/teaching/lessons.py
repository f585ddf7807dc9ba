"""Lessons as data: ``lessons/<name>.md`` files that set up an experiment and walk through it.

A teacher adds a lesson by adding a file — no code. The format is Markdown with TOML blocks
between ``+++`` lines (TOML is read by the standard library's ``tomllib``)::

    +++
    title = "How many Nyström centres?"
    idea = "Nyström centres and M (FALKON, Thm. 3)"
    +++
    An introduction, shown above every step.

    ## A handful of centres
    +++
    page = "explore"
    dataset = "sine1d"
    n = 2000
    M = 5
    +++
    What to look at in this step (Markdown).

    ## More centres
    +++
    M = 50
    +++
    ...

Each ``## `` heading starts a step; its optional ``+++`` block holds the settings the step
applies. A setting's name is the URL parameter of the control it sets (``dataset``, ``n``,
``log10_penalty``, ``M``, ``solver``, ``dtype``, ``cmp_solvers``, ... — see
:func:`krr_app.teaching.links.known_parameters`), plus ``page`` (explore, compare, conditioning, leverage,
dataset, tune). Steps add up: step k's experiment is the settings of steps 1..k, later steps
overriding earlier ones, so a link to any step (``?lesson=<name>&step=<k>``) sets the same
experiment as walking there with Next. A setting goes through the same check as a link's value
(:mod:`krr_app.teaching.links`), so a lesson cannot put a widget into a state it refuses.

A step may also show a picture below its text, a file of the app's folder (e.g. a screenshot of
the app that a browser test saves into ``docs/``)::

    picture = "docs/screenshot-tune-gcv.png"
    caption = "What the Tune page shows after Tune"

``picture`` and ``caption`` belong to their step only (they do not add up like the settings).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from krr_app import settings
from krr_app.teaching import link_rules, links
from krr_app.text import plain, quoted

#: A lesson step's ``page`` setting → the page's script (as ``app.py`` registers it).
PAGES = {
    "explore": "app_pages/explore.py",
    "compare": "app_pages/compare.py",
    "conditioning": "app_pages/conditioning.py",
    "leverage": "app_pages/leverage.py",
    "dataset": "app_pages/dataset.py",
    "tune": "app_pages/tune.py",
}
DEFAULT_PAGE = "explore"
#: session_state: the lesson followed, as (name, step) with step counted from 1.
STATE_KEY = "_krr_lesson"
FENCE = "+++"
#: The file kinds a step's ``picture`` may name (what ``st.image`` draws).
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")


class LessonError(ValueError):
    """A lesson file that cannot be used; the message names the file, the step and the setting."""


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    settings: tuple[tuple[str, object], ...]  # this step's own settings ("page" excluded)
    page: str | None = None
    picture: str | None = None  # a file of the app's folder, drawn below the text
    caption: str | None = None

    def picture_path(self) -> Path | None:
        """The picture's file (relative names are read from the app's folder, where ``docs/`` is)."""
        return None if self.picture is None else settings.app_dir() / self.picture


@dataclass(frozen=True)
class Lesson:
    name: str  # the file's stem: ?lesson=<name>
    title: str
    idea: str
    intro: str
    steps: tuple[Step, ...]

    def settings_at(self, step: int) -> dict:
        """The experiment of step ``step`` (from 1): the settings of steps 1..step, later ones winning."""
        merged: dict = {}
        for s in self.steps[:step]:
            merged.update(s.settings)
        return merged

    def page_at(self, step: int) -> str:
        """The page of step ``step``: the last ``page`` set up to it (Explore when none is)."""
        pages = [s.page for s in self.steps[:step] if s.page]
        return pages[-1] if pages else DEFAULT_PAGE

    @property
    def keys(self) -> frozenset[str]:
        """Every setting some step of the lesson applies (their controls stay visible in the lesson)."""
        return frozenset(k for s in self.steps for k, _ in s.settings)


# -- reading files -------------------------------------------------------------------------------
def _toml(lines: list[str], start: int, where: str) -> tuple[dict, int]:
    """The TOML block opening at ``lines[start]`` (a fence) and the index after its closing fence."""
    try:
        end = lines.index(FENCE, start + 1)
    except ValueError:
        raise LessonError(f"{where}: the {FENCE} block opened on line {start + 1} is never closed") from None
    try:
        return tomllib.loads("\n".join(lines[start + 1 : end])), end + 1
    except tomllib.TOMLDecodeError as exc:
        raise LessonError(f"{where}: the settings block on line {start + 1} is not valid TOML ({exc})") from None


def _check_picture(settings: dict, where: str) -> tuple[str | None, str | None]:
    """The step's ``picture`` and ``caption`` (taken out of ``settings``), checked."""
    picture, caption = settings.pop("picture", None), settings.pop("caption", None)
    if picture is not None and not (isinstance(picture, str) and picture.lower().endswith(PICTURE_SUFFIXES)):
        raise LessonError(f"{where}: picture = {picture!r} must name an image file ({', '.join(PICTURE_SUFFIXES)})")
    if caption is not None and (picture is None or not isinstance(caption, str)):
        raise LessonError(f"{where}: caption = {caption!r} must be text, and goes with a picture")
    return picture, caption


def _check_settings(settings: dict, where: str) -> tuple[tuple[tuple[str, object], ...], str | None]:
    known = links.known_parameters() - set(links.LESSON_PARAMS)
    page = settings.pop("page", None)
    if page is not None and page not in PAGES:
        raise LessonError(f"{where}: page = {page!r} is not one of {', '.join(PAGES)}")
    for key, value in settings.items():
        if key not in known:
            raise LessonError(f"{where}: {key!r} is not a setting of this app{links.unknown_hint(key, known)}")
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, (str, int, float, bool)) for v in items):
            raise LessonError(f"{where}: {key} = {value!r} must be a number, a string, true/false or a list")
    return tuple(settings.items()), page


def parse(text: str, name: str) -> Lesson:
    """A :class:`Lesson` from a lesson file's text (``name``: the file's stem, for messages)."""
    where = f"lessons/{name}.md"
    lines = [line.rstrip() for line in text.splitlines()]
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or lines[first] != FENCE:
        raise LessonError(f"{where}: a lesson starts with a {FENCE} block holding title and idea")
    header, i = _toml(lines, first, where)
    missing = [k for k in ("title", "idea") if not isinstance(header.get(k), str)]
    if missing:
        raise LessonError(f"{where}: the first {FENCE} block needs {' and '.join(missing)} (text)")
    intro, steps = [], []
    body = intro
    current: dict | None = None
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            current = {"title": line[3:].strip(), "text": [], "settings": (), "page": None, "picture": (None, None)}
            steps.append(current)
            body = current["text"]
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and lines[j] == FENCE:
                step_where = f"{where}, step {len(steps)} ({current['title']})"
                raw, i = _toml(lines, j, step_where)
                current["picture"] = _check_picture(raw, step_where)
                current["settings"], current["page"] = _check_settings(raw, step_where)
                continue
        else:
            body.append(line)
        i += 1
    if not steps:
        raise LessonError(f"{where}: a lesson needs at least one step (a '## ' heading)")
    return Lesson(
        name,
        header["title"],
        header["idea"],
        "\n".join(intro).strip(),
        tuple(Step(s["title"], "\n".join(s["text"]).strip(), s["settings"], s["page"], *s["picture"]) for s in steps),
    )


def _stamp(directory: Path) -> tuple:
    return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in directory.glob("*.md")))


@st.cache_data(show_spinner=False, max_entries=4)
def _read(directory: str, stamp: tuple) -> tuple[dict, dict]:
    lessons, errors = {}, {}
    for path in sorted(Path(directory).glob("*.md")):
        try:
            lessons[path.stem] = parse(path.read_text(encoding="utf-8"), path.stem)
        except LessonError as exc:
            errors[path.stem] = str(exc)
    return lessons, errors


def catalog(directory: Path | None = None) -> tuple[dict[str, Lesson], dict[str, str]]:
    """All lessons of ``directory`` (default :data:`krr_app.settings.LESSONS_DIR`) by name, and the
    files that cannot be used with the reason (re-read when a file changes, so a teacher sees a
    new lesson without restarting the server)."""
    directory = Path(directory or settings.LESSONS_DIR)
    return _read(str(directory), _stamp(directory))


# -- following a lesson --------------------------------------------------------------------------
def _go(name: str, step: int, keep_url_values: bool = False) -> None:
    """Follow ``name`` at ``step``: its experiment's settings wait for their widgets (see
    :func:`krr_app.teaching.links.set_pending`), and the URL names the lesson and the step."""
    lesson = catalog()[0][name]
    settings = lesson.settings_at(step)
    if keep_url_values:  # a link's own values win over the lesson's (e.g. ?lesson=x&M=30)
        settings = {k: v for k, v in settings.items() if k not in st.query_params}
    st.session_state[STATE_KEY] = (name, step)
    links.set_pending(settings, f"lesson {name}, step {step}", lesson.page_at(step))
    st.query_params["lesson"] = name
    st.query_params["step"] = str(step)


def leave() -> None:
    st.session_state.pop(STATE_KEY, None)
    st.session_state.pop(links.PENDING_KEY, None)
    for key in links.LESSON_PARAMS:
        if key in st.query_params:
            del st.query_params[key]


def _from_url(lessons: dict[str, Lesson]) -> None:
    """A ``?lesson=`` (and ``&step=``) this session does not follow yet: a shared link, or the
    browser's Back/Forward. Unknown names and bad steps are named like any refused link value."""
    name = st.query_params.get("lesson")
    if name is None:
        return
    step_text = st.query_params.get("step")
    followed = st.session_state.get(STATE_KEY)
    if followed is not None and followed[0] == name and (step_text is None or step_text == str(followed[1])):
        return
    lesson = lessons.get(name)
    if lesson is None:
        links.add_note(links.Note("lesson", name, f"is not a lesson here — the lessons are {', '.join(lessons)}"))
        leave()
        return
    step = 1
    if step_text is not None:
        verdict = link_rules.decide([step_text], link_rules.Rule("number", 1, 1, len(lesson.steps), integer=True))
        if verdict.noted:
            links.add_note(
                links.Note("step", step_text, f"{verdict.reason} (lesson {name} has {len(lesson.steps)} steps)")
            )
        step = verdict.value
    _go(name, step, keep_url_values=True)


def sync(page: str) -> Lesson | None:
    """Before the sidebar is drawn: the lesson this session follows (None outside lessons).

    Reads a lesson link, keeps ``?lesson=&step=`` in the URL across page switches, and moves to
    the page a step asks for (its waiting settings are then applied by that page's widgets)."""
    lessons, _ = catalog()
    _from_url(lessons)
    followed = st.session_state.get(STATE_KEY)
    if followed is None or followed[0] not in lessons:
        return None
    name, step = followed
    if st.query_params.get("lesson") != name or st.query_params.get("step") != str(step):
        st.query_params["lesson"] = name
        st.query_params["step"] = str(step)
    target = links.pending_page()
    if target is not None and target != page:
        # Only the lesson's own parameters travel: the sidebar's controls keep their values across
        # pages (persist_state) and write them back to the URL on the new page.
        st.switch_page(PAGES[target], query_params={"lesson": name, "step": str(step)})
    return lessons[name]


def _settings_text(step: Step) -> str:
    return ", ".join(f"`{k} = {v}`" for k, v in step.settings) or "nothing new"


def _picture(step: Step) -> None:
    """The step's picture below its text; a missing file is named instead of drawn."""
    path = step.picture_path()
    if path is None:
        return
    if not path.is_file():
        st.warning(f"This step's picture {quoted(step.picture)} is not in the app's folder ({plain(str(path), None)}).")
        return
    st.image(str(path), caption=step.caption, width="stretch")


def panel(lesson: Lesson | None) -> None:
    """The lesson box above the page: the step's text, Back / Next / Leave, and what it set."""
    if lesson is None:
        return
    _, step = st.session_state[STATE_KEY]
    current = lesson.steps[step - 1]
    with st.container(border=True, key="lesson_panel"):
        st.markdown(f"**Lesson: {lesson.title}** · *{lesson.idea}* · step {step} of {len(lesson.steps)}")
        if lesson.intro and step == 1:
            st.markdown(lesson.intro)
        st.markdown(f"#### {step}. {current.title}")
        st.markdown(current.text)
        _picture(current)
        st.caption(f"This step set: {_settings_text(current)}" + (f" (page: {current.page})" if current.page else ""))
        back, forward, out, _ = st.columns([1, 1, 1, 3])
        back.button(
            "Back",
            key="lesson_back",
            icon=":material/arrow_back:",
            disabled=step == 1,
            on_click=_go,
            args=(lesson.name, step - 1),
        )
        forward.button(
            "Next",
            key="lesson_next",
            icon=":material/arrow_forward:",
            type="primary",
            disabled=step == len(lesson.steps),
            on_click=_go,
            args=(lesson.name, step + 1),
        )
        out.button("Leave the lesson", key="leave_lesson", on_click=leave)


#: session_state key of the Lessons expander (:func:`index`): open or not.
INDEX_KEY = "lessons_open"


def index() -> None:
    """The lessons, each with a Start button and the link a teacher shares (outside lessons),
    written only while the expander is open (opening it reruns the page): a closed expander's
    buttons are still laid out by a new visitor's browser, in front of the page's first picture."""
    box = st.expander("Lessons", key=INDEX_KEY, on_change="rerun")
    if not box.open:
        return
    lessons, errors = catalog()
    with box:
        for name, lesson in lessons.items():
            st.button(
                lesson.title,
                key=f"lesson_start_{name}",
                on_click=_go,
                args=(name, 1),
                width="stretch",
                help=f"{lesson.idea} — {len(lesson.steps)} steps. Share it as ?lesson={name}",
            )
        for name, error in errors.items():
            st.error(f"Lesson {quoted(name)} cannot be used: {plain(error, None)}")  # the name is the link's
        st.caption(
            "A lesson is a file in `lessons/` (Markdown with the settings of each step): "
            "add one to add a lesson. Share one as `?lesson=<name>`."
        )
