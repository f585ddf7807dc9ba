"""Cached loaders and per-session state: the only module here that caches.

Caches are keyed on plain parameters only (names, ints, floats, a file's sha256); big objects
pass through arguments prefixed with ``_`` so Streamlit never hashes an array or a tensor.
``st.cache_resource`` (shared by reference, read-only by convention) holds datasets;
``st.cache_data`` holds small derived numbers; the per-session :class:`RunRegistry` holds runs
and fitted models, keyed on the full :class:`~krr_app.config.RunConfig`.
"""
from __future__ import annotations

import hashlib
import io

import streamlit as st

from .config import DataSpec
from .runs import RunRegistry

#: Datasets kept in memory at once (all sessions together).
MAX_DATASETS = 8
MAX_CSV_DATASETS = 4


def _datasets():
    # Imported lazily: the module is the data helper's and may be heavy to import.
    from krrcore import datasets

    return datasets


@st.cache_resource(max_entries=MAX_DATASETS, show_spinner="Loading the data…")
def load_dataset(name: str, n: int | None, seed: int, knobs: tuple[tuple[str, object], ...] = ()):
    """A registry dataset with its knobs; raises ValueError (shown by the page) on bad knobs."""
    return _datasets().load(name, n=n, seed=seed, **dict(knobs))


@st.cache_resource(max_entries=MAX_CSV_DATASETS, show_spinner="Reading the CSV…")
def load_csv(_raw: bytes, digest: str, target: str, seed: int, n: int | None = None, filename: str = "uploaded CSV"):
    """An uploaded CSV, cached on the sha256 of its bytes (``digest``) and the chosen target."""
    return _datasets().from_csv(io.BytesIO(_raw), target=target, seed=seed, n=n, title=filename)


@st.cache_data(max_entries=MAX_CSV_DATASETS, show_spinner=False)
def inspect_csv(_raw: bytes, digest: str, target: str | None):
    """What is wrong with an uploaded CSV (columns, non-numeric, missing values, row count)."""
    return _datasets().inspect_csv(io.BytesIO(_raw), target=target)


def file_digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def load_spec(spec: DataSpec, raw: bytes | None = None):
    """The dataset for a DataSpec (a CSV spec needs its ``raw`` bytes unless already cached)."""
    if spec.is_csv:
        return load_csv(raw, spec.csv_digest, spec.csv_target, spec.seed, spec.n, spec.csv_filename or "uploaded CSV")
    return load_dataset(spec.name, spec.n, spec.seed, spec.knobs)


@st.cache_data(max_entries=64, show_spinner="Computing the median heuristic…")
def median_sigma(_X, data_key: tuple) -> float:
    """Median pairwise distance of the training rows (σ's median heuristic), keyed on the data spec."""
    from krrcore.kernels import median_heuristic

    return median_heuristic(_X)


def _close(registry: RunRegistry) -> None:
    registry.close()


@st.cache_resource(scope="session", on_release=_close, show_spinner=False)
def _session_registry() -> RunRegistry:
    return RunRegistry()


#: session_state key of a handle to the registry (so tests can wait for its runs).
REGISTRY_KEY = "_krr_runs"


def session_runs() -> RunRegistry:
    """This browser session's runs; released (every run stopped) when the tab closes."""
    registry = _session_registry()
    st.session_state[REGISTRY_KEY] = registry
    return registry
