"""The Dask cluster krrcore's work runs on: an existing scheduler, or an embedded local one.

One function, :func:`connect`, serves both cases (Dask's client/cluster split):

* ``address`` given (or the environment variable ``KRR_DASK_SCHEDULER``, e.g.
  ``tcp://10.0.0.5:8786``): a :class:`distributed.Client` on that scheduler. Its workers were
  started with the standard commands (``dask scheduler``; ``dask worker tcp://HOST:8786
  --nworkers 2 --nthreads 1 --preload krrcore.distributed.preload``) and need ``krrcore`` importable.
* otherwise: an embedded cluster of worker *processes* on this machine, sized so that
  workers × torch threads never exceeds the cores. Its scheduler and nannies are ``dask spec``
  subprocesses (:mod:`~krrcore.distributed.processes`), as in Dask's ``SubprocessCluster``,
  because ``LocalCluster(processes=True)`` cannot start its workers while a module is being
  imported, which is how ``streamlit run`` runs a page. A terminal's Ctrl-C or hang-up reaches
  only the process that started them, which then ends them (:meth:`ClusterConnection.close`),
  and they end by themselves within a second once that process is gone, however it ended.

A scheduler that stopped (killed, its machine gone) makes :meth:`ClusterConnection.alive` false
and :meth:`ClusterConnection.workers` raise :class:`ClusterUnavailable` naming its address, at
once for the embedded cluster and within a few seconds for an external one — never the 30 s
connect timeout of a Dask call on a dead scheduler.

:func:`resolve_client` says which cluster a function that places data on one uses: its
``cluster=`` argument (a ``distributed.Client``, a :class:`ClusterConnection` or a scheduler
address), else the active default ``Client``, else ``KRR_DASK_SCHEDULER``.

The scheduler of an embedded cluster never retries a task whose worker died
(``allowed_failures=0``): a run that exhausted a worker's memory would otherwise be retried
on, and kill, the next worker too. For an external scheduler set the same with
``DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0`` (docs/serving.md shows it).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from .workers import TORCH_THREADS_ENV

log = logging.getLogger(__name__)

SCHEDULER_ENV = "KRR_DASK_SCHEDULER"
#: The folder holding the ``krrcore`` package, and the workers' preload (``--preload krrcore.distributed.preload``).
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
PRELOAD = PACKAGE_ROOT / "krrcore" / "distributed" / "preload.py"


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
    def for_this_machine(
        cls, n_workers: int | None = None, threads: int = 1, memory_fraction: float = 0.8
    ) -> "LocalClusterShape":
        cores = os.cpu_count() or 1
        threads = max(1, min(int(threads), cores))
        n_workers = max(1, int(n_workers) if n_workers else cores // threads)
        if n_workers * threads > cores:
            raise ValueError(
                f"{n_workers} workers × {threads} threads = {n_workers * threads} exceeds the "
                f"{cores} cores of this machine; lower one of them"
            )
        return cls(n_workers, threads, int(_total_memory_bytes() * memory_fraction / n_workers))


class ClusterUnavailable(ConnectionError):
    """The cluster's scheduler cannot be reached (stopped, killed, or its machine gone); the
    message names its address and what to do."""


#: Seconds a question to the scheduler may take before it counts as unreachable, and that closing
#: the embedded cluster gracefully may take before its processes are killed.
SCHEDULER_TIMEOUT = 3.0


#: How long a closed port on this machine is tried again before it is refused: a scheduler started
#: a moment before the client (a script, a test, a class's server) opens its port within it.
LOCAL_PORT_GRACE = 10.0


def _check_local_port(address: str, timeout: float) -> None:
    """A scheduler address on this machine whose port nothing listens on is refused after
    :data:`LOCAL_PORT_GRACE` seconds at most (or ``timeout``, if shorter), each attempt answered at
    once by the kernel, instead of after the whole timeout the client would spend retrying. Remote
    addresses are left to the client."""
    import socket
    import time
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"address {address!r} has no valid port; expected e.g. 'tcp://127.0.0.1:8786'") from None
    if parts.hostname not in ("127.0.0.1", "localhost", "::1") or port is None:
        return
    deadline = time.monotonic() + min(LOCAL_PORT_GRACE, timeout)
    while True:
        try:
            with socket.create_connection((parts.hostname, port), timeout=SCHEDULER_TIMEOUT):
                return
        except ConnectionRefusedError:
            if time.monotonic() >= deadline:
                raise ClusterUnavailable(
                    f"no scheduler listens at {address} (the port is closed on this machine): start "
                    f"one there, or connect() without an address for the embedded cluster"
                ) from None
            time.sleep(0.2)
        except OSError:
            return  # anything else: the client says what it finds


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

    def describe(self) -> str:
        return (
            f"the embedded Dask cluster's scheduler ({self.address})"
            if self.embedded
            else f"the Dask scheduler at {self.address}"
        )

    def alive(self) -> bool:
        """Whether the scheduler can be asked anything: its process runs (embedded) and the client
        is connected. Costs nothing: no call to the scheduler."""
        if self._closed or getattr(self.client, "status", "closed") != "running":
            return False
        if not self.embedded:
            return True
        from .processes import processes_of, running

        return all(running(p) for p in processes_of(self.cluster, workers=False))

    def unavailable(self) -> ClusterUnavailable:
        """The error for a scheduler that cannot be reached, with what to do."""
        if self.embedded:
            return ClusterUnavailable(
                f"{self.describe()} has stopped; a fresh embedded cluster starts with the next run"
            )
        return ClusterUnavailable(
            f"{self.describe()} is unreachable: start it again (dask scheduler), or point "
            f"{SCHEDULER_ENV} at a running one, or unset it to use an embedded cluster"
        )

    def workers(self, timeout: float = SCHEDULER_TIMEOUT) -> dict[str, dict]:
        """The scheduler's view of the workers: address → {nthreads, memory_limit, ...}; raises
        :class:`ClusterUnavailable` when it does not answer within ``timeout`` seconds."""
        if not self.alive():
            raise self.unavailable()
        try:
            info = self.client.sync(self.client.scheduler.identity, n_workers=-1, callback_timeout=timeout)
        except (OSError, TimeoutError, asyncio.TimeoutError) as exc:
            raise self.unavailable() from exc
        return dict(info.get("workers", {}))

    def close(self, timeout: float = SCHEDULER_TIMEOUT) -> None:
        """Close the client (within ``timeout`` seconds) and, when embedded, end the cluster's
        processes."""
        if self._closed:
            return
        self._closed = True
        _shut(self.client, self.cluster, timeout)


def _shut(client, cluster, timeout: float) -> None:
    """Close ``client`` (within ``timeout`` seconds while its scheduler runs) and end ``cluster``'s
    processes (either may be None). The embedded cluster keeps nothing worth a graceful close, and
    one takes seconds and fills the server's output with its processes' farewells: they are killed."""
    from .processes import forget, kill, processes_of, running

    processes = processes_of(cluster)
    alive = cluster is None or all(running(p) for p in processes[:1])
    if client is not None:
        try:
            client.close(timeout=timeout if alive else 0.5)
        except Exception as exc:  # a client of a dead scheduler may time out closing: nothing left to do
            log.debug("closing the Dask client: %r", exc)
    if cluster is not None:
        kill(processes)
        forget(cluster)


class _QuietCancelledReconnect(logging.Filter):
    """Drops Dask's report of a client's reconnection cancelled by ``close`` (an ERROR with a
    traceback): closing the client of a scheduler that stopped cancels its attempts to reconnect,
    which is the point, not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


