"""Cached loaders and per-session state: the only module here that caches.

Caches are keyed on plain parameters only (names, ints, floats, a file's sha256); big objects
pass through arguments prefixed with ``_`` so Streamlit never hashes an array or a tensor.
``st.cache_resource`` (shared by reference, read-only by convention) holds datasets;
``st.cache_data`` holds small derived numbers; :data:`results` (:class:`BackgroundResults`) the
Conditioning and Leverage pages' spectra, tables and scores, computed by :mod:`krrcore.diagnostics`
and :mod:`krrcore.leverage` on the Dask workers the runs use (no numerics here, and none in the web
server's process), a page's sections all at once, each drawn when it arrives; the
per-session :class:`RunRegistry` holds runs and fitted models, keyed on the full
:class:`~krr_app.jobs.config.RunConfig`.
"""

from __future__ import annotations

import hashlib

import streamlit as st

from krr_app import settings
from krr_app.charts import preview
from krr_app.parts.background import BackgroundResults, Pending, compute
from krr_app.jobs.config import DataSpec
from krr_app.jobs.runs import RunRegistry
from krr_app.teaching.links import RUN_PARAM

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


@st.cache_resource(max_entries=MAX_CSV_DATASETS, show_spinner="Reading the table…")
def read_table(_raw: bytes, digest: str):
    """An uploaded file read into a DataFrame, with how it was written (shared, read-only);
    raises ValueError naming what is wrong with the file."""
    return _datasets().read_frame(_raw)


@st.cache_resource(max_entries=MAX_CSV_DATASETS, show_spinner="Preparing the table (fitting its preprocessing)…")
def load_table(
    _raw: bytes,
    digest: str,
    target: str,
    options: tuple,
    seed: int,
    n: int | None = None,
    filename: str = "uploaded table",
):
    """An uploaded table as a dataset, cached on the sha256 of its bytes (``digest``), the target
    and the preprocessing choices (``options``: DataSpec.csv_options)."""
    import warnings

    frame, fmt = read_table(_raw, digest)
    kwargs = {k: dict(v) if k == "roles" else v for k, v in options}
    with warnings.catch_warnings():  # the page states every decision itself
        warnings.simplefilter("ignore", _datasets().PreprocessingWarning)
        return _datasets().from_frame(frame, target, seed=seed, n=n, title=filename, source=filename, fmt=fmt, **kwargs)


@st.cache_data(max_entries=4 * MAX_CSV_DATASETS, show_spinner="Looking at the columns…")
def inspect_table(
    _raw: bytes, digest: str, target: str | None, roles: tuple = (), missing: str = "impute", task: str = "auto"
):
    """What the uploaded table holds and what will be done with each column (no fitting)."""
    frame, fmt = read_table(_raw, digest)
    return _datasets().inspect_frame(frame, target, roles=dict(roles), missing=missing, task=task, fmt=fmt)


def file_digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def load_spec(spec: DataSpec, raw: bytes | None = None):
    """The dataset for a DataSpec (a CSV spec needs its ``raw`` bytes unless already cached)."""
    if spec.is_csv:
        return load_table(
            raw,
            spec.csv_digest,
            spec.csv_target,
            spec.csv_options,
            spec.seed,
            spec.n,
            spec.csv_filename or "uploaded table",
        )
    return load_dataset(spec.name, spec.n, spec.seed, spec.knobs)


@st.cache_data(max_entries=2 * MAX_DATASETS, show_spinner=False)
def data_picture(_dataset, spec: DataSpec) -> str:
    """The data's picture as Markdown (:func:`krr_app.charts.preview.data_image_markdown`), drawn once per data spec."""
    return preview.data_image_markdown(_dataset)


@st.cache_data(max_entries=64, show_spinner="Computing the median heuristic…")
def median_sigma(_X, data_key: tuple) -> float:
    """Median pairwise distance of the training rows (σ's median heuristic), keyed on the data spec."""
    from krrcore.kernels import median_heuristic

    return median_heuristic(_X)


class SessionRuns:
    """The registry a browser session uses: its own, or the one of the tab its reload replaced."""

    def __init__(self):
        self.registry = RunRegistry()


def _release(slot: SessionRuns) -> None:
    slot.registry.release()


@st.cache_resource(scope="session", on_release=_release, show_spinner=False)
def _session_slot() -> SessionRuns:
    return SessionRuns()


#: session_state key of a handle to the registry (so tests can wait for its runs).
REGISTRY_KEY = "_krr_runs"
#: session_state key: the ``?run=`` value this session has already acted on.
_CLAIMED_KEY = "_krr_run_claimed"


def session_runs() -> RunRegistry:
    """This browser session's runs; on a reload, the runs of the tab it replaced (named by the
    link's ``?run=``, kept RELOAD_GRACE_SECONDS after that tab closed). Released when the tab
    closes: its runs go on for a reload to claim, then stop."""
    slot = _session_slot()
    wanted = st.query_params.get(RUN_PARAM)
    if wanted and st.session_state.get(_CLAIMED_KEY) != wanted:
        st.session_state[_CLAIMED_KEY] = wanted
        if wanted not in slot.registry.ids():
            _reconnect(slot, wanted)
    st.session_state[REGISTRY_KEY] = slot.registry
    return slot.registry


