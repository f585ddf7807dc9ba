"""The Streamlit front end's reusable parts, by layer (``app.py`` and ``app_pages/`` are thin on top).

Every number a page shows is computed by :mod:`krrcore`; this package holds widgets, charts, text
and caching only (no linear algebra: ``tests/test_layers.py``).

* :mod:`.settings` — every limit and environment variable of the app.
* :mod:`.config` — :class:`RunConfig`, the plain configuration that keys caches, labels runs and
  generates the reproduce snippet; input problems as sentences (:func:`problems`).
* :mod:`.state` — every ``st.cache_*``: datasets, uploaded CSVs, the diagnostic pages' results, the
  session's runs.
* :mod:`.runs`, :mod:`.executor` — runs and where they execute (Dask workers).
* :mod:`.sidebar` — the shared, URL-bound sidebar; pages read it with :func:`sidebar.current`.
* :mod:`.views` — status, metrics, charts, downloads, polling and bounded URL-bound inputs.
* :mod:`.charts` — plotly figures and CSV tables (no Streamlit).
* :mod:`.explain` — the short explanations, tooltips and lessons.
* :mod:`.snippet` — the "reproduce in Python" code of a RunConfig.
* :mod:`.cli` — the ``krr-explorer`` command; :mod:`.server` — the app as a child process for tests.
"""
