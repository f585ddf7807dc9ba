"""FALKON-BLESS's default costs no pass over all n points: its centres are the
BLESS dictionary (the BLESS paper's FALKON-BLESS), whose candidates are uniform draws whose number
depends on κ²/λ, not on n."""

import importlib

import numpy as np
import torch

from krrcore import datasets
from krrcore.datasets.synthetic import clustered_outliers
from krrcore.kernels import GaussianKernel
from krrcore.leverage import BlessCenters
from krrcore.solvers.falkon import Falkon


def test_default_selection_scores_a_number_of_points_independent_of_n(monkeypatch):
    bless_module = importlib.import_module("krrcore.leverage.bless")  # the package exports bless()
    scored = []
    original = bless_module._Context.dictionary

    def spy(self, level, penalty):
        dictionary = original(self, level, penalty)
        score = dictionary.scores
        dictionary.scores = lambda idx: (scored.append((self.n, idx.numel())), score(idx))[1]
        return dictionary

    monkeypatch.setattr(bless_module._Context, "dictionary", spy)
    assert BlessCenters().mode == "dictionary"
    kernel = GaussianKernel(0.3)
    largest = {}
    for n in (4_000, 40_000):
        X = torch.as_tensor(clustered_outliers(n, np.random.default_rng(0), 0.1).X)
        scored.clear()
        cs = BlessCenters(kernel=kernel).select(X, 100, torch.Generator().manual_seed(0))
        largest[n] = max(count for _, count in scored)
        assert 80 <= cs.M <= 150 and cs.weights is not None
    assert largest[40_000] < 4_000 and largest[40_000] <= 1.5 * largest[4_000]


def test_falkon_bless_default_beats_uniform_on_outliers():
    data = datasets.load("clustered_outliers", n=25_000, seed=1)
    kernel = GaussianKernel(0.3)

    def error(centers):
        model = Falkon(kernel, 1e-6, 500, centers=centers, maxiter=20).fit(data.X_train, data.y_train)
        return float(np.mean((model.predict(data.X_test) - data.y_test) ** 2))

    assert error("bless") < 0.5 * error("uniform")
