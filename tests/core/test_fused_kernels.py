"""The fused Triton products (krrcore.fused) against the blocked ones (krrcore.ops.KernelOperator):
every kernel they cover, float32 and float64, shapes that are not multiples of any tile.

Without a GPU the fused kernels run through Triton's CPU interpreter, which must be switched on
(TRITON_INTERPRET=1) before triton is first imported: they run in a fresh process
(tests/fused_worker.py) on cases this process saves, and this process compares what came back
with the blocked products on the same inputs. With CUDA they also run here, on the card.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from krrcore import fused
from krrcore.kernels import make_kernel
from krrcore.ops import KernelOperator
from krrcore.solvers import Falkon

triton = pytest.importorskip("triton", reason="the fused products need triton (the test extra installs it)")

ROOT = Path(__file__).resolve().parents[2]
ARD = [0.8, 1.5, 0.6, 1.1, 2.0]
KERNELS = [
    ("gaussian", {"sigma": 1.3}),
    ("gaussian", {"sigma": ARD}),
    ("laplacian", {"sigma": 2.0, "p": 2}),
    ("laplacian", {"sigma": ARD, "p": 1}),
    ("matern", {"sigma": 1.1, "nu": 0.5}),
    ("matern", {"sigma": 1.1, "nu": 1.5}),
    ("matern", {"sigma": ARD, "nu": 2.5}),
]
#: Relative tolerance on the largest entry: float32 Euclidean distances lose digits in the
#: expanded form near zero, and the two paths evaluate them in different orders.
TOL = {torch.float32: 5e-4, torch.float64: 1e-10}


def _case(name, params, dtype, *, n=45, M=37, d=5, k=2, seed=0, accumulate=None):
    g = torch.Generator().manual_seed(seed)
    X = (torch.randn(n, d, generator=g, dtype=torch.float64) + 2.0).to(dtype)
    C = torch.cat([X[: M // 2], (torch.randn(M - M // 2, d, generator=g, dtype=torch.float64) + 2.0).to(dtype)])
    return {
        "kernel": name,
        "params": params,
        "dtype": dtype,
        "X": X,
        "C": C,
        "accumulate": accumulate,
        "v": torch.randn(M, k, generator=g, dtype=torch.float64).to(dtype),
        "w": torch.randn(n, k, generator=g, dtype=torch.float64).to(dtype),
        "rows": torch.randperm(n, generator=g)[: n // 3],
        "weights": torch.rand(n, generator=g, dtype=torch.float64).to(dtype) * 3,
    }


CASES = [_case(name, params, dtype) for name, params in KERNELS for dtype in (torch.float32, torch.float64)]
# More features than a tile holds (d = 37 > BLOCK_D), one right-hand side, float64 accumulation.
# Several row and centre tiles (the interpreter's are 64 wide) and row splits of K_nMᵀu.
CASES += [
    _case("gaussian", {"sigma": 4.0}, torch.float32, n=150, M=70, d=37, k=1, accumulate=torch.float64),
    _case("matern", {"sigma": 4.0, "nu": 1.5}, torch.float64, n=150, M=70, d=37, k=1),
    _case("laplacian", {"sigma": 9.0, "p": 1}, torch.float32, n=150, M=70, d=7, k=1),
]
IDS = [f"{c['kernel']}-{c['params']}-{str(c['dtype'])[6:]}-d{c['X'].shape[1]}" for c in CASES]

FALKON = {
    "options": {"kernel": make_kernel("gaussian", sigma=2.0), "M": 30, "penalty": 1e-4, "maxiter": 4},
    "X": torch.rand(100, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64),
}
FALKON["y"] = torch.sin(4 * FALKON["X"]).sum(1)
FALKON["X_test"] = FALKON["X"][:20] + 0.01


def _blocked(case: dict) -> dict:
    """The blocked products on the case's inputs (the reference)."""
    kernel = make_kernel(case["kernel"], **case["params"])
    X, C, v, w, rows = case["X"], case["C"], case["v"], case["w"], case["rows"]
    op = KernelOperator(kernel, X, C, n_rhs=v.shape[1], accumulate_dtype=case["accumulate"], fused=False)
    assert op._fused is None  # the blocked walk, on a card too
    return {
        "matvec": op.matvec(v),
        "matvec_w": op.matvec(v) + w,
        "rmatvec": op.rmatvec(w),
        "pair": op.fused(v, w),
        "op_matvec": op.matvec(v),
        "op_rows": op.matvec(v, rows=rows),
        "op_rmatvec": op.rmatvec(w),
        "op_fused": op.fused(v, w),
        "op_fused_w": op.fused(None, w),
        "op_fused_1d": op.fused(v[:, 0]),
        "op_fused_weighted": op.fused(v, w, weights=case["weights"]),
        "op_rmatvec_weighted": op.rmatvec(w, weights=case["weights"]),
    }


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """The fused products of every case, from Triton's interpreter in a fresh process."""
    folder = tmp_path_factory.mktemp("fused")
    torch.save({"cases": CASES, "falkon": FALKON}, folder / "cases.pt")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fused_worker.py"), str(folder / "cases.pt"), str(folder / "out.pt")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = torch.load(folder / "out.pt", weights_only=False)
    assert result["interpreted"]
    return result


def _agree(got: dict, case: dict):
    want = _blocked(case)
    for key, ref in want.items():
        out = got[key].to(ref.device)
        assert out.shape == ref.shape, (key, out.shape, ref.shape)
        assert out.dtype == ref.dtype, (key, out.dtype, ref.dtype)
        err = float((out.double() - ref.double()).abs().max() / ref.double().abs().max())
        assert err < TOL[case["dtype"]], f"{key}: relative error {err:.2e}"


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_fused_interpreted_matches_blocked(interpreted, index):
    got = interpreted["cases"][index]
    assert got["dispatched"], "KernelOperator did not dispatch to the fused products under the interpreter"
    _agree(got, CASES[index])


def test_fused_falkon_fit_matches_blocked(interpreted):
    """A FALKON fit whose every product ran fused predicts what the blocked fit predicts."""
    blocked = torch.as_tensor(Falkon(**FALKON["options"]).fit(FALKON["X"], FALKON["y"]).predict(FALKON["X_test"]))
    assert torch.allclose(interpreted["falkon"], blocked, rtol=0, atol=1e-8 * float(blocked.abs().max()))


def test_fused_refuses_what_it_does_not_cover():
    with pytest.raises(ValueError, match="does not cover the LinearKernel"):
        fused.FusedKernel(make_kernel("linear"), torch.zeros(3, 2))
    assert fused.for_operator(make_kernel("polynomial"), torch.zeros(3, 2), torch.zeros(2, 2)) is None


def test_fused_not_dispatched_on_cpu_without_interpreter():
    """Off CUDA the blocked path runs (this process never set TRITON_INTERPRET)."""
    if fused.interpreted():
        pytest.skip("this test process runs under Triton's interpreter")
    op = KernelOperator(make_kernel("gaussian", sigma=1.0), torch.zeros(5, 2), torch.zeros(3, 2))
    assert op._fused is None


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device: the fused kernels ran in the interpreter only"
)
@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_fused_cuda_matches_blocked(index):
    sys.path.insert(0, str(ROOT / "tests"))
    from fused_worker import run

    case = {
        key: value.cuda() if isinstance(value, torch.Tensor) and key != "dtype" else value
        for key, value in CASES[index].items()
    }
    got = run(case, "cuda")
    assert got["dispatched"]
    _agree(got, case)
