"""Runs krrcore.fused's products on the cases tests/core/test_fused_kernels.py saved, in a process whose
environment set TRITON_INTERPRET=1 before triton was imported (Triton's CPU interpreter), and
saves what they returned: ``python tests/fused_worker.py CASES.pt OUT.pt``."""

import sys

import torch

from krrcore import fused
from krrcore.kernels import make_kernel
from krrcore.ops import KernelOperator
from krrcore.solvers import Falkon


def run(case: dict, device: str = "cpu") -> dict:
    """The fused products of one case, directly and through KernelOperator's dispatch."""
    kernel = make_kernel(case["kernel"], **case["params"])
    X, C, v, w, rows = (case[key].to(device) for key in ("X", "C", "v", "w", "rows"))
    direct = fused.FusedKernel(kernel, C, rows=X)
    op = KernelOperator(kernel, X, C, n_rhs=v.shape[1], accumulate_dtype=case.get("accumulate"))
    out = {
        "dispatched": op._fused is not None,
        "matvec": direct.matvec(X, v),
        "matvec_w": direct.matvec(X, v, w),
        "rmatvec": direct.rmatvec(X, w, case["accumulate"]),
        "pair": direct.pair(X, v, w, case["accumulate"]),
        "op_matvec": op.matvec(v),
        "op_rows": op.matvec(v, rows=rows),
        "op_rmatvec": op.rmatvec(w),
        "op_fused": op.fused(v, w),
        "op_fused_w": op.fused(None, w),
        "op_fused_1d": op.fused(v[:, 0]),
        "op_fused_weighted": op.fused(v, w, weights=case["weights"].to(device)),
        "op_rmatvec_weighted": op.rmatvec(w, weights=case["weights"].to(device)),
    }
    return {key: value.cpu() if isinstance(value, torch.Tensor) else value for key, value in out.items()}


def falkon_predictions(case: dict) -> torch.Tensor:
    """A small FALKON fit's test predictions (every product through the operator's dispatch)."""
    model = Falkon(**case["options"]).fit(case["X"], case["y"])
    return torch.as_tensor(model.predict(case["X_test"]))


if __name__ == "__main__":
    saved = torch.load(sys.argv[1], weights_only=False)  # written by the test itself
    result = {
        "cases": [run(case) for case in saved["cases"]],
        "falkon": falkon_predictions(saved["falkon"]),
        "interpreted": fused.interpreted(),
    }
    torch.save(result, sys.argv[2])