_QUIET = _QuietCancelledReconnect()


def connect(
    address: str | None = None,
    *,
    shape: LocalClusterShape | None = None,
    timeout: float = 60.0,
    preload: str | Path = PRELOAD,
) -> ClusterConnection:
    """Connect to ``address`` (default: ``$KRR_DASK_SCHEDULER``), or start the embedded cluster,
    whose processes run ``preload`` (a file; default :mod:`krrcore.distributed.preload`, which a
    preload of one's own may wrap: it takes the same ``--package-root`` and ``--parent-pid``)."""
    from distributed import Client

    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
    address = address or os.environ.get(SCHEDULER_ENV) or None
    if address:
        _check_local_port(address, timeout)
        client = Client(address, timeout=timeout, set_as_default=False)
        return ClusterConnection(client=client, address=address)

    from .processes import embedded_cluster

    shape = shape or LocalClusterShape.for_this_machine()
    logging.getLogger("distributed.client").addFilter(_QUIET)  # a filter is added once only
    root, preload = ["--package-root", str(PACKAGE_ROOT)], str(preload)
    threads = str(shape.threads)
    cluster = embedded_cluster(
        shape.n_workers,
        parent_pid=os.getpid(),
        # Its HTTP endpoint (health, metrics) on a free loopback port, not 8787 on every interface.
        scheduler={
            "host": "127.0.0.1",
            "port": 0,
            "dashboard": False,
            "dashboard_address": "127.0.0.1:0",
            "allowed_failures": 0,
            "preload": [preload],
            "preload_argv": root,
        },
        nanny={
            "host": "127.0.0.1",
            "nthreads": 1,
            "silence_logs": logging.WARN,
            "memory_limit": shape.memory_limit,
            "preload": [preload],
            "preload_argv": root,
            "preload_nanny": [preload],
            "preload_nanny_argv": root,
            "env": {TORCH_THREADS_ENV: threads, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads},
        },
    )
    client = None
    try:
        client = Client(cluster, timeout=timeout, set_as_default=False)
        client.wait_for_workers(shape.n_workers, timeout=timeout)
    except Exception:
        _shut(client, cluster, SCHEDULER_TIMEOUT)
        raise
    log.info(
        "embedded Dask cluster at %s: %d workers × %d threads, %.1f GiB each",
        cluster.scheduler_address,
        shape.n_workers,
        shape.threads,
        shape.memory_limit / 2**30,
    )
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
            raise ValueError(
                f"no Dask cluster to shard the data on: pass cluster= (a distributed.Client, a "
                f"krrcore.distributed.ClusterConnection or a scheduler address), create a Client, or "
                f"set {SCHEDULER_ENV}"
            )
    if not isinstance(cluster, str):
        raise ValueError(
            f"cluster must be a distributed.Client, a krrcore.distributed.ClusterConnection or a "
            f"scheduler address, got {type(cluster).__name__}"
        )
    if cluster not in _connections:
        _connections[cluster] = connect(cluster)
    return _connections[cluster].client


def worker_addresses(client) -> list[str]:
    """The cluster's worker addresses, sorted; a cluster without workers is refused."""
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    if not workers:
        raise ValueError("the Dask cluster has no workers")
    return workers
