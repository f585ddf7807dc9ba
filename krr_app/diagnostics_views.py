"""Page building blocks shared by the Conditioning, Leverage scores and Dataset pages.

The data, kernel, λ and M come from the shared sidebar (:mod:`krr_app.sidebar`); these helpers
add what the diagnostic pages have in common: how many training points they look at (bounded,
URL-bound), CSV downloads of every plotted table, κ formatting that says "estimate" when it is
one, and "keep what was computed": a section whose input became invalid shows its last valid
result under the error instead of going blank.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from .diagnostics_cache import subsample
from .diagnostics_text import TEXT as DIAG_TEXT
from .explain import TEXT

_BOUND = {"bind": "query-params", "persist_state": "session"}


def bound_number(label: str, key: str, default, **kwargs):
    """A number input bound to the URL (``?key=value``) and kept across page switches."""
    st.session_state.setdefault(key, default)
    return st.number_input(label, key=key, **kwargs, **_BOUND)


def bound_widget(widget, label: str, key: str, default, **kwargs):
    """Any widget (``st.select_slider``, ``st.selectbox``, ...) bound to the URL, with a first-visit default."""
    st.session_state.setdefault(key, default)
    return widget(label, key=key, **kwargs, **_BOUND)


def require_data(settings):
    """The sidebar's dataset, or a message and ``st.stop()`` when there is none (nothing to diagnose)."""
    if settings.dataset is None:
        message = settings.data_error or "Choose a dataset in the sidebar."
        (st.info if settings.data is None else st.error)(message)
        st.stop()
    return settings.dataset


def points_used(dataset, *, key: str, default: int, maximum: int, help: str) -> int:
    """How many training points the page computes on (a URL-bound number, at most ``maximum``)."""
    top = min(dataset.n_train, maximum)
    value = bound_number("Training points used", key, min(default, top), min_value=2, max_value=max(top, 2),
                         step=100, help=help)
    return int(min(value, top))


def training_rows(dataset, spec, rows: int, seed: int = 0) -> tuple[np.ndarray, tuple, str]:
    """The first ``rows`` training points of a seeded subsample, the cache key naming them, a caption."""
    X = subsample(dataset.X_train, rows, seed)
    caption = (f"Computed on all n = {len(X):,} training points." if len(X) == dataset.n_train else
               f"Computed on a seeded random subsample of n = {len(X):,} of the {dataset.n_train:,} training "
               "points (n in λn below is this n).")
    return X, (spec, len(X), seed), caption


def kernel_key(settings) -> tuple[str, tuple]:
    """The sidebar's kernel as plain cache-key values: (name, sorted parameter tuple)."""
    return settings.kernel, tuple(sorted(settings.kernel_params.items()))


def format_kappa(value: float) -> str:
    if not math.isfinite(value):
        return "∞"
    return f"{value:.3g}" if value < 1e4 else f"{value:.2e}"


def kappa_label(method: str) -> str:
    return "exact" if method == "exact" else f"estimate ({method}, lower bound)"


def download_csv(frame: pd.DataFrame, *, key: str, filename: str, label: str = "Download data (CSV)") -> None:
    """A download button with the plotted table (the chart's PNG is in its own toolbar)."""
    st.download_button(label, frame.to_csv(index=False), file_name=filename, mime="text/csv", key=key,
                       on_click="ignore", disabled=frame.empty, icon=":material/download:")


def remember(key: str, value):
    """Store a section's last valid result (per session) and return it."""
    st.session_state[f"_diag_last_{key}"] = value
    return value


def last_valid(key: str, reason: str):
    """Show ``reason`` as an error; return the section's last valid result (or None) with a caption."""
    st.error(reason)
    value = st.session_state.get(f"_diag_last_{key}")
    if value is not None:
        st.caption("Showing the last valid result below (computed with the settings noted in its heading).")
    return value


def explanation(*keys: str, title: str = "What am I looking at?") -> None:
    """Expander with notes from :mod:`krr_app.explain` and this page's own (same keys namespace)."""
    with st.expander(title):
        for key in keys:
            st.markdown(DIAG_TEXT.get(key) or TEXT[key])
