"""Dataset diagnostics: what the data look like to a kernel method, and a first σ, λ and M.

For the sidebar's dataset (a built-in one or an uploaded table), in sections:

1. **Your table** (uploaded tables): one row per column — what it holds, its role (editable:
   feature, categorical, ignore, weight, target), missing cells and what it becomes — the missing-value
   rule, and every decision in one sentence (:func:`krrcore.datasets.inspect_frame`). Drawn from the
   file at once, before the preprocessing is fitted.
2. **Shape**: rows, the n × d the model sees after preprocessing, task, median distance.
3. **The data**: the data's picture (an SVG image: the page's first picture), then — from the
   session's second page run on (:func:`krr_app.parts.views.after_first_picture`), so that plotly.js
   does not hold the picture back — the target's distribution and the spread of each model input.
4. **Effective dimension** d_eff(λ) = Tr K(K + λnI)⁻¹ (BLESS Eq. 1), computed on the workers, and
   suggested σ, λ and M with the reasoning (:func:`krrcore.diagnostics.suggest_hyperparameters`).

Every user string from a file (column names, cells, the file name) is shown through
:func:`krr_app.text.plain` or inside tables, never as Markdown.
"""

import math

import pandas as pd
import streamlit as st

from krr_app import settings as limits
from krr_app.charts import data as data_charts
from krr_app.jobs.config import format_number
from krr_app.parts import sidebar, state, upload, views
from krr_app.text import plain
from krrcore.datasets import MISSING_RULES
from krrcore.diagnostics import suggest_hyperparameters, suggested_kernel
from krrcore.numbers import readable

#: λ grid of the d_eff(λ) curve.
PENALTY_GRID = tuple(10.0 ** (e / 2) for e in range(-20, 1))
DEFAULT_ROWS = 1000
#: Roles the column table offers (the target is a role there; the library takes it separately).
TABLE_ROLES = ("feature", "categorical", "ignore", "weight", "target")
#: session_state: a counter that gives the column table a fresh key after each applied edit.
EDITOR_VERSION_KEY = "_krr_table_editor"

st.title("Dataset diagnostics")
st.caption(
    "What the data look like to a kernel method — columns, shape, target, scales, distances, effective "
    "dimension — and a first σ, λ and M with the reasoning. Pick a built-in set or **Upload a table…** "
    "(CSV or Parquet) in the sidebar's Dataset list."
)
choice = sidebar.data()


# -- 1. your table -------------------------------------------------------------------------------
def column_table(report) -> pd.DataFrame:
    """One row per column of the uploaded table: the target first, then the columns in file order."""
    rows = [
        {
            "column": report.target,
            "holds": "target",
            "role": "target",
            "missing": report.missing.get(report.target, 0),
            "becomes": f"target ({report.target_task or 'task not detected'})",
            "decision": "",
        }
    ]
    for d in report.decisions:
        rows.append(
            {
                "column": d.name,
                "holds": d.kind,
                "role": d.role,
                "missing": d.missing,
                "becomes": {
                    "numeric": "standardised",
                    "one-hot": "one-hot",
                    "date": "year, day of year" + (", hour" if d.with_time else ""),
                }.get(d.encoding, "left out"),
                "decision": d.sentence,
            }
        )
    return pd.DataFrame(rows)


def _apply_edit(key: str, names: list[str], detected: dict) -> None:
    upload.apply_role_edits(st.session_state.get(key, {}).get("edited_rows", {}), names, detected)
    st.session_state[EDITOR_VERSION_KEY] = st.session_state.get(EDITOR_VERSION_KEY, 0) + 1


