"""A teacher's link: which controls students see, and the presenter view.

``?hide=solver,kernel,dataset`` hides those controls (named by their URL parameter; the run uses
the link's or the default value), ``?lock=M,log10_penalty`` shows them read-only, and ``?present=1``
is the presenter view for a projector: larger type, the sidebar collapsed, one chart per row
(the live convergence chart's two panels one above the other). Like every link value they are
checked (:mod:`krr_app.teaching.links`): a name that is no control is named in the link's message and
ignored. The view is read on a session's first script run and written back to the URL on every
page, so it survives page switches and a copied link carries it.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from krr_app.teaching import links


@dataclass(frozen=True)
class TeacherView:
    """What a teacher's link asks: controls hidden, controls read-only, the presenter view."""

    hidden: frozenset[str] = frozenset()
    locked: frozenset[str] = frozenset()
    present: bool = False

    def url(self) -> dict[str, str]:
        """The view as URL parameters (none for the plain view)."""
        out = {name: ",".join(sorted(keys)) for name, keys in (("hide", self.hidden), ("lock", self.locked)) if keys}
        return {**out, **({"present": "1"} if self.present else {})}


def _names(param: str, raw: list[str]) -> frozenset[str]:
    """The control names of ``?param=a,b&param=c``; a name that is no control is named and dropped."""
    known = links.controls()
    names = [n.strip() for text in raw for n in text.split(",") if n.strip()]
    for name in dict.fromkeys(n for n in names if n in links.RENAMED):
        links.add_note(links.Note(param, name, f"is now called {links.RENAMED[name]!r} — read as that"))
    names = [links.RENAMED.get(n, n) for n in names]
    for name in dict.fromkeys(n for n in names if n not in known):
        hint = links.unknown_hint(name, known)
        links.add_note(links.Note(param, name, f"names no control of this app — ignored{hint}"))
    return frozenset(n for n in names if n in known)


def teacher_view() -> TeacherView:
    """This session's teacher view: read from the link on its first script run (each name checked,
    ``present`` 1/true or 0/false), kept for the session and written back to the URL on every page."""
    view = st.session_state.get(links.TEACHER_KEY)
    if view is None:
        present = [p.strip().lower() for p in st.query_params.get_all("present")]
        if present and present[-1] not in ("1", "true", "0", "false"):
            links.add_note(
                links.Note(
                    "present", st.query_params.get_all("present")[-1], "is neither 1 nor 0 — the presenter view is off"
                )
            )
        view = TeacherView(
            _names("hide", st.query_params.get_all("hide")),
            _names("lock", st.query_params.get_all("lock")),
            bool(present) and present[-1] in ("1", "true"),
        )
        st.session_state[links.TEACHER_KEY] = view
    wanted = view.url()
    for name in links.TEACHER_PARAMS:
        if name in wanted and st.query_params.get_all(name) != [wanted[name]]:
            st.query_params[name] = wanted[name]
        elif name not in wanted and name in st.query_params:
            del st.query_params[name]
    return view


def presenting() -> bool:
    """Whether this session shows the presenter view (``?present=1``), also before the link is read
    (the page's first run sets the sidebar's initial state with it)."""
    view = st.session_state.get(links.TEACHER_KEY)
    if view is not None:
        return view.present
    present = st.query_params.get_all("present")
    return bool(present) and present[-1].strip().lower() in ("1", "true")


#: The presenter view: larger type, and each row of columns that holds a chart or the data's
#: picture becomes one column (plotly and the live chart fill the width they are given).
PRESENT_CSS = """
html { font-size: 20px; }
[data-testid="stHorizontalBlock"]:has(.js-plotly-plot, img[alt^="The data"]) { flex-direction: column; }
[data-testid="stHorizontalBlock"]:has(.js-plotly-plot, img[alt^="The data"]) > [data-testid="stColumn"] {
  width: 100% !important; flex: 1 1 100% !important; }
"""


#: Controls that change another one's value, hidden with it (read-only with it: :func:`locked`).
COMPANIONS = {"sigma": ("median_sigma",)}


def locked(key: str) -> bool:
    """Whether control ``key`` is read-only: locked or hidden itself, or the companion of one that is."""
    return links.locked(key) or any(links.locked(owner) for owner, keys in COMPANIONS.items() if key in keys)


def teacher_css(view: TeacherView) -> str:
    """The page style of ``view``: hidden controls (their element containers, ``.st-key-<name>``: the
    names are checked control keys) and the presenter view."""
    rules = [
        f".st-key-{name}" for name in sorted(view.hidden | {c for k in view.hidden for c in COMPANIONS.get(k, ())})
    ]
    css = (", ".join(rules) + " { display: none !important; }\n") if rules else ""
    return css + (PRESENT_CSS if view.present else "")


def apply(view: TeacherView) -> None:
    """Style the page for ``view`` (nothing for the plain view)."""
    css = teacher_css(view)
    if css:
        st.html(f"<style>{css}</style>")
