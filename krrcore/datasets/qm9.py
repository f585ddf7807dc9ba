"""QM9 HOMO energies with sorted Coulomb-matrix features, from the ``qm9pack`` package's CSVs.

``import qm9pack`` fails on current setuptools (it imports ``pkg_resources``), so the package
folder is located with ``importlib.util.find_spec`` and its ``data/qm9_part{1,2,3}.csv`` files
are read by path. Nothing is downloaded.

Features (Rupp, Tkatchenko, Müller, von Lilienfeld 2012, Eq. 1, sorted as in Montavon et al.
2012): C_ii = ½ Z_i^2.4, C_ij = Z_i Z_j / |R_i − R_j| with R in ångström as stored in the CSV,
rows and columns ordered by decreasing row norm, zero-padded to 29 atoms, upper triangle
(diagonal included) flattened row by row → 435 features. Target: HOMO energy in eV (the CSV
stores hartree; 1 Ha = 27.211386245988 eV, CODATA 2018).

Coulomb matrices are cached on disk under :func:`~krrcore.datasets.core.cache_dir`: the whole
set once (when a large ``n`` is asked for) or, while no full cache exists, only the molecules
a small request needs, accumulated in a partial cache.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import os
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .core import Table, cache_dir

log = logging.getLogger(__name__)

HARTREE_TO_EV = 27.211386245988
MAX_ATOMS = 29
N_FEATURES = MAX_ATOMS * (MAX_ATOMS + 1) // 2
ATOMIC_NUMBERS = {"H": 1, "C": 6, "N": 7, "O": 8, "F": 9}
FEATURE_NAMES = tuple(f"C[{i},{j}]" for i, j in zip(*np.triu_indices(MAX_ATOMS)))
#: Bump when the feature definition changes: old cache files then stop matching.
FEATURE_VERSION = "sorted-coulomb-angstrom-v1"
#: Requests for more molecules than this (and n=None) compute and cache the whole set instead.
PARTIAL_LIMIT = 20_000
_PARTS = ("qm9_part1.csv", "qm9_part2.csv", "qm9_part3.csv")


def data_files() -> list[Path]:
    """Paths of the qm9pack CSV parts; ImportError if the package is missing."""
    spec = importlib.util.find_spec("qm9pack")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("qm9_homo needs the PyPI package qm9pack (pip install qm9pack==1.0.3)")
    folder = Path(spec.submodule_search_locations[0]) / "data"
    paths = [folder / part for part in _PARTS]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ImportError(f"qm9pack is installed but its data files are missing: {missing}")
    return paths


def source_key() -> str:
    """Identifies the source files and feature definition; a cache with another key is stale."""
    try:
        version = importlib.metadata.version("qm9pack")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    sizes = "-".join(str(p.stat().st_size) for p in data_files())
    return f"{FEATURE_VERSION}|qm9pack-{version}|{sizes}"


@dataclass(frozen=True)
class Molecules:
    """All molecules, zero-padded: atomic numbers (N, 29), positions in Å (N, 29, 3), HOMO in eV."""

    Z: np.ndarray
    R: np.ndarray
    homo_ev: np.ndarray

    def __len__(self) -> int:
        return self.Z.shape[0]


@functools.lru_cache(maxsize=1)
def molecules() -> Molecules:
    """Parse the three CSV parts (a few seconds). ``XYZ_Ang`` holds nested coordinate lists and
    ``Elements`` Python-style quoted symbol lists, so both are tokenised directly instead of
    being parsed as JSON."""
    frame = pd.concat(
        [pd.read_csv(p, usecols=["N_atoms", "Elements", "XYZ_Ang", "HOMO_au"]) for p in data_files()], ignore_index=True
    )
    n_atoms = frame["N_atoms"].to_numpy(dtype=np.int64)
    total = int(n_atoms.sum())
    if n_atoms.max() > MAX_ATOMS:
        raise ValueError(f"QM9 molecule with {n_atoms.max()} atoms exceeds the {MAX_ATOMS}-atom padding")
    text = ",".join(frame["XYZ_Ang"]).replace("[", "").replace("]", "")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # numpy warns (not raises) on a bad token
        coords = np.fromstring(text, dtype=np.float64, sep=",")
    symbols = re.findall(r"[A-Z][a-z]?", "".join(frame["Elements"]))
    if coords.size != 3 * total or len(symbols) != total:
        raise ValueError(f"QM9 CSVs: parsed {coords.size} coordinates and {len(symbols)} symbols for {total} atoms")
    unique, inverse = np.unique(np.array(symbols), return_inverse=True)
    z = np.array([ATOMIC_NUMBERS[s] for s in unique], dtype=np.uint8)[inverse]
    molecule = np.repeat(np.arange(n_atoms.size), n_atoms)
    slot = np.arange(total) - np.repeat(np.cumsum(n_atoms) - n_atoms, n_atoms)
    Z = np.zeros((n_atoms.size, MAX_ATOMS), dtype=np.uint8)
    R = np.zeros((n_atoms.size, MAX_ATOMS, 3), dtype=np.float64)
    Z[molecule, slot] = z
    R[molecule, slot] = coords.reshape(-1, 3)
    return Molecules(Z, R, frame["HOMO_au"].to_numpy(dtype=np.float64) * HARTREE_TO_EV)


def coulomb_matrices(Z, R, *, chunk: int = 2048) -> np.ndarray:
    """Sorted Coulomb matrices, upper triangle (with diagonal) flattened row-major.

    Rupp et al. 2012, Eq. 1: C_ii = ½ Z_i^2.4, C_ij = Z_i Z_j / |R_i − R_j|; rows and columns
    permuted by decreasing row norm, which makes the result invariant to the atom order.
    ``Z`` (m, A) atomic numbers with 0 for padding, ``R`` (m, A, 3) positions; returns
    (m, A(A+1)/2). Vectorised over molecules in chunks of ``chunk`` to bound memory.
    """
    Z = np.asarray(Z, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    m, atoms = Z.shape
    upper = np.triu_indices(atoms)
    diagonal = np.arange(atoms)
    out = np.empty((m, upper[0].size))
    for start in range(0, m, chunk):
        z, r = Z[start : start + chunk], R[start : start + chunk]
        dist = np.sqrt(((r[:, :, None, :] - r[:, None, :, :]) ** 2).sum(axis=-1))
        charge = z[:, :, None] * z[:, None, :]
        # padded pairs (charge 0) and the diagonal (distance 0) must not divide
        C = np.divide(charge, dist, out=np.zeros_like(dist), where=(charge > 0) & (dist > 0))
        C[:, diagonal, diagonal] = 0.5 * z**2.4
        order = np.argsort(-np.linalg.norm(C, axis=2), axis=1, kind="stable")
        C = np.take_along_axis(C, order[:, :, None], axis=1)
        C = np.take_along_axis(C, order[:, None, :], axis=2)
        out[start : start + chunk] = C[:, upper[0], upper[1]]
    return out


# --- disk cache ---------------------------------------------------------------------------------


def _atomic_save(path: Path, write) -> None:
    """Write through a temporary file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a cache may be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FeatureCache:
    """Coulomb matrices on disk: ``full_features.npy`` + ``full_meta.npz`` for all molecules,
    ``partial.npz`` for the molecules computed so far (sorted indices, features, targets)."""

    def __init__(self, directory: Path | None = None, key: str | None = None):
        self.directory = Path(directory or cache_dir()) / "qm9"
        self.key = key or source_key()

    @property
    def full_paths(self) -> tuple[Path, Path]:
        return self.directory / "full_features.npy", self.directory / "full_meta.npz"

    @property
    def partial_path(self) -> Path:
        return self.directory / "partial.npz"

    def _read(self, path: Path) -> dict | None:
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except (OSError, ValueError, KeyError):
            return None
        if str(arrays.get("key")) != self.key:
            log.info("ignoring stale QM9 cache %s", path)
            return None
        return arrays

    def load_full(self):
        """``(features, homo_ev)`` with features memory-mapped, or None."""
        features_path, meta_path = self.full_paths
        meta = self._read(meta_path)
        if meta is None or not features_path.exists():
            return None
        features = np.load(features_path, mmap_mode="r")
        homo = meta["homo_ev"]
        if features.shape != (homo.size, N_FEATURES):
            return None
        return features, homo

    def save_full(self, features: np.ndarray, homo_ev: np.ndarray) -> None:
        features_path, meta_path = self.full_paths
        _atomic_save(features_path, lambda fh: np.save(fh, features))
        # the meta file is written last: its presence marks a complete full cache
        _atomic_save(meta_path, lambda fh: np.savez(fh, key=self.key, homo_ev=homo_ev))

    def load_partial(self):
        """``(n_total, indices, features, homo_ev)`` or None."""
        data = self._read(self.partial_path)
        if data is None:
            return None
        return int(data["n_total"]), data["indices"], data["features"], data["homo_ev"]

    def save_partial(self, n_total, indices, features, homo_ev) -> None:
        _atomic_save(
            self.partial_path,
            lambda fh: np.savez(fh, key=self.key, n_total=n_total, indices=indices, features=features, homo_ev=homo_ev),
        )


