"""``krrcore.cluster``: the public name of :mod:`krrcore.distributed.cluster` (``connect``,
``LocalClusterShape``, ``ClusterConnection``), kept so that scripts written against it still run.
Everything here is that module's; read it for what it does."""

from __future__ import annotations

from .distributed.cluster import (  # noqa: F401  (re-exported)
    SCHEDULER_ENV,
    ClusterConnection,
    LocalClusterShape,
    connect,
    resolve_client,
    worker_addresses,
)
