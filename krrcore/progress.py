"""An opt-in progress bar for library users, drawn from the record stream every solver emits.

``model.fit(X, y, progress=True)`` wraps :meth:`iter_fit` with :func:`progress_bar`; a caller who
loops over ``iter_fit`` itself can wrap it the same way. ``tqdm.auto`` picks a terminal bar or a
notebook widget. The bar shows iterations out of ``maxiter``, the residual and, when validation data
was given, the validation metric; it adds no work to the solver (it only reads the records).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from .stream import IterationRecord


def progress_bar(
    records: Iterable[IterationRecord], *, total: int | None = None, desc: str | None = None
) -> Iterator[IterationRecord]:
    """Yield ``records`` unchanged while a tqdm bar follows their ``iteration``, ``residual`` and
    ``val_metric``. ``total`` is the expected last iteration (``maxiter``); None for a direct solve."""
    from tqdm.auto import tqdm

    with tqdm(total=total if total is not None else 1, desc=desc, unit="it", leave=True) as bar:
        done = 0
        for record in records:
            step = record.iteration - done if total is not None else 1
            done = record.iteration
            postfix = {"residual": f"{record.residual:.3g}"}
            if math.isfinite(record.val_metric):
                postfix[f"val {record.metric}"] = f"{record.val_metric:.4g}"
            bar.set_postfix(postfix, refresh=False)
            bar.update(max(step, 0))
            yield record