def table_section(table) -> None:
    report, spec = table.report, table.spec
    fmt = report.format.describe() if report.format is not None else "a DataFrame"
    st.subheader(
        f"Your table: {plain(spec.csv_filename or 'uploaded table')}, {report.n_rows:,} rows × "
        f"{report.n_columns:,} columns"
    )
    rule = upload.target_rule(spec.csv_digest, report.target)
    if rule:  # the target was taken by the rule, not chosen: said above everything about it
        st.info(rule, icon=":material/ads_click:")
    st.caption(
        f"Read as {plain(fmt)}. Each column's role "
        "can be changed in the table (feature: used as it is detected; categorical: one-hot; ignore: left "
        "out; weight: each row's sample weight in the fit, one column at most; target: the column to predict); "
        "every choice is kept in the page's address."
    )
    frame = column_table(report)
    detected = {d.name: d.role for d in state.inspect_table(table.raw, spec.csv_digest, report.target).decisions}
    key = f"table_roles_{st.session_state.get(EDITOR_VERSION_KEY, 0)}"
    st.data_editor(
        frame,
        key=key,
        hide_index=True,
        width="stretch",
        disabled=[c for c in frame if c != "role"],
        on_change=_apply_edit,
        args=(key, list(frame["column"]), detected),
        column_config={
            "role": st.column_config.SelectboxColumn("role", options=TABLE_ROLES, required=True),
            "decision": st.column_config.TextColumn("decision", width="large"),
        },
    )
    views.bound_widget(
        st.radio,
        "Missing values",
        upload.MISSING_KEY,
        "impute",
        options=MISSING_RULES,
        captions=upload.MISSING_CAPTIONS,
        horizontal=True,
        help="What a gap in a column used becomes: the training median (with a column marking "
        "where it was), or the row is dropped. Gaps in a target are always dropped.",
    )
    if report.notes:
        st.markdown("**What is done to the table**\n" + "\n".join(f"- {plain(n, limit=None)}" for n in report.notes))
    for problem in report.problems:
        st.error(f"This table cannot be used yet: {plain(problem, limit=None)}.")


if choice.table is not None:
    table_section(choice.table)
    if choice.table.report.problems:
        sidebar.finish()  # the rest of the sidebar, and above the page the link's notes
        st.stop()
dataset = choice.dataset  # an uploaded table is built when first asked for
if dataset is None:
    (st.info if choice.spec is None else st.error)(choice.error or "Choose a dataset in the sidebar.")
    sidebar.finish()
    st.stop()
summary = state.dataset_summary(dataset, choice.spec)

# -- 2. shape ------------------------------------------------------------------------------------
st.subheader(plain(dataset.title) if dataset.name == "csv" else dataset.title)
if dataset.description:
    st.caption(plain(dataset.description, limit=None))
c1, c2, c3, c4 = st.columns([2, 1, 1, 1])  # "800,000 / 200,000" fits
c1.metric("Rows (train / test)", f"{dataset.n_train:,} / {dataset.n_test:,}")
c2.metric(
    "Features d",
    f"{dataset.d:,}",
    help="Columns the model sees after preprocessing (one-hot columns, indicator columns and date parts included)."
    if dataset.preprocess is not None
    else None,
)
c3.metric("Task", dataset.task)
median = summary["median_pairwise_distance"]
c4.metric(
    "Median pairwise distance",
    "—" if not math.isfinite(median) else readable(median, 3),
    help="Median Euclidean distance between (at most 1,000) standardised training points.",
)
if dataset.preprocess is not None:
    st.caption(
        f"After preprocessing: n × d = {dataset.n:,} × {dataset.d:,} (fitted on the {dataset.n_train:,} "
        "training rows only)."
    )
elif dataset.note:
    st.caption(f"Note: {plain(dataset.note, limit=None)}")

# -- 3. the data ---------------------------------------------------------------------------------
st.markdown("**The data** (training points)")
st.markdown(state.data_picture(dataset, choice.spec))  # an image: painted before plotly loads
settings = sidebar.current()
if not views.after_first_picture("dataset_charts"):
    st.caption("The charts and the effective dimension follow in a moment…")
    st.stop()
col_target, col_scales = st.columns(2)
with col_target:
    st.markdown(f"**Target: {plain(dataset.target_name)}**")
    views.plot(data_charts.target_figure(dataset), key="data_target", filename="krr-target")
    views.download_csv(data_charts.target_frame(dataset), key="data_target_csv", filename="krr-target.csv")
features = summary["feature_table"].copy()
with col_scales:
    st.markdown(
        "**Spread of each model input** before standardising (numbers in the table's units; one-hot and "
        "indicator columns are 0/1)"
        if dataset.preprocess is not None
        else "**Feature scales** (before z-scoring; the model sees z-scored features)"
    )
    views.plot(data_charts.feature_scales_figure(features), key="data_scales", filename="krr-feature-scales")
with st.expander(f"Model inputs: means and scales ({dataset.d} features)", expanded=dataset.d <= 12):
    st.dataframe(features, hide_index=True, width="stretch")
    views.download_csv(features, key="data_features_csv", filename="krr-features.csv", label="Download (CSV)")

