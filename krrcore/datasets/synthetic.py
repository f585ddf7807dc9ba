"""Synthetic data generators: each returns a :class:`Table` of exactly ``n`` rows from ``rng``.

``noise`` means what each generator's docstring says (Gaussian target noise for regression sets,
input jitter for the 2-D teaching sets, a label-flip probability for the ±1 sets); the registry
in :mod:`krrcore.datasets.catalog` states it next to each knob.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_int, check_positive
from .core import Table


def _flip_labels(labels: np.ndarray, probability: float, rng: np.random.Generator) -> np.ndarray:
    """Flip ±1 labels independently with ``probability`` (label noise)."""
    if not 0 <= probability <= 0.5:
        raise ValueError(f"noise is a label-flip probability here and must be in [0, 0.5], got {probability}")
    flip = rng.random(labels.shape[0]) < probability
    return np.where(flip, -labels, labels)


def sine1d(n: int, rng: np.random.Generator, noise: float) -> Table:
    """x ~ U(−3, 3), y = sin(2x) + 0.3·cos(5x) + noise·N(0, 1): a curve to draw in 1-D."""
    x = rng.uniform(-3.0, 3.0, n)
    y = np.sin(2 * x) + 0.3 * np.cos(5 * x) + noise * rng.standard_normal(n)
    return Table(x[:, None], y, ("x",))


def _sklearn_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**31 - 1))


def moons(n: int, rng: np.random.Generator, noise: float) -> Table:
    """scikit-learn's two interleaving half circles; ``noise`` is the std of Gaussian input jitter."""
    from sklearn.datasets import make_moons

    X, labels = make_moons(n_samples=n, noise=noise, random_state=_sklearn_seed(rng))
    return Table(X, labels, ("x1", "x2"), classes=np.array([0, 1]))


def circles(n: int, rng: np.random.Generator, noise: float, factor: float = 0.5) -> Table:
    """scikit-learn's two concentric circles (inner radius ``factor``); ``noise`` is input jitter."""
    from sklearn.datasets import make_circles

    factor = check_positive(factor, "factor")
    if not factor < 1:
        raise ValueError(f"factor (inner/outer radius) must be in (0, 1), got {factor}")
    X, labels = make_circles(n_samples=n, noise=noise, factor=factor, random_state=_sklearn_seed(rng))
    return Table(X, labels, ("x1", "x2"), classes=np.array([0, 1]))


def checkerboard(n: int, rng: np.random.Generator, noise: float, tiles: int = 4) -> Table:
    """A ``tiles``×``tiles`` board of alternating classes on [−tiles/2, tiles/2]²; labels are set
    before ``noise`` (std of Gaussian input jitter, in tile widths) moves the points."""
    tiles = check_int(tiles, "tiles", minimum=2)
    U = rng.uniform(0.0, tiles, (n, 2))
    labels = np.floor(U).astype(np.int64).sum(axis=1) % 2
    X = U - tiles / 2 + noise * rng.standard_normal((n, 2))
    return Table(X, labels, ("x1", "x2"), classes=np.array([0, 1]))


def sine_projection(n: int, rng: np.random.Generator, noise: float, d: int = 10) -> Table:
    """A smooth regression problem in ``d`` dimensions: X with i.i.d. N(0, 1) entries, w ~ N(0, I),
    y = sin(Xw/√d) + noise·N(0, 1) — KRR fits it well, so solvers' agreement and convergence show.
    The solver tests and the ASkotch ablation benchmark use it (X, then w, then the noise are drawn
    from ``rng`` in that order)."""
    X = rng.standard_normal((n, d))
    y = np.sin(X @ rng.standard_normal(d) / np.sqrt(d)) + noise * rng.standard_normal(n)
    return Table(X, y, tuple(f"x{i + 1}" for i in range(d)))


def askotch_synthetic(n: int, rng: np.random.Generator, noise: float, d: int = 10) -> Table:
    """ASkotch paper, App. C.2.2: X with i.i.d. N(0, 1) entries in ``d`` = 10 dimensions,
    y = sign(Xw) with w ~ N(0, I) drawn first from the seed (so w depends on the seed only).
    ``noise`` is a label-flip probability (0 in the paper)."""
    w = rng.standard_normal(d)
    X = rng.standard_normal((n, d))
    labels = np.where(X @ w >= 0, 1, -1)
    return Table(X, _flip_labels(labels, noise, rng), tuple(f"x{i + 1}" for i in range(d)), classes=np.array([-1, 1]))


