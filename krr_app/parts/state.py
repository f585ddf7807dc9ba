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

import contextlib
import contextvars
import hashlib
import threading
import time
from collections import OrderedDict

import streamlit as st

from krr_app import settings
from krr_app.charts import preview
from krr_app.jobs.config import DataSpec
from krr_app.jobs.executor import cluster_failure, get_executor
from krr_app.jobs.runs import RunRegistry

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


# -- the diagnostic pages' computations (krrcore.diagnostics), cached on plain parameters ----------
# ``data_key`` names the rows (the page's DataSpec, row count and seed); the kernel is its registry
# name and a sorted parameter tuple; the matrix passes as ``_X``. Results are small (spectra of at
# most DIAGNOSTICS_MAX_ROWS values, tables of a few dozen rows): what st.cache_data is for.


def _kernel(kernel: str, kernel_params: tuple):
    from krrcore.kernels import make_kernel

    return make_kernel(kernel, **dict(kernel_params))


def _compute(fn, /, *args, **kwargs):
    """A diagnostic's krrcore computation on the workers the runs use (ahead of queued runs), so
    a classroom on these pages does not load the web server; its result comes back to the cache.
    A cluster that cannot be reached is a ValueError, which the pages show as any refused setting
    (nothing is cached: the next look tries again)."""
    try:
        return get_executor().call(fn, *args, **kwargs)
    except Exception as exc:
        raise _unreached(exc) from None


def _unreached(exc: Exception) -> Exception:
    """A cluster failure as a ValueError (the pages show it as any refused setting); other errors as they are."""
    failure = cluster_failure(exc)
    return exc if failure is None else ValueError(f"it could not run on the cluster: {failure}")


def _diagnostics():
    import krrcore.diagnostics

    return krrcore.diagnostics


_DIAGNOSTICS = {"max_entries": settings.DIAGNOSTICS_CACHE_ENTRIES}
_SIZES = {"exact_max_M": settings.DENSE_SPECTRUM_MAX_M, "lanczos_steps": settings.LANCZOS_STEPS}


class Pending:
    """A diagnostic still computing on the workers: the page shows ``what`` in its place and streams
    the result in when it is ready (:func:`krr_app.parts.views.stream_in`)."""

    def __init__(self, what: str, key: tuple):
        self.what, self.key = what, key

    def __repr__(self) -> str:
        return f"Pending({self.what!r})"


class _Failed:
    def __init__(self, error: Exception):
        self.error = error


#: Whether the computations a page asks for now make its first picture (:func:`first_picture_calls`).
_FIRST_PICTURE: contextvars.ContextVar[bool] = contextvars.ContextVar("first_picture", default=False)


@contextlib.contextmanager
def first_picture_calls():
    """Computations started inside make a page's first picture: they go ahead of those queued
    before (another visitor's later sections), as a new visitor is waiting for them."""
    token = _FIRST_PICTURE.set(True)
    try:
        yield
    finally:
        _FIRST_PICTURE.reset(token)


#: Whether the computations a page asks for now wait for its next run (:func:`rest_waits`).
_REST_WAITS: contextvars.ContextVar[bool] = contextvars.ContextVar("rest_waits", default=False)


def rest_waits(waits: bool) -> None:
    """From here to the end of this page run, computations other than the first picture's
    (:func:`first_picture_calls`) are not started: they wait for the page's next run, which
    :func:`krr_app.parts.views.stream_in` asks for. On a new visitor's first page run the cores then go
    to the first picture and to the browser painting it, not to the sections below it. Every page
    run starts with ``rest_waits(False)`` (:func:`krr_app.parts.sidebar.render`)."""
    _REST_WAITS.set(waits)


