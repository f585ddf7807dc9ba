"""``krrcore.sharded``: the public name of :mod:`krrcore.distributed` (``from krrcore import
sharded``; ``sharded.generate``, ``sharded.scatter``, ``sharded.ShardedKernelOperator``, ...).
Everything here is :mod:`krrcore.distributed`'s; read that package for what it does."""

from __future__ import annotations

from .distributed import *  # noqa: F401,F403  (the public API, listed in __all__)
from .distributed import __all__  # noqa: F401
