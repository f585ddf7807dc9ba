"""The Dask cluster krrcore's work runs on: an existing scheduler, or an embedded local one.

One function, :func:`connect`, serves both cases (Dask's client/cluster split):

* ``address`` given (or the environment variable ``KRR_DASK_SCHEDULER``, e.g.
  ``tcp://10.0.0.5:8786``): a :class:`distributed.Client` on that scheduler. Its workers were
  started with the standard commands (``dask scheduler``; ``dask worker tcp://HOST:8786
  --nworkers 2 --nthreads 1 --preload krrcore.worker_setup``) and need ``krrcore`` importable.
* otherwise: an embedded cluster of worker *processes* on this machine, sized so that
  workers × torch threads never exceeds the cores. It is a ``SubprocessCluster`` (scheduler and
  workers as ``dask spec`` subprocesses) because ``LocalCluster(processes=True)`` cannot start its
  workers while a module is being imported, which is how ``streamlit run`` runs a page; the
  subprocesses end with this process.

:func:`resolve_client` says which cluster a function that places data on one uses: its
``cluster=`` argument (a ``distributed.Client``, a :class:`ClusterConnection` or a scheduler
address), else the active default ``Client``, else ``KRR_DASK_SCHEDULER``.

The scheduler of an embedded cluster never retries a task whose worker died
(``allowed_failures=0``): a run that exhausted a worker's memory would otherwise be retried
on, and kill, the next worker too. For an external scheduler set the same with
``DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0`` (docs/serving.md shows it).
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

from .workers import TORCH_THREADS_ENV

SCHEDULER_ENV = "KRR_DASK_SCHEDULER"
#: The folder holding the ``krrcore`` package, and the workers' preload (``--preload krrcore.worker_setup``).
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
PRELOAD = PACKAGE_ROOT / "krrcore" / "worker_setup.py"


def _total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 2**30


@dataclass(frozen=True)
class LocalClusterShape:
    """How the embedded cluster uses this machine: ``n_workers`` processes of ``threads`` torch
    threads each (one task at a time per worker), each allowed ``memory_limit`` bytes (Dask's
    nanny restarts a worker that exceeds it, so this is the admission limit of one run)."""

    n_workers: int
    threads: int
    memory_limit: int

    @classmethod
    def for_this_machine(cls, n_workers: int | None = None, threads: int = 1,
                         memory_fraction: float = 0.8) -> "LocalClusterShape":
        cores = os.cpu_count() or 1
        threads = max(1, min(int(threads), cores))
        n_workers = max(1, int(n_workers) if n_workers else cores // threads)
        if n_workers * threads > cores:
            raise ValueError(f"{n_workers} workers × {threads} threads = {n_workers * threads} exceeds the "
                             f"{cores} cores of this machine; lower one of them")
        return cls(n_workers, threads, int(_total_memory_bytes() * memory_fraction / n_workers))


@dataclass
class ClusterConnection:
    """A client and, when embedded, the cluster it started (closed together by :meth:`close`)."""

    client: object
    cluster: object | None = None
    address: str = ""
    shape: LocalClusterShape | None = None
    _closed: bool = field(default=False, repr=False)

    @property
    def embedded(self) -> bool:
        return self.cluster is not None

    def workers(self) -> dict[str, dict]:
        """The scheduler's view of the workers: address → {nthreads, memory_limit, ...}."""
        return dict(self.client.scheduler_info(n_workers=-1)["workers"])

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()


def connect(address: str | None = None, *, shape: LocalClusterShape | None = None,
            timeout: float = 60.0) -> ClusterConnection:
    """Connect to ``address`` (default: ``$KRR_DASK_SCHEDULER``), or start the embedded cluster."""
    from distributed import Client

    address = address or os.environ.get(SCHEDULER_ENV) or None
    if address:
        client = Client(address, timeout=timeout, set_as_default=False)
        return ClusterConnection(client=client, address=address)

    from distributed.deploy.subprocess import SubprocessCluster

    shape = shape or LocalClusterShape.for_this_machine()
    preload = {"preload": [str(PRELOAD)], "preload_argv": ["--package-root", str(PACKAGE_ROOT)]}
    cluster = SubprocessCluster(
        n_workers=shape.n_workers, threads_per_worker=1, dashboard_address=None,
        scheduler_kwargs={"allowed_failures": 0, **preload},
        worker_kwargs={"memory_limit": shape.memory_limit, **preload,
                       "env": {TORCH_THREADS_ENV: str(shape.threads), "OMP_NUM_THREADS": str(shape.threads),
                               "MKL_NUM_THREADS": str(shape.threads)}},
    )
    try:
        client = Client(cluster, timeout=timeout, set_as_default=False)
        client.wait_for_workers(shape.n_workers, timeout=timeout)
    except Exception:
        cluster.close()
        raise
    log.info("embedded Dask cluster at %s: %d workers × %d threads, %.1f GiB each", cluster.scheduler_address,
             shape.n_workers, shape.threads, shape.memory_limit / 2**30)
    return ClusterConnection(client=client, cluster=cluster, address=cluster.scheduler_address, shape=shape)


_connections: dict = {}


def resolve_client(cluster=None):
    """The ``distributed.Client`` of ``cluster``: a Client, a :class:`ClusterConnection`, a scheduler
    address (connected once per process), or None: the active default Client, else
    ``$KRR_DASK_SCHEDULER``."""
    from distributed import Client, default_client

    if isinstance(cluster, Client):
        return cluster
    if isinstance(cluster, ClusterConnection):
        return cluster.client
    if cluster is None:
        try:
            return default_client()
        except ValueError:
            cluster = os.environ.get(SCHEDULER_ENV) or None
        if cluster is None:
            raise ValueError(f"no Dask cluster to shard the data on: pass cluster= (a distributed.Client, a "
                             f"krrcore.distributed.ClusterConnection or a scheduler address), create a Client, or "
                             f"set {SCHEDULER_ENV}")
    if not isinstance(cluster, str):
        raise ValueError(f"cluster must be a distributed.Client, a krrcore.distributed.ClusterConnection or a "
                         f"scheduler address, got {type(cluster).__name__}")
    if cluster not in _connections:
        _connections[cluster] = connect(cluster)
    return _connections[cluster].client


def worker_addresses(client) -> list[str]:
    """The cluster's worker addresses, sorted; a cluster without workers is refused."""
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    if not workers:
        raise ValueError("the Dask cluster has no workers")
    return workers
