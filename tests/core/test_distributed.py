"""One problem on two worker processes (krrcore.distributed, public as krrcore.sharded): the same results as
one process.

The cluster is krrcore's own (``krrcore.distributed.connect``: scheduler and two 1-thread workers as
subprocesses, each with a 2 GiB memory limit), started once for the module and closed after it.
Equality is checked in float64 against the same fit in this process: predictions and every
iteration's residual to 1e-10 relative. The sums differ only in their order (per shard, then
across shards), so the two runs differ by round-off alone.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from dask_processes import scheduler_and_workers

from krrcore import ASkotch, Falkon, GaussianKernel, NystromCG, NystromGD, NystromPCG
from krrcore.centers import BlessCenters
from krrcore.distributed import LocalClusterShape, connect
from krrcore.leverage import bless, bless_r
from krrcore.memory import MemoryLimitError
from krrcore.ops import KernelOperator
from krrcore import sharded

TOL = 1e-10
KERNEL = GaussianKernel(1.5)


def relative(a, b) -> float:
    a, b = torch.as_tensor(np.asarray(a)), torch.as_tensor(np.asarray(b))
    return float((a - b).norm() / a.norm())


@pytest.fixture(scope="module")
def cluster():
    connection = connect(shape=LocalClusterShape(n_workers=2, threads=1, memory_limit=2 * 2**30))
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 5))
    y = np.sin(X @ rng.standard_normal(5) / 2) + 0.1 * rng.standard_normal(2000)
    X_test = rng.standard_normal((300, 5))
    return X, y, X_test


@pytest.fixture(scope="module")
def shards(cluster, problem):
    X, y, _ = problem
    Xs, ys = sharded.scatter(X, y, cluster=cluster)
    assert Xs.n_shards == 2 and len(set(Xs.workers)) == 2
    return Xs, ys


def assert_same_fit(estimator, problem, shards, tol=TOL):
    X, y, X_test = problem
    local = estimator.fit(X, y)
    predictions, residuals = local.predict(X_test), [r.residual for r in local.trace_]
    distributed = estimator.fit(*shards)
    assert [r.iteration for r in distributed.trace_] == list(range(len(residuals)))
    assert relative(residuals, [r.residual for r in distributed.trace_]) < tol
    assert relative(predictions, distributed.predict(X_test)) < tol
    return distributed


def test_every_product_of_the_sharded_operator_equals_the_local_one(problem, shards):
    X, y, _ = problem
    Xs, ys = shards
    C = torch.as_tensor(X[:100])
    local = KernelOperator(KERNEL, torch.as_tensor(X), C)
    distributed = sharded.ShardedKernelOperator(KERNEL, Xs, C)
    g = torch.Generator().manual_seed(0)
    v = torch.randn(100, 2, generator=g, dtype=torch.float64)
    u = torch.randn(2000, 2, generator=g, dtype=torch.float64)
    Y = torch.as_tensor(y)[:, None]
    rows = torch.tensor([5, 1999, 0, 1000, 999])
    pairs = [
        (local.matvec(v), distributed.matvec(v)),
        (local.matvec(v, rows=rows), distributed.matvec(v, rows=rows)),
        (local.rmatvec(u), distributed.rmatvec(u)),
        (local.rmatvec(Y), distributed.rmatvec(ys)),
        (local.fused(v, u), distributed.fused(v, u)),
        (local.fused(None, Y), distributed.fused(None, ys)),
        (local.gram(), distributed.gram()),
        (local.gram(u)[1], distributed.gram(u)[1]),
    ]
    for expected, got in pairs:
        assert got.shape == expected.shape and relative(expected, got) < 1e-13
    assert distributed.times.calls == len(pairs)
    with pytest.raises(NotImplementedError, match="never hands them out"):
        next(distributed.blocks())


# Unpreconditioned CG/GD on H̃ (condition number 1e5–5e7 here) amplify the round-off of the sums'
# order by up to that factor: their bound is looser; FALKON's preconditioned system keeps 1e-10.
@pytest.mark.parametrize(
    "make, tol",
    [
        (lambda: Falkon(KERNEL, 1e-3, M=200, maxiter=10), TOL),
        (lambda: NystromCG(KERNEL, 1e-3, M=150, maxiter=8), 1e-6),
        (lambda: NystromGD(KERNEL, 1e-3, M=150, maxiter=5), 1e-6),
    ],
    ids=["falkon", "nystrom_cg", "nystrom_gd"],
)
def test_nystrom_solvers_on_two_workers_equal_one_process(make, tol, problem, shards):
    fitted = assert_same_fit(make(), problem, shards, tol)
    assert isinstance(fitted.operator_, sharded.ShardedKernelOperator)
    # b̃, NystromGD's power iteration, then one fused product per iteration: nothing else travels
    assert fitted.operator_.times.calls == 1 + fitted._SETUP_PASSES + fitted.n_iter_
    assert [w for w, _ in fitted.worker_memory_estimates_] == shards[0].workers


def test_falkon_bless_and_bless_scores_on_two_workers_equal_one_process(problem, shards):
    """float64 scoring: the same arithmetic on shards as in one process. float32 scoring (the
    default): the same draws, weights within float32's rounding (blocks of other widths round
    differently); the returned scores are float64 in both."""
    X, _, _ = problem
    Xs, _ = shards
    for sampler in (bless, bless_r):
        for precision, tol in (("float64", TOL), ("float32", 1e-5)):
            local, distributed = (
                sampler(data, KERNEL, 1e-3, points="all", seed=3, precision=precision)
                for data in (torch.as_tensor(X), Xs)
            )
            assert torch.equal(local.indices, distributed.indices)
            assert relative(local.weights, distributed.weights) < tol
            assert relative(local.scores, distributed.scores) < tol
    assert_same_fit(Falkon(KERNEL, 1e-4, M=150, maxiter=8, centers=BlessCenters(precision="float64")), problem, shards)


@pytest.mark.parametrize("storage", ["on_the_fly", "stored"])
def test_nystrom_pcg_on_two_workers_equals_one_process(storage, problem, shards):
    fitted = assert_same_fit(NystromPCG(KERNEL, 1e-3, rank=50, maxiter=8, kernel_storage=storage), problem, shards)
    assert isinstance(fitted._system, sharded.ShardedFullSystem) and fitted.kernel_storage_ == storage
    assert isinstance(fitted.centers_, sharded.ShardedArray)  # the model expands over rows left on the workers


def test_float32_on_two_workers_behaves_as_one_process(problem, shards):
    X, y, X_test = problem
    exact = Falkon(KERNEL, 1e-3, M=200, maxiter=10).fit(X, y).predict(X_test)
    local = Falkon(KERNEL, 1e-3, M=200, maxiter=10, dtype="float32").fit(X, y)
    distributed = Falkon(KERNEL, 1e-3, M=200, maxiter=10, dtype="float32").fit(*shards)
    assert shards[0].dtype == torch.float64 and distributed.operator_.dtype == torch.float32
    assert distributed.coef_.dtype == torch.float32
    # float32 kernel blocks in another order move the model by float32 round-off (about 1e-4 here;
    # one process with another block size moves it as much): as close to float64's as one process
    local_error = relative(exact, local.predict(X_test))
    assert local_error < 1e-3
    assert relative(exact, distributed.predict(X_test)) < 2 * local_error + 1e-6


def test_stop_ends_a_sharded_fit_between_iterations(problem, shards):
    stop = threading.Event()
    estimator = Falkon(KERNEL, 1e-3, M=200, maxiter=50)
    records = []
    for record in estimator.iter_fit(*shards, stop_event=stop):
        records.append(record)
        if record.iteration == 3:
            stop.set()
    assert [r.iteration for r in records] == [0, 1, 2, 3]
    assert estimator.n_iter_ == 3 and "stop" in estimator.stop_reason_
    X, y, X_test = problem
    three = Falkon(KERNEL, 1e-3, M=200, maxiter=3).fit(X, y)
    assert relative(three.predict(X_test), estimator.predict(X_test)) < TOL


def test_a_worker_whose_memory_cannot_hold_its_rows_of_K_refuses_the_fit(cluster):
    # 20,000 rows on two workers: each would store 10,000 × 20,000 float64 entries of K (1.5 GiB),
    # more than half of what a 2 GiB worker has left; refused before anything is allocated.
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((20000, 3)), rng.standard_normal(20000)
    shards = sharded.scatter(X, y, cluster=cluster)
    with pytest.raises(
        MemoryLimitError,
        match=r"On Dask worker tcp://.*memory limit 2 GiB.*shard of 10,000 of the "
        r"n=20,000 rows.*rows of K \(10,000×20,000\)",
    ):
        NystromPCG(KERNEL, 1e-3, rank=20, maxiter=2, kernel_storage="stored").fit(*shards)
    memory = [info["metrics"]["memory"] for info in cluster.workers().values()]
    assert max(memory) < 2**30  # nothing the size of K was allocated


def test_fit_takes_dask_arrays(cluster, problem):
    da = pytest.importorskip("dask.array")
    X, y, X_test = problem
    local = Falkon(KERNEL, 1e-3, M=200, maxiter=6).fit(X, y)
    with cluster.client.as_current():
        distributed = Falkon(KERNEL, 1e-3, M=200, maxiter=6).fit(
            da.from_array(X, chunks=500), da.from_array(y, chunks=500)
        )
    data = distributed.operator_.X
    assert sum(data.sizes) == 2000 and set(data.workers) <= set(cluster.workers())
    assert relative(local.predict(X_test), distributed.predict(X_test)) < TOL


def test_data_generated_on_the_workers_by_seed_and_shard(cluster):
    one = sharded.generate("higgs_like", 3000, seed=5, cluster=cluster, n_test=200)
    two = sharded.generate("higgs_like", 3000, seed=5, cluster=cluster)
    assert one.X.shape == (3000, 28) and one.y.shape == (3000, 1) and one.X.n_shards == 2
    assert torch.equal(one.X.gather(), two.X.gather())  # reproducible from (seed, shard count)
    Z = one.X.gather()
    assert torch.allclose(Z.mean(0), torch.zeros(28, dtype=Z.dtype), atol=1e-8)  # z-scored over all shards
    assert set(one.y.distinct_rows().flatten().tolist()) == {-1.0, 1.0}
    model = Falkon(GaussianKernel(5.0), 1e-4, M=200, maxiter=5).fit(one.X, one.y)
    error = np.mean(np.sign(model.predict(one.X_test)) != one.y_test[:, 0])
    assert error < 0.45  # better than chance on the look-alike's overlapping classes


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_table_read_by_the_workers(kind, cluster, problem, tmp_path):
    pd = pytest.importorskip("pandas")
    X, y, _ = problem
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(5)]).assign(target=y)
    for part, rows in enumerate(np.array_split(np.arange(len(frame)), 4)):
        if kind == "csv":
            frame.iloc[rows].to_csv(tmp_path / f"part{part}.csv", index=False)
        else:
            frame.iloc[rows].to_parquet(tmp_path / f"part{part}.parquet", index=False)
    path = tmp_path / "part*.csv" if kind == "csv" else tmp_path
    data = sharded.read_table(str(path), "target", cluster=cluster)
    assert data.X.shape == (2000, 5) and data.info["features"] == [f"x{i}" for i in range(5)]
    Z = (X - X.mean(0)) / X.std(0)
    z = (y - y.mean()) / y.std()
    assert relative(Z, data.X.gather()) < 1e-12 and relative(z, data.y.gather()[:, 0]) < 1e-12
    local = Falkon(KERNEL, 1e-3, M=100, maxiter=5).fit(Z, z)
    distributed = Falkon(KERNEL, 1e-3, M=100, maxiter=5).fit(data.X, data.y)
    assert relative(local.predict(Z[:100]), distributed.predict(Z[:100])) < TOL


def test_solvers_without_a_sharded_form_say_so(shards):
    with pytest.raises(ValueError, match="ASkotch does not run on sharded data; Falkon, NystromCG"):
        ASkotch(KERNEL, 1e-3).fit(*shards)
    with pytest.raises(ValueError, match="eval_train=True would gather"):
        Falkon(KERNEL, 1e-3, M=50, eval_train=True).fit(*shards)


def test_a_fit_through_a_separate_dask_scheduler_and_two_workers(problem, tmp_path):
    """`dask scheduler` and two `dask worker` processes on localhost, as docs/distributed.md says."""
    X, y, X_test = problem
    with scheduler_and_workers(tmp_path, n_workers=2) as address:
        connection = connect(address)
        try:
            connection.client.wait_for_workers(2, timeout=60)
            shards = sharded.scatter(X, y, cluster=connection)
            assert len(set(shards[0].workers)) == 2
            local = Falkon(KERNEL, 1e-3, M=200, maxiter=6).fit(X, y)
            distributed = Falkon(KERNEL, 1e-3, M=200, maxiter=6).fit(*shards)
            assert relative(local.predict(X_test), distributed.predict(X_test)) < TOL
            del shards, distributed
        finally:
            connection.close()


def test_a_sharded_fit_moves_an_offset_x_to_its_origin_and_checks_feature_names_as_in_memory(cluster, problem):
    """X + 1e8 on two workers: the same origin as the in-memory fit (the shards' moments combined,
    not Σx² − n·mean², which cancels), so the same model; a dask DataFrame's column names are
    recorded and checked at predict, and a sharded refit on bare arrays forgets the names and the
    origin of an earlier fit."""
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y, X_test = problem
    moved, moved_test = X + 1e8, X_test + 1e8
    local = Falkon(KERNEL, 1e-3, M=200, maxiter=6).fit(moved, y)
    distributed = Falkon(KERNEL, 1e-3, M=200, maxiter=6).fit(*sharded.scatter(moved, y, cluster=cluster))
    torch.testing.assert_close(distributed.x_origin_, local.x_origin_, rtol=1e-14, atol=0)
    assert relative(local.predict(moved_test), distributed.predict(moved_test)) < 1e-8
    plain = Falkon(KERNEL, 1e-3, M=200, maxiter=6).fit(X, y)
    assert relative(plain.predict(X_test), distributed.predict(moved_test)) < 1e-6  # as good as centred X

    columns = [f"x{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=columns)
    with cluster.client.as_current():
        model = Falkon(KERNEL, 1e-3, M=200, maxiter=6).fit(
            dd.from_pandas(frame, npartitions=4), dd.from_pandas(pd.Series(y), npartitions=4)
        )
    assert list(model.feature_names_in_) == columns and model.n_features_in_ == X.shape[1]
    with pytest.raises(ValueError, match="Feature names"):
        model.predict(pd.DataFrame(X_test, columns=columns)[columns[::-1]])
    model.fit(*sharded.scatter(X, y, cluster=cluster))
    assert not hasattr(model, "feature_names_in_") and not hasattr(model, "x_origin_")
    model.fit(moved, y)  # in memory, then sharded: the origin is this data's
    model.fit(*sharded.scatter(X, y, cluster=cluster))
    assert not hasattr(model, "x_origin_")


def test_a_sharded_fit_takes_the_target_s_offset_from_the_shards(cluster, problem):
    """y + 5,000 on two workers: the offset is the shards' combined mean (``ShardedArray.moments``),
    the targets are shifted where they live, and the model is the in-memory one."""
    X, y, X_test = problem
    local = Falkon(KERNEL, 1e-3, M=200, maxiter=6).fit(X, y + 5000.0)
    distributed = Falkon(KERNEL, 1e-3, M=200, maxiter=6).fit(*sharded.scatter(X, y + 5000.0, cluster=cluster))
    torch.testing.assert_close(distributed.intercept_, local.intercept_, rtol=1e-14, atol=0)
    assert float(distributed.intercept_[0]) == pytest.approx(y.mean() + 5000.0, rel=1e-14)
    assert relative(local.predict(X_test) - 5000.0, distributed.predict(X_test) - 5000.0) < 1e-8
    assert relative([r.residual for r in local.trace_], [r.residual for r in distributed.trace_]) < 1e-8
