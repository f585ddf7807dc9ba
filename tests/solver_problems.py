"""Shared by the solver test files: a smooth regression problem and one-thread torch products."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from krrcore.datasets.synthetic import sine_projection


def make_problem(n: int, d: int, seed: int = 0):
    """(X, y) of :func:`krrcore.datasets.synthetic.sine_projection` with noise 0.1, y centred: the
    solvers' system is then the paper's (K + λnI)α = y, which the tests check against, whether or
    not the fit subtracts y's mean (``fit_intercept``)."""
    table = sine_projection(n, np.random.default_rng(seed), 0.1, d=d)
    return table.X, table.target - table.target.mean()


@pytest.fixture
def one_thread():
    """Small products on a shared 2-core machine run faster and steadier on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
