"""Running a job for the pages: what a run is, where it executes, and how its records come back.

Here live the plain configuration of a run (:mod:`~krr_app.jobs.config`) and the one spec a worker
receives (:mod:`~krr_app.jobs.spec`); the worker's side of a run (:mod:`~krr_app.jobs.worker`: its
data cache, the Dask task, record batching, Stop and Step), the fit's picture on a plotting grid
(:mod:`~krr_app.jobs.surface`) and the Dask preload (:mod:`~krr_app.jobs.preload`); the executors
that send runs to the workers (:mod:`~krr_app.jobs.executor`), a session's runs
(:mod:`~krr_app.jobs.runs`), the live channel (:mod:`~krr_app.jobs.live_api`), what a run's status
says (:mod:`~krr_app.jobs.run_status`), and the server's start and end
(:mod:`~krr_app.jobs.lifecycle`, :mod:`~krr_app.jobs.server`).

May import: ``krrcore``, ``krr_app`` (the root: settings, text, explain), ``krr_app.charts`` (the
live channel sends the figures' values).
Never: ``streamlit``.
"""
