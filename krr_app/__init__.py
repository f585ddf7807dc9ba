"""The Streamlit front end's reusable parts, in rooms (``app.py`` and ``app_pages/`` are thin on top).

Every number a page shows is computed by :mod:`krrcore`; this package holds widgets, charts, text,
runs and caching only (no linear algebra: ``tests/test_layers.py``). The rooms, bottom to top:

* the root — :mod:`.settings` (every limit and environment variable of the app), :mod:`.text` (how a
  string the user supplied is shown), :mod:`.explain` (the short explanations), :mod:`.cli` (the
  ``krr-explorer`` command).
* :mod:`.charts` — plotly figures, SVG pictures and CSV tables (no Streamlit).
* :mod:`.jobs` — a run's configuration, the spec a worker receives, the worker's side, the
  executors, a session's runs, the live channel, and the server's start and end.
* :mod:`.teaching` — links, lessons, the teacher's view, the reproduce snippet.
* :mod:`.parts` — the pages' shared parts: the sidebar, the page building blocks, the upload, the caches.

Each room's ``__init__`` says what lives there and what it may import (``tests/test_layers.py``
checks it). The root's modules may import ``krrcore`` only.
"""
