"""The Streamlit front end's reusable parts (``app.py`` and ``app_pages/`` are thin on top).

* :mod:`.config` — :class:`RunConfig`, the plain configuration that keys caches, labels runs and
  generates the reproduce snippet; input problems as sentences (:func:`problems`).
* :mod:`.runs` — :class:`Run`, the per-session :class:`RunRegistry` (one worker thread per
  session, a server-wide cap on computing solvers) and the fit loop (never calls Streamlit).
* :mod:`.state` — cached dataset loaders and the session's registry (``st.cache_*``).
* :mod:`.sidebar` — the shared, URL-bound sidebar; pages read it with :func:`sidebar.current`.
* :mod:`.views` — status, metrics, charts, downloads and the polling fragment, for every page.
* :mod:`.charts` — plotly figures and CSV tables from runs (no Streamlit).
* :mod:`.snippet` — the "reproduce in Python" code of a RunConfig.
* :mod:`.explain` — the short explanations, tooltips and lessons.
"""
