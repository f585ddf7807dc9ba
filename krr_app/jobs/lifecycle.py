"""How the server ends (``streamlit run app.py``, st.App mode): within seconds, quietly, and with
every process it started.

uvicorn serves the app. On SIGINT or SIGTERM its own handler stops accepting connections, closes
the open ones, runs the lifespan's shutdown (:func:`lifespan`: the embedded Dask cluster is closed
there), then raises the signal again — for Ctrl-C a KeyboardInterrupt, printed as "Aborted!" with
exit status 1. SIGHUP (the terminal closed) it leaves to the default action, which kills the server
without closing anything. Once the server has started, :func:`lifespan` installs one handler for
the three:

* the first signal asks uvicorn to shut down, as its own handler does, without raising the signal
  again afterwards: exit status 0;
* a second signal (Ctrl-C pressed again), or a shutdown still running
  :data:`~krr_app.settings.SHUTDOWN_SECONDS` after the first, ends every process the server
  started and the server at once: exit status 128 + the signal (130 for Ctrl-C, 143 for SIGTERM,
  129 for SIGHUP).

After SIGHUP nothing can be shown any more: the server's output goes to /dev/null, so that writing
to the closed terminal cannot fail the shutdown. The cluster's processes never see these signals
(they run in sessions of their own, :mod:`krrcore.distributed.cluster`), and end by themselves
when the server is killed outright.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from contextlib import asynccontextmanager

from krr_app.settings import SHUTDOWN_SECONDS

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@asynccontextmanager
async def lifespan(_app):
    """The server's life: signal handlers at start; at the end, the executor and its embedded
    cluster closed, and any process the server started and still running ended."""
    install_signal_handlers()
    try:
        yield
    finally:
        executor = sys.modules.get(f"{__package__}.executor")  # not imported: no page ever ran, no cluster
        if executor is not None:
            await asyncio.to_thread(executor.close_executor)
        end_children()


class _Shutdown:
    """The signal handler: the first signal starts a graceful shutdown, a second one, or the
    deadline, ends everything at once."""

    def __init__(self, server, previous: dict):
        self.server = server  # uvicorn's Server, found through its handler
        self.previous = previous
        self.first: int | None = None

    def __call__(self, signum, frame) -> None:
        if self.first is not None:
            end_now(signum)
        self.first = signum
        if signum == signal.SIGHUP:
            _silence()
        else:
            _say("Stopping the server and its Dask workers (press Ctrl-C again to stop at once)…")
        threading.Thread(target=self._deadline, args=(signum,), name="krr-shutdown-deadline", daemon=True).start()
        if self.server is not None:
            self.server.should_exit = True  # uvicorn's handler would also re-raise the signal at exit
            return
        previous = self.previous.get(signum)
        if callable(previous):
            previous(signum, frame)
        else:  # no server we know: the signal's own default, now
            end_now(signum)

    def _deadline(self, signum: int) -> None:
        time.sleep(SHUTDOWN_SECONDS)
        _say(f"The shutdown took longer than {SHUTDOWN_SECONDS:g} s: stopping now.")
        end_now(signum)


def install_signal_handlers() -> _Shutdown | None:
    """Handle SIGINT, SIGTERM and SIGHUP as the module docstring says (from the main thread only,
    where Python delivers signals; elsewhere nothing is installed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    server = getattr(previous[signal.SIGINT], "__self__", None)
    if not (hasattr(server, "should_exit") and hasattr(server, "force_exit")):
        server = None
    handler = _Shutdown(server, previous)
    for signum in SIGNALS:
        signal.signal(signum, handler)
    return handler


def end_children(timeout: float = 1.0) -> None:
    """SIGKILL every process this one started (and theirs), and wait up to ``timeout`` s."""
    import psutil

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for child in children:
        try:
            child.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(children, timeout=timeout)


def end_now(signum: int) -> None:
    """End every process the server started, then the server, at once (exit status 128 + signal)."""
    try:
        end_children(timeout=0.5)
    finally:
        os._exit(128 + signum)


def _say(text: str) -> None:
    try:
        print(f"  {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # no terminal to write to
        pass


def _silence() -> None:
    """Point stdout and stderr at /dev/null (the terminal is gone)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)
    except OSError:
        pass