# -- 4. effective dimension and suggestions ------------------------------------------------------
st.subheader("Effective dimension d_eff(λ)")
with st.columns([1, 3])[0]:
    rows = views.points_used(
        dataset,
        key="data_n",
        default=DEFAULT_ROWS,
        maximum=limits.DIAGNOSTICS_MAX_ROWS,
        help=f"Exact eigenvalues of K up to {limits.DENSE_SPECTRUM_MAX_N:,} points; a Nyström "
        "estimate (a lower bound) above.",
    )
X, data_key, caption = views.training_rows(dataset, settings.data, rows)
st.caption(caption)
kernel, kernel_params = views.kernel_key(settings)
curves = {}
try:
    curves[f"sidebar kernel ({kernel}, {', '.join(f'{k}={format_number(v)}' for k, v in kernel_params)})"] = (
        state.effective_dimension_curve(X, data_key, kernel, kernel_params, PENALTY_GRID)
    )
except ValueError as exc:
    st.error(f"d_eff cannot be computed with the sidebar's kernel: {plain(exc, limit=None)}")
suggestion = None
# A table's kernel and λ are generic defaults, a built-in set's are curated: only those are preferred.
catalogue_kernel = None if settings.data.is_csv else dict(dataset.suggested_kernel)
catalogue_penalty = None if settings.data.is_csv else dataset.suggested_penalty
if catalogue_kernel or (math.isfinite(median) and median > 0):
    suggested = suggested_kernel(median, catalogue_kernel)
    curve = state.effective_dimension_curve(X, data_key, *suggested, PENALTY_GRID)
    if suggested != (kernel, kernel_params):
        curves[f"suggested ({suggested[0]}, {', '.join(f'{k}={format_number(v)}' for k, v in suggested[1])})"] = curve
    suggestion = suggest_hyperparameters(
        len(X), median, curve, catalogue_kernel=catalogue_kernel, catalogue_penalty=catalogue_penalty
    )
marks = {"sidebar λ": settings.penalty}
if suggestion is not None:
    marks["suggested λ"] = suggestion["penalty"]
if curves:
    views.plot(data_charts.deff_figure(curves, marks=marks, n=len(X)), key="data_deff", filename="krr-deff")
    views.download_csv(
        pd.concat([c.assign(kernel=label) for label, c in curves.items()], ignore_index=True),
        key="data_deff_csv",
        filename="krr-deff.csv",
    )

st.subheader("Suggested σ, λ and M")
if suggestion is None:
    st.error("No σ can be suggested: all training points are identical (the median distance is zero).")
else:
    s1, s2, s3, s4, s5 = st.columns(5)
    s1.metric("Kernel", suggestion["kernel"].capitalize())
    s2.metric("σ", "—" if suggestion["sigma"] is None else readable(suggestion["sigma"], 3))
    s3.metric("λ", format_number(suggestion["penalty"]))
    s4.metric("M", f"{suggestion['M']:,}")
    s5.metric("d_eff at that λ", f"{suggestion['d_eff']:.1f}")
    for key in ("sigma", "lambda", "M"):
        st.markdown(f"- {suggestion['reasons'][key]}")
    if len(X) < dataset.n_train:
        st.caption(
            f"d_eff and M are for the n = {len(X):,} points used above; with all {dataset.n_train:,} "
            "training points d_eff(λ) is larger."
        )

    def _apply(values: dict) -> None:
        lo, hi = sidebar.LOG10_PENALTY_RANGE
        st.session_state["kernel"] = values["kernel"]
        for name, value in values["kernel_params"].items():  # sidebar keys are the parameter names
            st.session_state[name] = float(f"{value:.4g}") if name == "sigma" else value
        st.session_state["log10_penalty"] = min(hi, max(lo, round(math.log10(values["penalty"]) * 4) / 4))
        st.session_state["M"] = int(values["M"])

    st.button(
        "Use these in the sidebar",
        key="data_apply",
        on_click=_apply,
        args=(suggestion,),
        icon=":material/tune:",
        help="Sets the sidebar's kernel and its parameters, λ (rounded to the "
        "slider's quarter decades) and M to these values.",
    )

views.explanation("d_eff", "suggestions", "sigma", "lambda")