# --- HIGGS look-alike --------------------------------------------------------------------------

HIGGS_FEATURES = (
    "lepton_pT",
    "lepton_eta",
    "lepton_phi",
    "missing_energy_magnitude",
    "missing_energy_phi",
    *(f"jet{j}_{q}" for j in range(1, 5) for q in ("pt", "eta", "phi", "b-tag")),
    "m_jj",
    "m_jjj",
    "m_lv",
    "m_jlv",
    "m_bb",
    "m_wbb",
    "m_wwbb",
)
_BTAG_VALUES = np.array([0.0, 1.0865, 2.1731])  # the three b-tag levels HIGGS stores


def _four_vector(pt, eta, phi):
    """Massless four-momentum (E, px, py, pz) as a tuple of arrays."""
    return pt * np.cosh(eta), pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)


def _invariant_mass(*vectors) -> np.ndarray:
    E, px, py, pz = (sum(v[c] for v in vectors) for c in range(4))
    return np.sqrt(np.maximum(E * E - px * px - py * py - pz * pz, 0.0))


def _force_pair_mass(mass, pt_a, pt_b, eta_a, eta_b, phi_a, phi_b, rng):
    """Move jet b's direction so the massless pair has invariant mass ``mass`` exactly, using
    m² = 2 pTa pTb (cosh Δη − cos Δφ): widen Δη when the pair is too light at its current Δφ,
    otherwise close Δφ (at the current Δη if possible, else at Δη = 0). Returns (η_b, φ_b)."""
    ratio = mass**2 / (2 * pt_a * pt_b)
    side = np.where(rng.random(mass.shape[0]) < 0.5, -1.0, 1.0)
    cosh_deta = ratio + np.cos(phi_b - phi_a)
    widen = cosh_deta >= 1
    keep_eta = ~widen & (np.cosh(eta_a - eta_b) - ratio >= -1)
    new_eta = np.where(widen, eta_a + side * np.arccosh(np.maximum(cosh_deta, 1)), np.where(keep_eta, eta_b, eta_a))
    cos_dphi = np.clip(np.cosh(new_eta - eta_a) - ratio, -1, 1)
    new_phi = np.where(widen, phi_b, phi_a + side * np.arccos(cos_dphi))
    return new_eta, np.mod(new_phi + np.pi, 2 * np.pi) - np.pi


# b-tag level probabilities (none, medium, tight) per jet: signal's jets 3–4 are b jets from H → bb
_BTAG_P_SIGNAL = np.array([[0.58, 0.25]] * 2 + [[0.45, 0.30]] * 2)
_BTAG_P_BACKGROUND = np.array([[0.60, 0.25]] * 2 + [[0.55, 0.27]] * 2)