class QM9Source:
    """Lazy QM9 source for the catalog: ``len`` and ``take(index)`` without computing more
    Coulomb matrices than needed."""

    def __init__(self, cache: FeatureCache | None = None):
        self.cache = cache or FeatureCache()

    def __len__(self) -> int:
        full = self.cache.load_full()
        if full is not None:
            return full[1].size
        partial = self.cache.load_partial()
        return partial[0] if partial is not None else len(molecules())

    def take(self, index) -> Table:
        index = np.asarray(index, dtype=np.int64)
        features, homo = self._features(index)
        return Table(features, homo, FEATURE_NAMES)

    def _features(self, index: np.ndarray):
        full = self.cache.load_full()
        if full is None:
            partial = None if index.size > PARTIAL_LIMIT else self._from_partial(index)
            if partial is not None:
                return partial
            full = self._compute_full()
        order = np.argsort(index)  # sorted reads are kind to the memory map
        rows = np.empty((index.size, N_FEATURES))
        rows[order] = full[0][index[order]]
        return rows, full[1][index]

    def _compute_full(self):
        mols = molecules()
        log.info("computing Coulomb matrices for all %d QM9 molecules (cached afterwards)", len(mols))
        features = coulomb_matrices(mols.Z, mols.R)
        self.cache.save_full(features, mols.homo_ev)
        return features, mols.homo_ev

    def _from_partial(self, index: np.ndarray):
        """Rows from the partial cache, computing and adding the missing molecules; None when the
        partial cache would outgrow :data:`PARTIAL_LIMIT` (then the whole set is worth computing)."""
        partial = self.cache.load_partial()
        if partial is None:
            known_index, known_features, known_homo = np.empty(0, np.int64), np.empty((0, N_FEATURES)), np.empty(0)
        else:
            _, known_index, known_features, known_homo = partial
        missing = np.setdiff1d(index, known_index)
        if known_index.size + missing.size > PARTIAL_LIMIT:
            return None
        if missing.size:
            mols = molecules()
            known_index = np.concatenate([known_index, missing])
            known_features = np.vstack([known_features, coulomb_matrices(mols.Z[missing], mols.R[missing])])
            known_homo = np.concatenate([known_homo, mols.homo_ev[missing]])
            order = np.argsort(known_index)
            known_index, known_features, known_homo = known_index[order], known_features[order], known_homo[order]
            self.cache.save_partial(len(mols), known_index, known_features, known_homo)
        at = np.searchsorted(known_index, index)
        return known_features[at], known_homo[at]


def source() -> QM9Source:
    return QM9Source()
