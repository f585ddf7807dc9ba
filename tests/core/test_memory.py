"""krrcore's one memory policy (krrcore.memory): defaults, a user's budget, refusals, and that no
other module keeps a policy of its own."""

import pathlib
import re

import numpy as np
import pytest

import krrcore.memory as memory
from krrcore import ExactKRR
from krrcore.full_system import resolve_kernel_storage
from krrcore.kernels import GaussianKernel
from krrcore.leverage import exact_scores
from krrcore.memory import MemoryBudgetError, check_fits, fits, scratch_budget, storage_budget
from krrcore.ops import KernelOperator


@pytest.fixture
def free_16gib(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda device=None: 16 << 30)


def test_defaults_are_fractions_of_free_memory(free_16gib):
    assert scratch_budget() == memory.SCRATCH_CAP == 1 << 30  # 10% of 16 GiB, capped at 1 GiB
    assert storage_budget() == 8 << 30  # half of 16 GiB


def test_small_machine_scratch_is_ten_percent(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda device=None: 2 << 30)
    assert scratch_budget() == int(0.1 * (2 << 30))


def test_a_given_budget_bounds_both_kinds(free_16gib):
    assert scratch_budget(123_456) == storage_budget(123_456) == 123_456
    assert fits(1000, 1000) and not fits(1001, 1000)


@pytest.mark.parametrize("bad", [0, -5, 1.5, "1GB", True])
def test_bad_budget_is_named(bad):
    with pytest.raises(ValueError, match="memory_budget must be a positive whole number of bytes"):
        scratch_budget(bad)


def test_refusal_says_what_was_needed_allowed_and_what_to_do(free_16gib):
    with pytest.raises(
        MemoryBudgetError,
        match=r"thing needs 4 GiB but only 2 GiB may be used "
        r"\(memory_budget\): use less",
    ):
        check_fits(4 << 30, "thing", "use less", memory_budget=2 << 30)
    with pytest.raises(MemoryBudgetError, match=r"only 8 GiB may be used \(50% of free memory\)"):
        check_fits(9 << 30, "thing", "use less")
    check_fits(8 << 30, "thing", "use less")  # exactly the default: allowed


def test_every_consumer_reads_the_same_policy(free_16gib):
    """Exact KRR, K storage, exact leverage scores and blocked products all follow one budget."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    need_exact = 2 * 40 * 40 * 8
    ExactKRR(GaussianKernel(1.0), 1e-2, memory_budget=need_exact).fit(X, y)
    with pytest.raises(MemoryBudgetError):
        ExactKRR(GaussianKernel(1.0), 1e-2, memory_budget=need_exact - 1).fit(X, y)
    assert resolve_kernel_storage("auto", 40, 8, 40 * 40 * 8, "cpu") == "stored"
    assert resolve_kernel_storage("auto", 40, 8, 40 * 40 * 8 - 1, "cpu") == "on_the_fly"
    assert resolve_kernel_storage("auto", 40_000, 8, None, "cpu") == "on_the_fly"  # 12.8 GB > 8 GiB
    with pytest.raises(MemoryBudgetError):
        exact_scores(X, GaussianKernel(1.0), 1e-2, memory_budget=need_exact - 1)
    import torch

    op = KernelOperator(GaussianKernel(1.0), torch.as_tensor(X), torch.as_tensor(X))
    assert op.memory_budget == memory.SCRATCH_CAP


def test_no_module_keeps_a_memory_policy_of_its_own():
    """Free memory is read, and default budgets computed, only in krrcore/memory.py."""
    root = pathlib.Path(memory.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.name == "memory.py":
            continue
        text = path.read_text()
        if re.search(r"MemAvailable|mem_get_info|available_bytes\(|available_memory_bytes|MEMORY_FRACTION", text):
            offenders.append(str(path.relative_to(root)))
    assert offenders == []
