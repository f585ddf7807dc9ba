"""What a fit will need, before it runs: the estimate every estimator gives from its parameters.

:meth:`EstimatedResources.memory_estimate` builds a :class:`~krrcore.memory.MemoryEstimate` with
krrcore's one cost model (:class:`~krrcore.memory.CostModel`): the data, each solver's own parts
(``_estimate_resources``) and the validation rows a fit's records keep. A fit on rows sharded on a
Dask cluster splits the same model by place: ``_hold_model`` (what the client holds) and
``_hold_rows`` (what a worker allocates for its shard), :mod:`krrcore.distributed.admission`.
The estimators' base class (:class:`~krrcore.solvers.base.KRRBase`) provides the parameters read
here (``memory_budget``, ``_device``, ``_dtype``, ``_kernel``, ``_validate_params``).
"""

from __future__ import annotations

from .._validation import check_int
from ..memory import CostModel, MemoryEstimate, scratch_budget
from .records import validation_cache_bytes


class EstimatedResources:
    """The resource estimate of an estimator (a mixin of :class:`~krrcore.solvers.base.KRRBase`)."""

    def memory_estimate(
        self, n: int, d: int, n_outputs: int = 1, *, n_val: int = 0, weighted: bool = False
    ) -> MemoryEstimate:
        """Peak memory (and, on a CPU, time) of fitting this estimator, as configured, on ``n`` points
        with ``d`` features and ``n_outputs`` targets — from the parameters alone, allocating nothing.
        ``n_val``: validation points given to ``fit``, with the kernel rows its records keep
        (:func:`validation_cache_bytes`). ``weighted``: ``fit`` is given ``sample_weight`` (its n
        float64 weights are held).

        What it stores is checked against the storage budget of ``memory_budget`` (krrcore's one
        policy, :mod:`krrcore.memory`), its whole peak against the free memory; a front end with a
        limit of its own compares ``peak_bytes`` with it. ``fit`` runs the same estimate first and
        refuses what does not fit (:meth:`~krrcore.memory.MemoryEstimate.check`).
        """
        self._validate_params()
        return self._memory_estimate(n, d, n_outputs, n_val=n_val, weighted=weighted)

    def _memory_estimate(
        self, n: int, d: int, n_outputs: int = 1, *, n_val: int = 0, weighted: bool = False
    ) -> MemoryEstimate:
        n, d = check_int(n, "n"), check_int(d, "d")
        k = check_int(n_outputs, "n_outputs")
        device, dtype = self._device(), self._dtype()
        model = CostModel(
            d=d,
            dtype=dtype,
            device=device,
            memory_budget=self.memory_budget,
            scratch_blocks=self._kernel().scratch_blocks,
        )
        model.hold("training data X, y", n * (d + k) * model.itemsize, "data")
        if weighted:
            model.hold("sample weights (float64)", n * 8, "data")
        suggestion = self._estimate_resources(model, n, k)
        if getattr(self, "uncertainty", False):  # the posterior set-up (krrcore.solvers.uncertainty)
            self._estimate_posterior(model, n, k)
        n_val = check_int(n_val, "n_val", minimum=0)
        if n_val:
            model.hold("validation data X_val, y_val", n_val * (d + k) * model.itemsize, "data")
            model.hold(
                "validation kernel rows K(X_val, centres)",
                validation_cache_bytes(n_val, self._center_count(n), model.itemsize, model.scratch_bytes),
                "scratch",
            )
        return model.build(type(self).__name__, n, k, suggestion)

    def _center_count(self, n: int) -> int:
        """How many centres the fitted model expands over: n for full KRR (Nyström solvers: M)."""
        return n

    def _block_budget(self) -> int:
        """Bytes one blocked kernel product may use (:func:`krrcore.memory.scratch_budget`)."""
        return scratch_budget(self.memory_budget, self._device())

    def _estimate_resources(self, model: CostModel, n: int, k: int) -> str:
        """Add this solver's parts and seconds to ``model``; return the suggestion if it does not fit.

        Every krrcore solver overrides this; the default (for a user's subclass) counts the data only.
        """
        return ""

    #: How the solver runs on rows sharded on a Dask cluster (:mod:`krrcore.distributed`): "nystrom"
    #: (its products are K_nM's), "full" (those of K + λnI), or None: it does not.
    _sharded_kind = None

    def _hold_model(self, model: CostModel, n: int, k: int) -> None:
        """Add to ``model`` what a fit on n rows holds wherever its rows are (M×M matrices, CG
        vectors): on a cluster, the client's part. Solvers with a ``_sharded_kind`` override it."""

    def _hold_rows(self, model: CostModel, rows: int, n: int, k: int) -> None:
        """Add to ``model`` what a fit on n rows allocates for ``rows`` of them where they are (kernel
        block buffers over them): on a cluster, a worker's part for its shard. Nyström solvers
        override it."""