def higgs_like(n: int, rng: np.random.Generator, noise: float) -> Table:
    """A synthetic look-alike of HIGGS (Baldi et al. 2014): 21 low-level kinematic features of a
    lepton, missing energy and four jets, plus 7 invariant masses computed from them.

    Signal (53%, as in HIGGS) has a H→bb resonance in jets 3–4 (m_bb ≈ 125) more often, a
    W→jj resonance in jets 1–2 more often, harder pT spectra and more b-tags; background shares
    all of these in weaker form, so the classes overlap. ``noise`` is a label-flip probability.
    Not the real data: it only mimics its shape (28 features, ~balanced, overlapping classes).
    Columns are filled one by one into a (28, n) buffer: 10⁶ rows take about a second.
    """
    signal = rng.random(n) < 0.53
    cols = np.empty((len(HIGGS_FEATURES), n))

    def lognormal(median_bkg, median_sig, spread, size=None):
        shape = (n,) if size is None else (size, n)
        return np.where(signal, median_sig, median_bkg) * np.exp(spread * rng.standard_normal(shape))

    lep_pt, lep_eta, lep_phi, met, met_phi = cols[:5]
    lep_pt[:] = lognormal(40.0, 42.0, 0.45)
    lep_eta[:] = rng.standard_normal(n) * np.where(signal, 1.0, 1.1)
    lep_phi[:] = rng.uniform(-np.pi, np.pi, n)
    met[:] = lognormal(45.0, 47.0, 0.6)
    met_phi[:] = rng.uniform(-np.pi, np.pi, n)
    jets = cols[5:21].reshape(4, 4, n)  # jet, (pt, eta, phi, b-tag), row
    jets[:, 0] = -np.sort(-lognormal(55.0, 57.0, 0.5, size=4), axis=0)  # leading jet first
    jets[:, 1] = rng.standard_normal((4, n)) * np.where(signal, 1.1, 1.2)
    jets[:, 2] = rng.uniform(-np.pi, np.pi, (4, n))
    u = rng.random((4, n))
    level = np.zeros((4, n), dtype=np.int64)
    for k in range(2):  # level rises past each cumulative probability
        level += u > np.where(
            signal, _BTAG_P_SIGNAL[:, : k + 1].sum(1)[:, None], _BTAG_P_BACKGROUND[:, : k + 1].sum(1)[:, None]
        )
    jets[:, 3] = _BTAG_VALUES[level]

    # resonances: W → j1 j2 (both classes), H → j3 j4 (mostly signal)
    for (a, b), mass, p_sig, p_bkg in (
        ((0, 1), rng.normal(80.4, 8.0, n), 0.6, 0.5),
        ((2, 3), rng.normal(125.0, 12.0, n), 0.6, 0.05),
    ):
        chosen = rng.random(n) < np.where(signal, p_sig, p_bkg)
        eta_b, phi_b = _force_pair_mass(
            mass, jets[a, 0], jets[b, 0], jets[a, 1], jets[b, 1], jets[a, 2], jets[b, 2], rng
        )
        jets[b, 1] = np.where(chosen, eta_b, jets[b, 1])
        jets[b, 2] = np.where(chosen, phi_b, jets[b, 2])

    lep = _four_vector(lep_pt, lep_eta, lep_phi)
    nu = _four_vector(met, 0.0, met_phi)  # neutrino pz unknown: take η = 0
    j = [_four_vector(*jets[k, :3]) for k in range(4)]
    for row, parts in enumerate(
        [(j[0], j[1]), (j[0], j[1], j[2]), (lep, nu), (j[0], lep, nu), (j[2], j[3]), tuple(j), (*j, lep, nu)], start=21
    ):
        cols[row] = _invariant_mass(*parts)
    labels = _flip_labels(np.where(signal, 1, -1), noise, rng)
    return Table(cols.T, (labels + 1) // 2, HIGGS_FEATURES, classes=np.array([0, 1]))


# --- leverage-score showcase -------------------------------------------------------------------


def clustered_outliers(
    n: int, rng: np.random.Generator, noise: float, clusters: int = 4, outlier_fraction: float = 0.02
) -> Table:
    """Dense Gaussian clusters plus sparse far-away outliers in 2-D: ridge leverage scores are
    far from uniform (an isolated outlier has ℓ ≈ 1/(1 + λn), a cluster point ≈ d_eff/size),
    so uniform Nyström sampling tends to miss the outliers while leverage sampling keeps them.

    ``clusters`` centres sit evenly on a circle of radius 2.5 (std 0.3 each); outliers lie at
    radius 7–12. Target: the smooth f(x) = sin(x1) + cos(0.8·x2) + 0.1·x1·x2 plus
    ``noise``·N(0, 1). ``row_info`` flags ``is_outlier`` and the ``cluster`` id (−1: outlier).
    """
    clusters = check_int(clusters, "clusters", minimum=1)
    outlier_fraction = check_positive(outlier_fraction, "outlier_fraction", allow_zero=True)
    if not outlier_fraction <= 0.5:
        raise ValueError(f"outlier_fraction must be in [0, 0.5], got {outlier_fraction}")
    n_out = min(int(round(outlier_fraction * n)), n - 1)
    n_in = n - n_out
    turn = rng.uniform(0, 2 * np.pi)
    angles = turn + 2 * np.pi * np.arange(clusters) / clusters
    centers = 2.5 * np.column_stack([np.cos(angles), np.sin(angles)])
    cluster = rng.integers(clusters, size=n_in)
    inliers = centers[cluster] + 0.3 * rng.standard_normal((n_in, 2))
    radius = rng.uniform(7.0, 12.0, n_out)
    theta = rng.uniform(0, 2 * np.pi, n_out)
    outliers = radius[:, None] * np.column_stack([np.cos(theta), np.sin(theta)])
    X = np.vstack([inliers, outliers])
    y = np.sin(X[:, 0]) + np.cos(0.8 * X[:, 1]) + 0.1 * X[:, 0] * X[:, 1] + noise * rng.standard_normal(n)
    row_info = {"is_outlier": np.arange(n) >= n_in, "cluster": np.concatenate([cluster, -np.ones(n_out, int)])}
    return Table(X, y, ("x1", "x2"), row_info=row_info)
