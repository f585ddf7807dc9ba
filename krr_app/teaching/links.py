"""Every value a link or a lesson step gives a widget is checked before the widget takes it.

A widget bound to the URL (``bind="query-params"``) seeds itself from ``?key=value`` the first
time a session draws it. Left alone, Streamlit drops what it cannot use (``?M=abc``, ``?M=-5``,
``?dataset=nope``) and reads ``?M=1.5`` as 1 — the page then shows another experiment than the
link describes, without a word. So every bound widget of the app is drawn through :func:`widget`
(or checked with :func:`check` just before it is drawn), which reads the raw URL value against the
widget's own arguments — its options, ``min_value``, ``max_value``, integer or float — and decides:

* not a number, not an option, not true/false, not a whole number, not finite, or below the
  minimum: **refused**, the widget's default is used;
* above the maximum: **adjusted** to the maximum (the largest this server allows);
* a parameter given twice (``?M=50&M=60``): the last one is used, and the repetition is named;
* a name the app does not read (``?lamda=...``): ignored and named, with the closest known name;
* a name the app used to read (:data:`RENAMED`, e.g. ``?log_lambda=``): read under its new name,
  and the renaming named.

A teacher's link (:mod:`krr_app.teaching.teacher`: ``?hide=``, ``?lock=``, ``?present=``) is checked the
same way: a name that is no control is refused and named.

The rules and the decisions are :mod:`krr_app.teaching.link_rules` (no Streamlit there); each
decision is a :class:`Note`; :func:`show_notes` shows them all in one message until the user
dismisses it. The URL is rewritten to the value used (and the script reruns so the widget seeds
from it), so a copied link says what the page shows. A lesson step's settings (see
:mod:`krr_app.teaching.lessons`) go through the same check when their widget is drawn, and a setting that
changes a widget's value fires its ``on_change`` like a user's change would (a new dataset brings
its suggested σ and λ, a new solver its iteration count).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from dataclasses import dataclass

import streamlit as st

from krrcore.datasets import DATASETS
from krrcore.kernels import KERNELS

from krr_app.jobs.config import INT_KNOBS
from krr_app.teaching.link_rules import Rule, decide, is_whole_number
from krr_app.text import plain, quoted

#: session_state keys: the notes to show, the lesson values waiting for their widget, and the
#: "the URL's parameter names were read" flag.
NOTES_KEY = "_krr_link_notes"
PENDING_KEY = "_krr_pending_values"
URL_READ_KEY = "_krr_url_read"
#: Parameters the app reads besides widget keys (managed by :mod:`krr_app.teaching.lessons`).
LESSON_PARAMS = ("lesson", "step")
#: The run a tab last started: a reload reconnects to it (the page's state, not a control).
RUN_PARAM = "run"
SESSION_PARAMS = (RUN_PARAM,)
#: A teacher's link: controls hidden, controls read-only, the presenter view (:mod:`krr_app.teaching.teacher`).
TEACHER_PARAMS = ("hide", "lock", "present")
TEACHER_KEY = "_krr_teacher_view"

#: URL parameters that were renamed, old name → new: an old link still sets what it set, and says so.
#: (λ keeps one name from the link to the solver: ``log10_penalty`` is log₁₀ of ``penalty``.)
RENAMED = {"log_lambda": "log10_penalty", "lev_log_lambda": "lev_log10_penalty"}

_BIND = {"bind": "query-params"}
_SESSION = {"persist_state": "session"}


def known_parameters() -> frozenset[str]:
    """Every URL parameter some page reads (a bound widget's key, or a lesson parameter).

    The sidebar's keys follow the registries (each data set's knobs, each kernel's parameters);
    the page keys are listed here and ``tests/app/test_links.py`` checks that every bound widget a
    page draws is in this set."""
    sidebar = {
        "dataset",
        "n",
        "seed",
        "kernel",
        "sigma",
        "log10_penalty",
        "M",
        "solver",
        "loss",
        "maxiter",
        "eval_train",
        "dtype",
        "solver_seed",
        "budget_mb",
        *INT_KNOBS,
    }
    knobs = {knob for info in DATASETS.values() for knob in info.knob_defaults}
    kernels = {
        name
        for kernel in KERNELS
        for name, parameter in inspect.signature(KERNELS[kernel]).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    pages = {
        "auto_run",
        "x_axis",
        "uncertainty",  # Explore
        "cmp_mode",
        "cmp_solvers",
        "sweep_param",
        "sweep_values",
        "cmp_iteration",  # Compare
        "cond_n",
        "blocks",
        "rank",  # Conditioning
        "lev_n",
        "lev_method",
        "lev_log10_penalty",
        "lev_q2",  # Leverage scores
        "data_n",
        "missing",
        "role",  # Dataset (an uploaded table's)
        "csv_target",
        "task",
        "csv_n",  # the sidebar's uploaded table
        "tune_objective",
        "tune_ard",
        "tune_steps",
        "tune_find_M",
    }  # Tune
    return frozenset(sidebar | knobs | kernels | pages | set(LESSON_PARAMS) | set(TEACHER_PARAMS) | set(SESSION_PARAMS))


#: Words a user may type for a parameter, and the parameter meant (for "did you mean …?").
SYNONYMS = {**RENAMED, "lambda": "log10_penalty", "penalty": "log10_penalty", "lev_lambda": "lev_log10_penalty"}


def unknown_hint(name: str, known) -> str:
    """What to say of a name that is not in ``known``: its new name if it was renamed, else the
    closest known name (a synonym such as ``lambda`` counts as the parameter it means), or ""."""
    if name in RENAMED:
        return f" (it is now called {RENAMED[name]!r})"
    close = difflib.get_close_matches(name, sorted(set(known) | set(SYNONYMS)), n=1)
    return f" (did you mean {SYNONYMS.get(close[0], close[0])!r}?)" if close else ""


def controls() -> frozenset[str]:
    """The names a teacher's ``?hide=`` / ``?lock=`` may give: every control bound to the URL."""
    return known_parameters() - set(LESSON_PARAMS) - set(TEACHER_PARAMS) - set(SESSION_PARAMS)


# -- what a widget accepts ---------------------------------------------------------------------
def rule_for(widget_fn, kwargs: dict, default=None) -> Rule:
    """The :class:`Rule` of ``widget_fn`` drawn with ``kwargs`` (``default`` when the caller seeds
    the widget through session state instead of ``value``/``index``)."""
    if widget_fn in (st.selectbox, st.radio, st.multiselect):
        options = tuple(kwargs.get("options", ()))
        format_func = kwargs.get("format_func", str)
        labels = tuple(str(format_func(o)) for o in options)
        if widget_fn is st.multiselect:
            chosen = default if default is not None else kwargs.get("default") or []
            return Rule("multi", tuple(chosen), options=options, labels=labels)
        if default is None:
            default = options[kwargs.get("index", 0)] if options else None
        return Rule("choice", default, options=options, labels=labels)
    if widget_fn in (st.checkbox, st.toggle):
        return Rule("bool", bool(kwargs.get("value", False) if default is None else default))
    if widget_fn in (st.number_input, st.slider):
        value = kwargs.get("value") if default is None else default
        step = kwargs.get("step")
        integer = is_whole_number(step) if step is not None else is_whole_number(value)
        return Rule(
            "number",
            value,
            kwargs.get("min_value"),
            kwargs.get("max_value"),
            integer,
            clearable=widget_fn is st.number_input and value is None,
        )
    return Rule("text", kwargs.get("value", "") if default is None else default)


# -- notes ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Note:
    """One refused or adjusted value: which parameter, what was given, from where, and why."""

    key: str
    given: str
    reason: str
    source: str = "link"  # "link", or "lesson <name>, step <k>"

    def text(self) -> str:
        """The note as Markdown: every part shown as text (:mod:`krr_app.text`), since the key,
        the value and reasons that quote them come from the link."""
        where = "" if self.source == "link" else f" ({plain(self.source)})"
        return f"{quoted(f'{self.key}={self.given}')}{where} {plain(self.reason, limit=None)}."


def add_note(note: Note) -> None:
    notes = st.session_state.setdefault(NOTES_KEY, [])
    if note not in notes:
        notes.append(note)


def notes() -> list[Note]:
    return list(st.session_state.get(NOTES_KEY, []))


def _dismiss() -> None:
    st.session_state[NOTES_KEY] = []


def show_notes() -> None:
    """One message naming every refused or adjusted value, until the user dismisses it."""
    current = notes()
    if not current:
        return
    with st.container(border=True, key="link_notes"):
        lines = "\n".join(f"- {note.text()}" for note in current)
        st.warning(
            "**Some values in this link were refused or adjusted** — the page shows the values "
            f"used instead (and the address bar now holds them):\n{lines}",
            icon=":material/link_off:",
        )
        st.button("OK, understood", key="link_notes_ok", on_click=_dismiss)


# -- reading the URL -----------------------------------------------------------------------------
def read_url_once() -> None:
    """On a session's first script run: read renamed parameters under their new names, and name
    and drop the parameters no page reads."""
    if st.session_state.get(URL_READ_KEY):
        return
    st.session_state[URL_READ_KEY] = True
    renamed = [old for old in RENAMED if old in st.query_params]
    for old in renamed:
        new = RENAMED[old]
        given = st.query_params.get_all(old)
        del st.query_params[old]
        if new in st.query_params:
            add_note(
                Note(old, ", ".join(given), f"is now called {new!r}, which the link also gives — that one is used")
            )
        else:
            st.query_params[new] = given
            add_note(Note(old, ", ".join(given), f"is now called {new!r} — read as {new}"))
    known = known_parameters()
    for key in [k for k in st.query_params if k not in known]:
        given = ", ".join(st.query_params.get_all(key))
        add_note(Note(key, given, f"is not a parameter of this app — ignored{unknown_hint(key, known)}"))
        del st.query_params[key]
    if renamed:
        st.rerun()  # a bound widget seeds from the URL the run started with: start again from the new one


def _from_url(key: str, rule: Rule, bound: bool = True) -> None:
    """Check ``?key=`` before its widget first seeds from it; on a refusal or an adjustment (or a
    value written another way than the widget reads it, e.g. a solver's key for its label), put
    the value used in the URL and rerun, so the widget seeds from that. An unbound widget (see
    :func:`widget`'s ``url_keys``) takes the value from session state instead."""
    if key in st.session_state or key not in st.query_params:
        return
    raw = st.query_params.get_all(key)
    verdict = decide(raw, rule)
    if verdict.noted:
        add_note(Note(key, f"&{key}=".join(raw), verdict.reason))
    if not bound:
        st.session_state[key] = list(verdict.value) if rule.kind == "multi" else verdict.value
        _write_url(key, rule, verdict.value)
        if verdict.noted:
            st.rerun()  # the note is shown above the page, which this run has drawn already
        return
    if rule.same(raw, verdict.value):
        return
    wanted = rule.url_text(verdict.value)
    if wanted is None:
        del st.query_params[key]
    else:
        st.query_params[key] = wanted
    st.rerun()


def _write_url(key: str, rule: Rule, value) -> None:
    """Put an unbound widget's value in the URL as its option key (the default: no parameter)."""
    wanted = rule.url_text(tuple(value) if rule.kind == "multi" else value)
    if wanted is None:
        if key in st.query_params:
            del st.query_params[key]
    elif st.query_params.get_all(key) != (wanted if isinstance(wanted, list) else [wanted]):
        st.query_params[key] = wanted


def _from_lesson(key: str, rule: Rule, on_change, args) -> None:
    """Give the widget a lesson step's value waiting for it (through the same check as a link)."""
    pending = st.session_state.get(PENDING_KEY)
    if not pending or key not in pending["values"]:
        return
    value = pending["values"].pop(key)
    raw = [str(v) for v in value] if isinstance(value, (list, tuple)) else [_lesson_text(value)]
    verdict = decide(raw, rule)
    if verdict.noted:
        add_note(Note(key, ", ".join(raw), verdict.reason, source=pending["source"]))
    changed = key in st.session_state and st.session_state[key] != verdict.value
    st.session_state[key] = list(verdict.value) if rule.kind == "multi" else verdict.value
    if changed and on_change is not None:
        on_change(*args)


def _lesson_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def set_pending(values: dict, source: str, page: str) -> None:
    """Lesson values for widgets drawn on ``page`` in the next script run (see :func:`check`)."""
    st.session_state[PENDING_KEY] = {"values": dict(values), "source": source, "page": page, "armed": False}


def pending_page() -> str | None:
    pending = st.session_state.get(PENDING_KEY)
    return pending["page"] if pending else None


def settle_pending(page: str) -> None:
    """Called once per script run on ``page``, after the sidebar: a lesson value still waiting one
    full run after it was set belongs to a widget that page does not draw, and is dropped."""
    pending = st.session_state.get(PENDING_KEY)
    if pending and pending["page"] == page:
        if pending["armed"] or not pending["values"]:
            st.session_state.pop(PENDING_KEY)
        else:
            pending["armed"] = True


#: Every key checked in this process (``tests/app/test_links.py`` compares it with known_parameters).
CHECKED_KEYS: set[str] = set()


def check(widget_fn, key: str, kwargs: dict, *, default=None, on_change=None, args=(), bound: bool = True) -> Rule:
    """Check the link's and a lesson step's value for the widget about to be drawn."""
    CHECKED_KEYS.add(key)
    rule = rule_for(widget_fn, kwargs, default)
    if not bound:
        rule = dataclasses.replace(rule, keys_in_url=True)
    _from_url(key, rule, bound)
    _from_lesson(key, rule, on_change, args)
    return rule


def widget(widget_fn, label: str, *, key: str, persist: bool = True, url_keys: bool = False, **kwargs):
    """Draw a URL-bound widget after :func:`check`: ``st.selectbox``, ``st.number_input``, ... with
    the same arguments (``persist``: keep its value while it is hidden, ``persist_state="session"``;
    read-only when a teacher's link locks or hides it, :func:`locked`).

    ``url_keys`` (a choice widget): the URL holds the option's key (``?dataset=csv``), not its label
    — Streamlit's binding writes the label, "Upload a CSV…" — so this widget is not bound: it is
    seeded from the checked URL value through session state, and its value written back here. A
    label in the URL (a link copied before) is still read."""
    kwargs["disabled"] = kwargs.get("disabled", False) or locked(key)
    if not url_keys:
        check(widget_fn, key, kwargs, on_change=kwargs.get("on_change"), args=kwargs.get("args", ()))
        return widget_fn(label, key=key, **kwargs, **_BIND, **(_SESSION if persist else {}))
    url_rule = check(
        widget_fn, key, kwargs, on_change=kwargs.get("on_change"), args=kwargs.get("args", ()), bound=False
    )
    value = widget_fn(label, key=key, **kwargs, **(_SESSION if persist else {}))
    _write_url(key, url_rule, value)
    return value


def locked(key: str) -> bool:
    """Whether a teacher's link shows control ``key`` read-only or hides it (:mod:`krr_app.teaching.teacher`)."""
    view = st.session_state.get(TEACHER_KEY)
    return view is not None and (key in view.locked or key in view.hidden)
