"""Dataset diagnostics: what the data look like to a kernel method, and a first σ, λ and M.

For the sidebar's dataset (a built-in one or an uploaded CSV): shape, column types, missing
values, the target's distribution, feature scales, the median pairwise distance, the effective
dimension d_eff(λ) = Tr K(K + λnI)⁻¹ (BLESS Eq. 1), and suggested σ, λ and M with the reasoning
(:func:`krrcore.diagnostics.suggest_hyperparameters`). A CSV that cannot be used still gets
its column report, with the problems as errors.
"""
import math

import pandas as pd
import streamlit as st

from krr_app import charts, sidebar, state, views
from krr_app import settings as limits
from krr_app.config import format_number
from krrcore.diagnostics import suggest_hyperparameters, suggested_kernel

#: λ grid of the d_eff(λ) curve.
PENALTY_GRID = tuple(10.0 ** (e / 2) for e in range(-20, 1))
DEFAULT_ROWS = 1000
CSV_OPTION = sidebar.CSV_OPTION

settings = sidebar.current()
st.title("Dataset diagnostics")
st.caption("What the data look like to a kernel method — shape, types, missing values, target, feature scales, "
           "distances, effective dimension — and a first σ, λ and M with the reasoning. Pick a built-in set "
           "or **Upload a CSV…** in the sidebar's Dataset list.")


def csv_report():
    """The column report of the uploaded CSV (None when there is none or it cannot be parsed)."""
    uploaded = st.session_state.get("csv_file")
    if st.session_state.get("dataset") != CSV_OPTION or uploaded is None:
        return None
    raw = uploaded.getvalue()
    try:
        return state.inspect_csv(raw, state.file_digest(raw), st.session_state.get("csv_target"))
    except ValueError:
        return None     # the sidebar's message says why


def csv_columns_table(report) -> pd.DataFrame:
    return pd.DataFrame({
        "column": list(report.columns),
        "role": ["target" if c == report.target else "feature" for c in report.columns],
        "type": ["numeric" if c in report.numeric else "non-numeric" for c in report.columns],
        "missing": [report.missing.get(c, 0) for c in report.columns],
        "constant": [c in report.constant for c in report.columns],
    })


report = csv_report()
if report is not None:
    st.subheader(f"Uploaded CSV: {report.n_rows:,} rows × {report.n_columns} columns")
    table = csv_columns_table(report)
    st.dataframe(table, hide_index=True, width="stretch")
    if report.problems:
        for problem in report.problems:
            st.error(f"This CSV cannot be used yet: {problem}.")
        st.caption("Fix the file (encode text columns as numbers, fill or drop missing values) and upload it again.")
        st.stop()
elif settings.data is None and st.session_state.get("dataset") == CSV_OPTION and st.session_state.get("csv_file"):
    st.error(settings.data_error or "This CSV cannot be read.")
    st.stop()

dataset = views.require_data(settings)
summary = state.dataset_summary(dataset, settings.data)

# -- shape and columns ---------------------------------------------------------------------------
st.subheader(dataset.title)
if dataset.description:
    st.caption(dataset.description)
c1, c2, c3, c4 = st.columns(4)
c1.metric("Rows (train / test)", f"{dataset.n_train:,} / {dataset.n_test:,}")
c2.metric("Features d", f"{dataset.d:,}")
c3.metric("Task", dataset.task)
median = summary["median_pairwise_distance"]
c4.metric("Median pairwise distance", "—" if not math.isfinite(median) else f"{median:.3g}",
          help="Median Euclidean distance between (at most 1,000) z-scored training points.")
if dataset.note:
    st.caption(f"Note: {dataset.note}")

features = summary["feature_table"].copy()
if report is not None:
    features.insert(1, "type", ["numeric" if c in report.numeric else "non-numeric" for c in features["feature"]])
    features.insert(2, "missing", [report.missing.get(c, 0) for c in features["feature"]])
else:
    features.insert(1, "type", "numeric (float64)")
    features.insert(2, "missing", 0)
with st.expander(f"Columns: types, missing values, scales ({dataset.d} features)", expanded=dataset.d <= 12):
    st.dataframe(features, hide_index=True, width="stretch")
    views.download_csv(features, key="data_features_csv", filename="krr-features.csv", label="Download (CSV)")

col_target, col_scales = st.columns(2)
with col_target:
    st.markdown(f"**Target: {dataset.target_name}**")
    views.plot(charts.target_figure(dataset), key="data_target", filename="krr-target")
    views.download_csv(charts.target_frame(dataset), key="data_target_csv", filename="krr-target.csv")
