"""Running a job for the pages: what a worker receives and does, and how its records come back.

Here live the one spec a worker receives (:mod:`~krr_app.jobs.spec`), the worker's side of a run
(:mod:`~krr_app.jobs.worker`: its data cache, the Dask task, record batching, Stop and Step), the
fit's picture on a plotting grid (:mod:`~krr_app.jobs.surface`) and the Dask preload
(:mod:`~krr_app.jobs.preload`).

May import: krrcore (its public modules), Dask, and the modules of ``krr_app``'s root (settings,
text); never Streamlit, plotly or another room of ``krr_app``.
"""
