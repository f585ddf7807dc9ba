"""The pages' inputs and what they keep: widgets bound to the URL, the sidebar's data and kernel as
cache keys, CSV downloads, and "keep what was computed" (a section whose input became invalid shows
its last valid result under the error instead of going blank). The pages reach them through
:mod:`krr_app.parts.views`, which re-exports them beside the other page building blocks.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from krr_app.jobs.spec import frozen
from krr_app.parts import upload
from krr_app.teaching import links
from krr_app.text import plain

_BOUND = {"bind": "query-params", "persist_state": "session"}


def bound_number(label: str, key: str, default, **kwargs):
    """A number input bound to the URL (``?key=value``, checked by :func:`krr_app.teaching.links.check`) and
    kept across page switches."""
    return bound_widget(st.number_input, label, key, default, **kwargs)


def bound_widget(widget, label: str, key: str, default, **kwargs):
    """Any widget (``st.select_slider``, ``st.selectbox``, ...) bound to the URL, with a first-visit default.

    A choice shown through a ``format_func`` goes through :func:`krr_app.teaching.links.widget`'s
    ``url_keys``: Streamlit's binding would write the shown label in the URL, links carry the key."""
    if widget in (st.selectbox, st.radio, st.multiselect) and "format_func" in kwargs:
        if widget is st.multiselect:
            kwargs.setdefault("default", list(default))
        else:
            kwargs.setdefault("index", list(kwargs["options"]).index(default))
        return links.widget(widget, label, key=key, url_keys=True, **kwargs)
    links.check(widget, key, kwargs, default=default)
    st.session_state.setdefault(key, default)
    kwargs["disabled"] = kwargs.get("disabled", False) or links.locked(key)
    return widget(label, key=key, **kwargs, **_BOUND)


def require_data(settings):
    """The sidebar's dataset, or a message and ``st.stop()`` when there is none (nothing to diagnose);
    an uploaded table's target taken by the rule is said first (:func:`target_rule_note`)."""
    if settings.dataset is None:
        message = settings.data_error or "Choose a dataset in the sidebar."
        (st.info if settings.data is None else st.error)(message)
        st.stop()
    target_rule_note(settings)
    return settings.dataset


def target_rule_note(settings) -> None:
    """Above everything a page computes for an uploaded table whose target no one chose: which
    column the rule took (:func:`krr_app.parts.upload.target_rule`), and where to choose another."""
    spec = settings.data
    if spec is None or not spec.csv_digest or spec.csv_target is None:
        return
    rule = upload.target_rule(spec.csv_digest, spec.csv_target)
    if rule:
        st.info(rule, icon=":material/ads_click:")


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


def number(label: str, key: str, value, *, help: str | None = None, **kwargs):
    """A URL-bound number input whose default is ``value``.

    A bound widget leaves its default out of the URL, so every default here is a function of
    widgets drawn before it (the dataset, the kernel, the solver): a link then rebuilds it.
    """
    return links.widget(st.number_input, label, value=value, key=key, help=help, **kwargs)
