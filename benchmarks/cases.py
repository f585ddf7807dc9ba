"""The suite's cases: what each measures (``measure``) and how it is shown (``summarise``).

A case's ``measure(quick, sizes)`` returns plain result dicts (one per fit, floor or app run, each
measured in a fresh process where memory is reported); ``summarise(results)`` turns them into
tables and plotly figures. The two are apart so that a full run can be measured in several
invocations (``--sizes``, ``--merge``: each hold of the machine stays short) and shown as one.
Every iterative row carries ``x floor``: its seconds per iteration over the hardware floor at the
same n, M, d and dtype (:func:`benchmarks.common.hardware_floor`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from benchmarks import bench_gpu, bench_logistic, bench_speed, bench_threads, speed_summary
from benchmarks.cases_krrcore import (
    app_measure,
    app_summarise,
    leverage_measure,
    leverage_summarise,
    scaling_measure,
    scaling_summarise,
    tune_measure,
    tune_summarise,
    uncertainty_measure,
    uncertainty_summarise,
)
from benchmarks.cases_vs_peers import (
    falkon_vs_nystroem_measure,
    falkon_vs_nystroem_summarise,
    full_system_measure,
    full_system_summarise,
    qm9_measure,
    qm9_summarise,
)
from benchmarks.summary import Summary


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    measure: Callable[[bool, list[int] | None], list[dict]]
    summarise: Callable[[list[dict]], Summary]
    sized: bool = False  # takes --sizes (results merge by n)
    #: The machine results were measured on when not this one (a stored run shown where the case cannot run).
    measured_on: Callable[[list[dict]], dict | None] = lambda results: None


CASES: dict[str, Case] = {
    c.name: c
    for c in [
        Case(
            "falkon_vs_nystroem",
            "FALKON vs scikit-learn Nystroem + Ridge at equal M: time to equal test error",
            falkon_vs_nystroem_measure,
            falkon_vs_nystroem_summarise,
            sized=False,
        ),
        Case(
            "full_system",
            "FALKON, NyströmPCG, rlaopt, CG, ASkotch, GPyTorch, exact KRR against n: time and test error",
            full_system_measure,
            full_system_summarise,
            sized=True,
        ),
        Case("qm9", "QM9 HOMO: test SMAPE against seconds", qm9_measure, qm9_summarise),
        Case(
            "leverage",
            "BLESS, BLESS-R, Recursive-RLS and exact scores: time and R-ACC against n",
            leverage_measure,
            leverage_summarise,
            sized=True,
        ),
        Case(
            "scaling",
            "FALKON time per iteration and peak memory against n, with the floor",
            scaling_measure,
            scaling_summarise,
            sized=True,
        ),
        Case(
            "app",
            "The app: Run to first chart, in-app solver seconds (first Run, Run again) against krrcore",
            app_measure,
            app_summarise,
        ),
        Case(
            "tune",
            "Tuning σ and λ: krrcore.tune against a 10 × 10 grid, a random search and GPyTorch",
            tune_measure,
            tune_summarise,
        ),
        Case(
            "uncertainty",
            "Predictive uncertainty: 90% interval coverage and cost per point, beside scikit-learn's GP",
            uncertainty_measure,
            uncertainty_summarise,
        ),
        Case(
            "speed",
            "float32 against float64, BLESS centres against uniform, 10⁶ points: time and test error",
            bench_speed.measure,
            lambda results: Summary(*speed_summary.summarise(results)),
            sized=True,
        ),
        Case(
            "threads",
            "FALKON at 1 and 2 threads, default and 512 MiB budgets: medians and spread, a fresh process per fit",
            bench_threads.measure,
            lambda results: Summary(*bench_threads.summarise(results)),
            sized=True,
        ),
        Case(
            "gpu",
            "FALKON and ASkotch on a CUDA card against its floor (the stored run where CUDA is absent)",
            bench_gpu.measure,
            lambda results: Summary(*bench_gpu.summarise(results)),
            sized=True,
            measured_on=bench_gpu.measured_on,
        ),
        Case(
            "logistic",
            "Logistic FALKON against Nystroem + LogisticRegression and squared-loss FALKON at the same M",
            bench_logistic.measure,
            lambda results: Summary(*bench_logistic.summarise(results)),
        ),
    ]
}