def _reconnect(slot: SessionRuns, run_id: str) -> None:
    from krr_app.jobs import live_api
    from krr_app.jobs.runs import HANDOVER

    claimed = HANDOVER.claim(run_id)
    if claimed is not None and not slot.registry.runs():
        slot.registry.close()
        slot.registry = claimed
        st.toast("Reconnected to this tab's runs from before the reload.")
        return
    if claimed is not None:  # this session has runs of its own: the old tab's stop
        claimed.close()
    fate = HANDOVER.fate(run_id)
    if fate is None and live_api.run_of(run_id) is not None:
        return  # another open tab's run (a link copied from it): its settings are what it shares
    st.info(
        f"The run this link names ({RUN_PARAM}={run_id}) is not on this server any more"
        + (f": it was {fate}" if fate else " (the server may have restarted)")
        + ". The link's settings are shown; press Run to compute them again.",
        icon=":material/history:",
    )


def page_run(key: str, run):
    """The run a page last started (``st.session_state[key]``); after a reload, the reconnected
    ``run`` of the page's settings, which becomes it."""
    if st.session_state.get(key) is None and run is not None:
        st.session_state[key] = run
    return st.session_state.get(key)


def show_run_in_link(run) -> None:
    """Name ``run`` in the link (``?run=``), so that reloading the page reconnects to it."""
    st.query_params[RUN_PARAM] = run.id
    st.session_state[_CLAIMED_KEY] = run.id


# -- the diagnostic pages' computations (krrcore.diagnostics), cached on plain parameters ----------
# ``data_key`` names the rows (the page's DataSpec, row count and seed); the kernel is its registry
# name and a sorted parameter tuple; the matrix passes as ``_X``. Results are small (spectra of at
# most DIAGNOSTICS_MAX_ROWS values, tables of a few dozen rows): what st.cache_data is for.


def _kernel(kernel: str, kernel_params: tuple):
    from krrcore.kernels import make_kernel

    return make_kernel(kernel, **dict(kernel_params))


def _diagnostics():
    import krrcore.diagnostics

    return krrcore.diagnostics


_DIAGNOSTICS = {"max_entries": settings.DIAGNOSTICS_CACHE_ENTRIES}
_SIZES = {"exact_max_M": settings.DENSE_SPECTRUM_MAX_M, "lanczos_steps": settings.LANCZOS_STEPS}


results = BackgroundResults(settings.DIAGNOSTICS_CACHE_ENTRIES)


def kernel_spectrum(_X, data_key, kernel: str, kernel_params: tuple) -> dict | Pending:
    """Eigenvalues of K (ascending), κ and method: exact up to DENSE_SPECTRUM_MAX_N rows, else Lanczos."""
    d = _diagnostics()
    return results.get(
        ("kernel_spectrum", data_key, kernel, kernel_params),
        "Eigenvalues of K",
        d.kernel_eigenvalues,
        _kernel(kernel, kernel_params),
        _X,
        then=d.spectrum_summary,
        exact_max_n=settings.DENSE_SPECTRUM_MAX_N,
        lanczos_steps=settings.LANCZOS_STEPS,
    )


def full_system(kernel_summary: dict, n: int, penalty: float) -> dict:
    """K + λnI from a cached :func:`kernel_spectrum` (no new eigendecomposition per λ)."""
    d = _diagnostics()
    spectrum = d.Spectrum.from_values("K", kernel_summary["eigenvalues"], kernel_summary["method"])
    return d.spectrum_summary(d.shifted_spectrum(spectrum, n, penalty))


def nystrom_systems(
    _X, data_key, kernel: str, kernel_params: tuple, penalty: float, M: int, seed: int
) -> dict | Pending:
    """{"nystrom": ..., "falkon": ...}: eigenvalues, κ and method of H̃ and W at M uniform centres."""
    from krrcore.centers import select_centers

    d = _diagnostics()
    key = ("nystrom_systems", data_key, kernel, kernel_params, penalty, M, seed)
    centers = select_centers("uniform", _X, M, seed)
    return results.get(
        key,
        "Spectra of the Nyström systems",
        d.nystrom_spectra,
        _kernel(kernel, kernel_params),
        _X,
        centers,
        penalty,
        seed=seed,
        **_SIZES,
        then=lambda spectra: {k: d.spectrum_summary(s) for k, s in spectra.items()},
    )


def askotch_blocks(_X, data_key, kernel: str, kernel_params: tuple, penalty: float, blocks: int, rank: int, seed: int):
    """(table, whole) of :func:`krrcore.diagnostics.askotch_blocks` (ASkotch's own set-up), or Pending."""
    return results.get(
        ("askotch_blocks", data_key, kernel, kernel_params, penalty, blocks, rank, seed),
        "ASkotch's block preconditioners",
        _diagnostics().askotch_blocks,
        _kernel(kernel, kernel_params),
        _X,
        penalty,
        blocks,
        rank,
        seed=seed,
        exact_max_block=settings.DENSE_SPECTRUM_MAX_BLOCK,
        exact_max_n=settings.DENSE_SPECTRUM_MAX_N,
        lanczos_steps=settings.LANCZOS_STEPS,
    )


