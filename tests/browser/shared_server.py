"""One ``streamlit run app.py`` for every browser test that needs a plain server (the ``server``
fixture of tests/conftest.py).

A cold start imports torch on the server and starts its Dask cluster with the first visit: about
20 s of the suite each time. The server starts at the first test that asks for it and stops once
the last test of this folder has run (or at the session's end), so the library's tests after it
run on a quiet machine. Tests that change how the server starts (an environment, a flag, or
stopping it) start their own with :func:`krr_app.jobs.server.running_app`.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from krr_app.jobs.server import ServerFailed, running_app

#: The folder whose tests share the server.
HERE = Path(__file__).resolve().parent


class SharedServer:
    """The folder's server, started on first use and stopped by :meth:`stop`."""

    def __init__(self):
        self._stack: ExitStack | None = None
        self._address: tuple[str, Path] | None = None

    def get(self, tmp_path_factory) -> tuple[str, Path]:
        if self._address is None:
            log_path = tmp_path_factory.mktemp("streamlit") / "server.log"
            stack = ExitStack()
            try:
                url, _process = stack.enter_context(running_app(log_path))
            except ServerFailed as exc:
                stack.close()
                pytest.fail(str(exc))
            self._stack, self._address = stack, (url, log_path)
        return self._address

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack = self._address = None


SHARED = SharedServer()
