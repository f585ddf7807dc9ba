"""Figures: plain data in, plotly figures, SVG pictures and CSV tables out.

Here live the runs' and the Conditioning page's figures (:mod:`~krr_app.charts.figures`), the
Leverage page's (:mod:`~krr_app.charts.leverage`), the Dataset page's (:mod:`~krr_app.charts.data`), the fitted
function or decision surface (:mod:`~krr_app.charts.fit`), where the model is unsure (the 1-D band and
the 2-D map, :mod:`~krr_app.charts.uncertainty`), the Tune page's figures
(:mod:`~krr_app.charts.tuning`), the pictures drawn as SVG before plotly has loaded
(:mod:`~krr_app.charts.images`) and the data before any run (:mod:`~krr_app.charts.preview`).

May import: ``krrcore``, ``krr_app`` (the root: settings, text, explain).
Never: ``streamlit``.
"""
