"""The pages' inputs and what they keep: widgets bound to the URL, the sidebar's data and kernel as
cache keys, CSV downloads, and "keep what was computed" (a section whose input became invalid shows
its last valid result under the error instead of going blank). The pages reach them through
:mod:`krr_app.parts.views`, which re-exports them beside the other page building blocks.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from krr_app.jobs.spec import frozen
from krr_app.teaching import links
from krr_app.text import plain

_BOUND = {"bind": "query-params", "persist_state": "session"}


def bound_number(label: str, key: str, default, **kwargs):
    """A number input bound to the URL (``?key=value``, checked by :func:`krr_app.teaching.links.check`) and
    kept across page switches."""
    return bound_widget(st.number_input, label, key, default, **kwargs)


def bound_widget(widget, label: str, key: str, default, **kwargs):
    """Any widget (``st.select_slider``, ``st.selectbox``, ...) bound to the URL, with a first-visit default."""
    links.check(widget, key, kwargs, default=default)
    st.session_state.setdefault(key, default)
    kwargs["disabled"] = kwargs.get("disabled", False) or links.locked(key)
    return widget(label, key=key, **kwargs, **_BOUND)


def require_data(settings):
    """The sidebar's dataset, or a message and ``st.stop()`` when there is none (nothing to diagnose)."""
    if settings.dataset is None:
        message = settings.data_error or "Choose a dataset in the sidebar."
        (st.info if settings.data is None else st.error)(message)
        st.stop()
    return settings.dataset


def kernel_key(settings) -> tuple[str, tuple]:
    """The sidebar's kernel as plain cache-key values: (name, sorted parameter tuple)."""
    return settings.kernel, frozen(settings.kernel_params)


def download_csv(frame: pd.DataFrame, *, key: str, filename: str, label: str = "Download data (CSV)") -> None:
    """A download button with the plotted table (the chart's PNG is in its own toolbar)."""
    st.download_button(
        label,
        frame.to_csv(index=False),
        file_name=filename,
        mime="text/csv",
        key=key,
        on_click="ignore",
        disabled=frame.empty,
        icon=":material/download:",
    )


def remember(key: str, value):
    """Store a section's last valid result (per session) and return it."""
    st.session_state[f"_diag_last_{key}"] = value
    return value


def last_valid(key: str, reason: str):
    """Show ``reason`` (it may quote krrcore's message about a user's input: as text) as an error;
    return the section's last valid result (or None) with a caption."""
    st.error(plain(reason, None))
    value = st.session_state.get(f"_diag_last_{key}")
    if value is not None:
        st.caption("Showing the last valid result below (computed with the settings noted in its heading).")
    return value