def condition_vs_penalty(
    _X,
    data_key,
    kernel: str,
    kernel_params: tuple,
    M: int,
    seed: int,
    penalties: tuple,
    blocks: int | None = None,
    rank: int | None = None,
):
    """κ of every system for each λ (:func:`krrcore.diagnostics.condition_vs_penalty`), or Pending."""
    return results.get(
        ("condition_vs_penalty", data_key, kernel, kernel_params, M, seed, penalties, blocks, rank),
        "Condition numbers along λ",
        _diagnostics().condition_vs_penalty,
        _kernel(kernel, kernel_params),
        _X,
        penalties,
        M=M,
        seed=seed,
        blocks=blocks,
        rank=rank,
        exact_max_n=settings.DENSE_SPECTRUM_MAX_N,
        exact_max_block=settings.DENSE_SPECTRUM_MAX_BLOCK,
        **_SIZES,
    )


def condition_vs_M(_X, data_key, kernel: str, kernel_params: tuple, penalty: float, seed: int, Ms: tuple):
    """κ(H̃) and κ(W) for each number of uniform centres M (:func:`krrcore.diagnostics.condition_vs_M`), or Pending."""
    return results.get(
        ("condition_vs_M", data_key, kernel, kernel_params, penalty, seed, Ms),
        "Condition numbers along M",
        _diagnostics().condition_vs_M,
        _kernel(kernel, kernel_params),
        _X,
        penalty,
        Ms,
        seed=seed,
        **_SIZES,
    )


@st.cache_data(**_DIAGNOSTICS, show_spinner="Effective dimension…")
def effective_dimension_curve(_X, data_key, kernel: str, kernel_params: tuple, penalties: tuple, seed: int = 0):
    """d_eff(λ) for each λ (:func:`krrcore.diagnostics.effective_dimension_curve`)."""
    return compute(
        _diagnostics().effective_dimension_curve,
        _kernel(kernel, kernel_params),
        _X,
        penalties,
        seed=seed,
        exact_max_n=settings.DENSE_SPECTRUM_MAX_N,
        nystrom_M=settings.DEFF_NYSTROM_M,
    )


def _without_sampler_state(comparison):
    comparison.result = None  # the sampler's tensors: not needed by the page, not worth keeping
    return comparison


def leverage_report(_X, data_key, kernel: str, kernel_params: tuple, penalty: float, method: str, q2: float, seed: int):
    """A sampler's scores against the exact ones (:func:`krrcore.leverage.compare_with_exact`), or Pending."""
    from krrcore.leverage import compare_with_exact

    kwargs = {} if method == "uniform" else {"q2": q2}
    return results.get(
        ("leverage_report", data_key, kernel, kernel_params, penalty, method, q2, seed),
        "Leverage scores",
        compare_with_exact,
        _X,
        _kernel(kernel, kernel_params),
        penalty,
        method,
        seed=seed,
        then=_without_sampler_state,
        **kwargs,
    )


def centers_comparison(
    _X, data_key, kernel: str, kernel_params: tuple, penalty: float, M: int, leverage_penalty: float, seed: int
):
    """Uniform vs BLESS centres and FALKON's κ(W) with each (:func:`krrcore.diagnostics.compare_centers`), or
    Pending."""
    return results.get(
        ("centers_comparison", data_key, kernel, kernel_params, penalty, M, leverage_penalty, seed),
        "Centres: uniform vs BLESS",
        _diagnostics().compare_centers,
        _kernel(kernel, kernel_params),
        _X,
        penalty,
        M,
        leverage_penalty,
        seed=seed,
        **_SIZES,
    )


@st.cache_data(**_DIAGNOSTICS, show_spinner="Summarising the data…")
def dataset_summary(_dataset, data_key) -> dict:
    """:func:`krrcore.datasets.describe` of the split plus a per-feature table (original units)."""
    import pandas as pd

    summary = _datasets().describe(_dataset)
    constant = set(summary["constant_features"])
    summary["feature_table"] = pd.DataFrame(
        {
            "feature": [f["name"] for f in summary["features"]],
            "mean (original units)": [f["mean"] for f in summary["features"]],
            "std (original units)": [f["std"] for f in summary["features"]],
            "constant": [f["name"] in constant for f in summary["features"]],
        }
    )
    return summary


@st.cache_data(**_DIAGNOSTICS, show_spinner="The map of the objective over σ and λ…")
def tuning_map(_X, _y, data_key, M: int, objective: str, seed: int, sigma_center: float) -> dict:
    """:func:`krrcore.tuning.validation_map` on at most TUNE_MAP_MAX_ROWS training rows, around
    ``sigma_center`` (the tuning run's start): the rows, split and centres a tuning with the same
    seed uses on them."""
    from krrcore.tuning import validation_map

    return compute(
        validation_map,
        _X,
        _y,
        M=M,
        objective=objective,
        seed=seed,
        sigma_center=sigma_center,
        tune_rows=settings.TUNE_MAP_MAX_ROWS,
    )
