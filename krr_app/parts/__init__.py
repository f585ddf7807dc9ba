"""The pages' shared parts: the sidebar, the page building blocks, the upload and the caches.

Here live the shared sidebar (:mod:`~krr_app.parts.sidebar`; its solver section
:mod:`~krr_app.parts.solver_controls`), the uploaded table
(:mod:`~krr_app.parts.upload`), the page building blocks (:mod:`~krr_app.parts.views`: status,
metrics, charts, polling; :mod:`~krr_app.parts.inputs`: URL-bound and bounded inputs, downloads,
the last valid result), a run's pictures of its model (:mod:`~krr_app.parts.fit_views`), the
charts while runs compute (:mod:`~krr_app.parts.live_chart`), the
cached loaders and per-session state (:mod:`~krr_app.parts.state`) and the diagnostics computed in
the background on the workers (:mod:`~krr_app.parts.background`).

May import: ``krrcore``, ``krr_app`` (the root: settings, text, explain), ``krr_app.charts``,
``krr_app.jobs``, ``krr_app.teaching``, ``streamlit``.
"""
