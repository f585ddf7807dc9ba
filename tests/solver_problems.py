"""Shared by the solver test files: a smooth regression problem and one-thread torch products."""
from __future__ import annotations

import numpy as np
import pytest
import torch


def make_problem(n: int, d: int, seed: int = 0):
    """y = sin(Xw/√d) + 0.1·noise on standard normal X (n×d): smooth, so KRR fits it well."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X @ rng.standard_normal(d) / np.sqrt(d)) + 0.1 * rng.standard_normal(n)
    return X, y


@pytest.fixture
def one_thread():
    """Small products on a shared 2-core machine run faster and steadier on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