with col_scales:
    st.markdown("**Feature scales** (before z-scoring; the model sees z-scored features)")
    views.plot(charts.feature_scales_figure(features), key="data_scales", filename="krr-feature-scales")

# -- effective dimension and suggestions ---------------------------------------------------------
st.subheader("Effective dimension d_eff(λ)")
with st.columns([1, 3])[0]:
    rows = views.points_used(dataset, key="data_n", default=DEFAULT_ROWS, maximum=limits.DIAGNOSTICS_MAX_ROWS,
                          help=f"Exact eigenvalues of K up to {limits.DENSE_SPECTRUM_MAX_N:,} points; a Nyström estimate (a "
                               "lower bound) above.")
X, data_key, caption = views.training_rows(dataset, settings.data, rows)
st.caption(caption)
kernel, kernel_params = views.kernel_key(settings)
curves = {}
try:
    curves[f"sidebar kernel ({kernel}, {', '.join(f'{k}={format_number(v)}' for k, v in kernel_params)})"] = \
        state.effective_dimension_curve(X, data_key, kernel, kernel_params, PENALTY_GRID)
except ValueError as exc:
    st.error(f"d_eff cannot be computed with the sidebar's kernel: {exc}")
suggestion = None
# A CSV's kernel and λ are generic defaults, a built-in set's are curated: only those are preferred.
catalogue_kernel = None if settings.data.is_csv else dict(dataset.suggested_kernel)
catalogue_penalty = None if settings.data.is_csv else dataset.suggested_penalty
if catalogue_kernel or (math.isfinite(median) and median > 0):
    suggested = suggested_kernel(median, catalogue_kernel)
    curve = state.effective_dimension_curve(X, data_key, *suggested, PENALTY_GRID)
    if suggested != (kernel, kernel_params):
        curves[f"suggested ({suggested[0]}, {', '.join(f'{k}={format_number(v)}' for k, v in suggested[1])})"] = curve
    suggestion = suggest_hyperparameters(len(X), median, curve, catalogue_kernel=catalogue_kernel,
                                            catalogue_penalty=catalogue_penalty)
marks = {"sidebar λ": settings.penalty}
if suggestion is not None:
    marks["suggested λ"] = suggestion["penalty"]
if curves:
    views.plot(charts.deff_figure(curves, marks=marks, n=len(X)), key="data_deff", filename="krr-deff")
    views.download_csv(pd.concat([c.assign(kernel=label) for label, c in curves.items()], ignore_index=True),
                    key="data_deff_csv", filename="krr-deff.csv")

st.subheader("Suggested σ, λ and M")
if suggestion is None:
    st.error("No σ can be suggested: all training points are identical (the median distance is zero).")
else:
    s1, s2, s3, s4, s5 = st.columns(5)
    s1.metric("Kernel", suggestion["kernel"].capitalize())
    s2.metric("σ", "—" if suggestion["sigma"] is None else f"{suggestion['sigma']:.3g}")
    s3.metric("λ", format_number(suggestion["penalty"]))
    s4.metric("M", f"{suggestion['M']:,}")
    s5.metric("d_eff at that λ", f"{suggestion['d_eff']:.1f}")
    for key in ("sigma", "lambda", "M"):
        st.markdown(f"- {suggestion['reasons'][key]}")
    if len(X) < dataset.n_train:
        st.caption(f"d_eff and M are for the n = {len(X):,} points used above; with all {dataset.n_train:,} "
                   "training points d_eff(λ) is larger.")

    def _apply(values: dict) -> None:
        lo, hi = sidebar.LOG_LAMBDA_RANGE
        st.session_state["kernel"] = values["kernel"]
        for name, value in values["kernel_params"].items():     # sidebar keys are the parameter names
            st.session_state[name] = float(f"{value:.4g}") if name == "sigma" else value
        st.session_state["log_lambda"] = min(hi, max(lo, round(math.log10(values["penalty"]) * 4) / 4))
        st.session_state["M"] = int(values["M"])

    st.button("Use these in the sidebar", key="data_apply", on_click=_apply, args=(suggestion,),
              icon=":material/tune:", help="Sets the sidebar's kernel and its parameters, λ (rounded to the "
                                            "slider's quarter decades) and M to these values.")

views.explanation("d_eff", "suggestions", "sigma", "lambda")
