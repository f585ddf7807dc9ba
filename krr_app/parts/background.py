"""Diagnostics computed in the background on the Dask workers the runs use: :class:`BackgroundResults`
(the Conditioning and Leverage pages' results, shared by all sessions, all of a page's sections at
once), :class:`Pending` (what a page shows until one arrives), and the two scheduling rules of a
page run (:func:`first_picture_calls`, :func:`rest_waits`)."""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections import OrderedDict

from krr_app.jobs.executor import cluster_failure, get_executor


def compute(fn, /, *args, **kwargs):
    """A diagnostic's krrcore computation on the workers the runs use (ahead of queued runs), so
    a classroom on these pages does not load the web server; its result comes back to the cache.
    A cluster that cannot be reached is a ValueError, which the pages show as any refused setting
    (nothing is cached: the next look tries again)."""
    try:
        return get_executor().call(fn, *args, **kwargs)
    except Exception as exc:
        raise _unreached(exc) from None


def _unreached(exc: Exception) -> Exception:
    """A cluster failure as a ValueError (the pages show it as any refused setting); other errors as they are."""
    failure = cluster_failure(exc)
    return exc if failure is None else ValueError(f"it could not run on the cluster: {failure}")


class Pending:
    """A diagnostic still computing on the workers: the page shows ``what`` in its place and streams
    the result in when it is ready (:func:`krr_app.parts.views.stream_in`)."""

    def __init__(self, what: str, key: tuple):
        self.what, self.key = what, key

    def __repr__(self) -> str:
        return f"Pending({self.what!r})"


class _Failed:
    def __init__(self, error: Exception):
        self.error = error


#: Whether the computations a page asks for now make its first picture (:func:`first_picture_calls`).
_FIRST_PICTURE: contextvars.ContextVar[bool] = contextvars.ContextVar("first_picture", default=False)


@contextlib.contextmanager
def first_picture_calls():
    """Computations started inside make a page's first picture: they go ahead of those queued
    before (another visitor's later sections), as a new visitor is waiting for them."""
    token = _FIRST_PICTURE.set(True)
    try:
        yield
    finally:
        _FIRST_PICTURE.reset(token)


#: Whether the computations a page asks for now wait for its next run (:func:`rest_waits`).
_REST_WAITS: contextvars.ContextVar[bool] = contextvars.ContextVar("rest_waits", default=False)


def rest_waits(waits: bool) -> None:
    """From here to the end of this page run, computations other than the first picture's
    (:func:`first_picture_calls`) are not started: they wait for the page's next run, which
    :func:`krr_app.parts.views.stream_in` asks for. On a new visitor's first page run the cores then go
    to the first picture and to the browser painting it, not to the sections below it. Every page
    run starts with ``rest_waits(False)`` (:func:`krr_app.parts.sidebar.render`)."""
    _REST_WAITS.set(waits)


class BackgroundResults:
    """The diagnostic pages' results, by their plain parameters (shared by all sessions, like
    ``st.cache_data``): computed on the workers, all of a page's sections at once, so a page draws
    each as it arrives instead of waiting for them one after another. Keeps the last ``size``
    results (a failure too: its error is raised again), and the computations under way.

    A computation the cluster took with it (its scheduler stopped) is not kept: it starts once
    more at once, on a fresh embedded cluster; a second such loss, or an external scheduler that
    cannot be reached, is raised as a ValueError naming the cluster (the next look tries again)."""

    def __init__(self, size: int):
        self.size = size
        self._done: OrderedDict = OrderedDict()
        self._running: dict = {}
        self._retried: set = set()  # keys started again after the cluster lost them
        self._lock = threading.Lock()

    def get(self, key: tuple, what: str, fn, /, *args, then=None, **kwargs):
        """The result of ``fn(*args, **kwargs)`` (``then`` applied here), a :class:`Pending` while
        it computes; raises its error if it failed."""
        with self._lock:
            if key in self._done:
                self._done.move_to_end(key)
                return self._value(self._done[key])
            future = self._running.get(key)
            if future is None and _REST_WAITS.get() and not _FIRST_PICTURE.get():
                return Pending(what, key)
            if future is None:
                try:
                    executor = get_executor()  # an unreachable scheduler: a message, as a failed submit
                    submit = executor.submit_first if _FIRST_PICTURE.get() else executor.submit_call
                    future = self._running[key] = submit(fn, *args, **kwargs)
                except Exception as exc:
                    self._retried.discard(key)
                    raise _unreached(exc) from None
        if not future.done():
            return Pending(what, key)
        try:
            value = future.result()
            value = then(value) if then is not None else value
        except Exception as exc:  # a ValueError the page explains, or the cluster's failure
            if cluster_failure(exc) is not None:  # not kept: the next look computes it again
                with self._lock:
                    replaced = self._running.get(key) is not future  # another look started it again
                    if not replaced:
                        self._running.pop(key, None)
                    again = replaced or key not in self._retried
                    self._retried.add(key)
                if again:
                    return self.get(key, what, fn, *args, then=then, **kwargs)
                with self._lock:
                    self._retried.discard(key)
                raise _unreached(exc) from None
            value = _Failed(exc)
        with self._lock:
            self._running.pop(key, None)
            self._retried.discard(key)
            self._done[key] = value
            while len(self._done) > self.size:
                self._done.popitem(last=False)
        return self._value(value)

    @staticmethod
    def _value(value):
        if isinstance(value, _Failed):
            raise value.error
        return value

    def ready(self, key: tuple) -> bool:
        """Whether the computation of ``key`` has finished (its result is kept or can be read)."""
        with self._lock:
            future = self._running.get(key)
            return key in self._done or (future is not None and future.done())

    def started(self, key: tuple) -> bool:
        """Whether the computation of ``key`` was started (it may have finished)."""
        with self._lock:
            return key in self._done or key in self._running

    def running(self) -> int:
        """How many computations are under way or finished but not yet read by a page."""
        with self._lock:
            return len(self._running)

    def wait_for(self, keys, timeout: float) -> None:
        """Block until the computations of ``keys`` have finished, for ``timeout`` seconds at most."""
        deadline = time.monotonic() + timeout
        with self._lock:
            futures = [self._running[k] for k in keys if k in self._running]
        for future in futures:
            try:
                future.result(max(0.0, deadline - time.monotonic()))
            except Exception:  # not yet (the page draws it when it is in), or failed (raised to the page)
                pass

    def wait(self, timeout: float | None = None) -> None:
        """Block until every computation under way has finished (tests; a page streams instead)."""
        with self._lock:
            futures = list(self._running.values())
        for future in futures:
            try:
                future.result(timeout)
            except Exception:  # its error is raised to the page that reads it
                pass

    def clear(self) -> None:
        with self._lock:
            self._done.clear()
            self._running.clear()
            self._retried.clear()


#: The diagnostic pages' results (Conditioning, Leverage scores).