class BackgroundResults:
    """The diagnostic pages' results, by their plain parameters (shared by all sessions, like
    ``st.cache_data``): computed on the workers, all of a page's sections at once, so a page draws
    each as it arrives instead of waiting for them one after another. Keeps the last ``size``
    results (a failure too: its error is raised again), and the computations under way.

    A computation the cluster took with it (its scheduler stopped) is not kept: it starts once
    more at once, on a fresh embedded cluster; a second such loss, or an external scheduler that
    cannot be reached, is raised as a ValueError naming the cluster (the next look tries again)."""

    def __init__(self, size: int):
        self.size = size
        self._done: OrderedDict = OrderedDict()
        self._running: dict = {}
        self._retried: set = set()  # keys started again after the cluster lost them
        self._lock = threading.Lock()

    def get(self, key: tuple, what: str, fn, /, *args, then=None, **kwargs):
        """The result of ``fn(*args, **kwargs)`` (``then`` applied here), a :class:`Pending` while
        it computes; raises its error if it failed."""
        with self._lock:
            if key in self._done:
                self._done.move_to_end(key)
                return self._value(self._done[key])
            future = self._running.get(key)
            if future is None and _REST_WAITS.get() and not _FIRST_PICTURE.get():
                return Pending(what, key)
            if future is None:
                try:
                    executor = get_executor()  # an unreachable scheduler: a message, as a failed submit
                    submit = executor.submit_first if _FIRST_PICTURE.get() else executor.submit_call
                    future = self._running[key] = submit(fn, *args, **kwargs)
                except Exception as exc:
                    self._retried.discard(key)
                    raise _unreached(exc) from None
        if not future.done():
            return Pending(what, key)
        try:
            value = future.result()
            value = then(value) if then is not None else value
        except Exception as exc:  # a ValueError the page explains, or the cluster's failure
            if cluster_failure(exc) is not None:  # not kept: the next look computes it again
                with self._lock:
                    replaced = self._running.get(key) is not future  # another look started it again
                    if not replaced:
                        self._running.pop(key, None)
                    again = replaced or key not in self._retried
                    self._retried.add(key)
                if again:
                    return self.get(key, what, fn, *args, then=then, **kwargs)
                with self._lock:
                    self._retried.discard(key)
                raise _unreached(exc) from None
            value = _Failed(exc)
        with self._lock:
            self._running.pop(key, None)
            self._retried.discard(key)
            self._done[key] = value
            while len(self._done) > self.size:
                self._done.popitem(last=False)
        return self._value(value)

    @staticmethod
    def _value(value):
        if isinstance(value, _Failed):
            raise value.error
        return value

    def ready(self, key: tuple) -> bool:
        """Whether the computation of ``key`` has finished (its result is kept or can be read)."""
        with self._lock:
            future = self._running.get(key)
            return key in self._done or (future is not None and future.done())

    def started(self, key: tuple) -> bool:
        """Whether the computation of ``key`` was started (it may have finished)."""
        with self._lock:
            return key in self._done or key in self._running

    def running(self) -> int:
        """How many computations are under way or finished but not yet read by a page."""
        with self._lock:
            return len(self._running)

    def wait_for(self, keys, timeout: float) -> None:
        """Block until the computations of ``keys`` have finished, for ``timeout`` seconds at most."""
        deadline = time.monotonic() + timeout
        with self._lock:
            futures = [self._running[k] for k in keys if k in self._running]
        for future in futures:
            try:
                future.result(max(0.0, deadline - time.monotonic()))
            except Exception:  # not yet (the page draws it when it is in), or failed (raised to the page)
                pass

    def wait(self, timeout: float | None = None) -> None:
        """Block until every computation under way has finished (tests; a page streams instead)."""
        with self._lock:
            futures = list(self._running.values())
        for future in futures:
            try:
                future.result(timeout)
            except Exception:  # its error is raised to the page that reads it
                pass

    def clear(self) -> None:
        with self._lock:
            self._done.clear()
            self._running.clear()
            self._retried.clear()


#: The diagnostic pages' results (Conditioning, Leverage scores).
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
    return _compute(
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

    return _compute(
        validation_map,
        _X,
        _y,
        M=M,
        objective=objective,
        seed=seed,
        sigma_center=sigma_center,
        tune_rows=settings.TUNE_MAP_MAX_ROWS,
    )
