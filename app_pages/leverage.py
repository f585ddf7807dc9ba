"""Leverage scores: exact against approximate ridge leverage scores, the BLESS λ path, and where
uniform and BLESS centres fall in the data.

ℓ(i, λ) = (K(K + λnI)⁻¹)_ii (BLESS Eq. 1), its approximation by Eq. 3 from a sampler of
``krrcore.leverage.SAMPLERS`` (BLESS Alg. 1, BLESS-R Alg. 2, Recursive-RLS, uniform), R-ACC =
ℓ̃/ℓ (BLESS Sect. 4), d_eff(λ) and d_∞(λ) along the sampler's λ path, and M uniform against M
BLESS centres (FALKON Alg. 2) with FALKON's κ(W) for each. The data, kernel, FALKON's λ and M
come from the sidebar; the leverage scores have their own λ (BLESS's λ is typically ≫ FALKON's).
"""

import pandas as pd
import streamlit as st

from krr_app import settings as limits
from krr_app.charts import images as image_charts, leverage as leverage_charts
from krr_app.jobs.config import format_number
from krr_app.parts import sidebar, state, views
from krrcore.leverage import DEFAULT_Q2, SAMPLERS

#: Names shown for the samplers of krrcore.leverage.SAMPLERS (an unknown key shows as itself).
SAMPLER_LABELS = {
    "bless": "BLESS (Alg. 1)",
    "bless_r": "BLESS-R (Alg. 2)",
    "recursive_rls": "Recursive-RLS (Musco & Musco)",
    "uniform": "Uniform",
}
DEFAULT_ROWS = 500
LOG10_PENALTY_RANGE = (-8.0, 0.0)

settings = sidebar.current()
st.title("Leverage scores")
st.caption(
    "Which points matter at scale λ? Exact ridge leverage scores against BLESS's fast approximations, "
    "the effective dimension along BLESS's λ path, and where uniform and BLESS centres land."
)
dataset = views.require_data(settings)

col_rows, col_method, col_lambda, col_q2 = st.columns([2, 2, 3, 2])
with col_rows:
    rows = views.points_used(
        dataset,
        key="lev_n",
        default=DEFAULT_ROWS,
        centres=settings.M,
        maximum=limits.EXACT_LEVERAGE_MAX_N,
        help=f"Exact scores need one n×n eigendecomposition: at most {limits.EXACT_LEVERAGE_MAX_N:,} points here.",
    )
with col_method:
    method = views.bound_widget(
        st.selectbox,
        "Approximation",
        "lev_method",
        "bless",
        options=list(SAMPLERS),
        format_func=lambda key: SAMPLER_LABELS.get(key, key),
        help="The sampler whose approximate scores ℓ̃ (Eq. 3) are compared with the exact ones.",
    )
with col_lambda:
    log10_penalty = views.bound_widget(
        st.slider,
        "log₁₀ λ of the leverage scores",
        "lev_log10_penalty",
        -3.0,
        min_value=LOG10_PENALTY_RANGE[0],
        max_value=LOG10_PENALTY_RANGE[1],
        step=0.25,
        help="The λ in ℓ(i, λ). BLESS's λ is usually much larger than FALKON's: it only "
        "has to resolve the scale the M centres can represent.",
    )
with col_q2:
    q2 = float(
        views.bound_number(
            "Oversampling q₂",
            "lev_q2",
            float(DEFAULT_Q2),
            min_value=0.5,
            max_value=64.0,
            step=0.5,
            help="|J_h| ≈ q₂·d_eff(λ_h): larger is more accurate and slower.",
            disabled=method == "uniform",
        )
    )
leverage_penalty = 10.0**log10_penalty

X, data_key, caption = views.training_rows(dataset, settings.data, rows, seed=settings.solver_seed)
n = X.shape[0]
kernel, kernel_params = views.kernel_key(settings)
seed = settings.solver_seed
st.caption(caption)

# Both computations start here, on the workers, the first picture's first (a new visitor's first page
# run starts the other in its next run); each section is drawn when its result is in (views.stream_in
# reruns the page as results arrive).
waiting = []
M = settings.M
views.first_picture(
    lambda: state.leverage_report(X, data_key, kernel, kernel_params, leverage_penalty, method, q2, seed)
)
centers_input = None
if M <= n:
    try:
        centers_input = state.centers_comparison(
            X, data_key, kernel, kernel_params, settings.penalty, M, leverage_penalty, seed
        )
    except ValueError as exc:
        centers_input = exc

# The page's first picture, the scores' scatter, is an image in a session's first page run (painted
# before plotly.js has loaded); the interactive charts come from the next run on.
charts_due = views.after_first_picture("lev_charts")

# -- scores --------------------------------------------------------------------------------------
try:
    report = state.leverage_report(X, data_key, kernel, kernel_params, leverage_penalty, method, q2, seed)
    report = None if views.pending(report, waiting) else views.remember("leverage", report)
except ValueError as exc:
    report = views.last_valid("leverage", f"Leverage scores cannot be computed with these settings: {exc}")

if report is not None:
    label = SAMPLER_LABELS.get(report.method, report.method)
    st.subheader(f"{label} at λ = {format_number(report.final_penalty)}")
    r_acc = report.r_acc
    c1, c2, c3, c4, c5, c6 = st.columns(6)
    c1.metric("d_eff(λ) exact", f"{report.d_eff:.1f}", help="Σᵢ ℓ(i, λ) = Tr K(K + λnI)⁻¹ (BLESS Eq. 1).")
    c2.metric("d_∞(λ) exact", f"{report.d_inf:.1f}", help="n·maxᵢ ℓ(i, λ): what uniform sampling needs.")
    c3.metric("Dictionary |J_H|", f"{len(report.dictionary):,}")
    c4.metric("R-ACC mean", f"{r_acc['mean']:.2f}", help="ℓ̃(i, λ)/ℓ(i, λ) averaged over all points (BLESS Sect. 4).")
    c5.metric(
        "R-ACC 5%–95%",
        f"{r_acc['q05']:.2f}–{r_acc['q95']:.2f}",
        help="5th and 95th percentiles of ℓ̃/ℓ over the points (BLESS Fig. 1).",
    )
    c6.metric("Sampler time", f"{report.seconds:.2f} s")
    if report.note:
        st.caption(report.note)

    points = report.points
    col_hist, col_scatter = st.columns(2)
    with col_hist:
        st.markdown("**Distribution of the scores**")
        if charts_due:
            views.plot(leverage_charts.score_histogram(points), key="lev_hist", filename="krr-leverage-histogram")
    with col_scatter:
        st.markdown("**Approximate against exact**, with the R-ACC band")
        if charts_due:
            views.plot(leverage_charts.score_scatter(points, r_acc), key="lev_scatter", filename="krr-leverage-scatter")
        else:  # the page's first picture: an image, painted before plotly.js has loaded
            st.markdown(image_charts.scores_image(points, r_acc))
    views.download_csv(
        points, key="lev_points_csv", filename="krr-leverage-scores.csv", label="Download the scores (CSV)"
    )

    st.subheader("d_eff(λ) and d_∞(λ) along the λ path")
    path = report.path
    if charts_due:
        views.plot(leverage_charts.path_figure(path), key="lev_path", filename="krr-leverage-path")
    views.download_csv(path, key="lev_path_csv", filename="krr-leverage-path.csv", label="Download the path (CSV)")

# -- uniform vs BLESS centres --------------------------------------------------------------------
st.subheader(f"M = {settings.M:,} centres: uniform vs BLESS")
centers = None
if M > n:
    centers = views.last_valid(
        "centres",
        f"M = {M:,} centres, but only n = {n:,} training points are used here: "
        "choose M ≤ n in the sidebar (or use more points).",
    )
elif isinstance(centers_input, ValueError):
    centers = views.last_valid("centres", f"Centres cannot be selected with these settings: {centers_input}")
elif not views.pending(centers_input, waiting):
    centers = views.remember("centres", centers_input)
if centers is not None:
    st.caption(
        f"BLESS scores at λ = {format_number(leverage_penalty)}; κ(W) is FALKON's preconditioned condition "
        f"number at the sidebar's λ = {format_number(settings.penalty)}. Points are coloured by their "
        "exact leverage score" + (" (first two principal components)." if X.shape[1] > 2 else ".")
    )
    colour = report.points["exact"].to_numpy() if report is not None and len(report.points) == n else None
    frames = []
    for col, (name, info) in zip(st.columns(2), centers["sets"].items()):
        with col:
            if charts_due:
                fig = leverage_charts.centers_figure(
                    centers["coords"],
                    centers["axes"],
                    info["indices"],
                    colour=colour,
                    colour_title="log₁₀ ℓ",
                    weights=info["weights"],
                    title=name,
                )
                views.plot(fig, key=f"lev_centres_{name}", filename=f"krr-centres-{name.lower()}")
            m1, m2, m3 = st.columns(3)
            m1.metric(f"κ(W) — {name}", views.format_kappa(info["kappa_W"]), help=views.kappa_label(info["method"]))
            m2.metric("κ(H) unpreconditioned", views.format_kappa(info["kappa_H"]))
            m3.metric("Distinct centres", f"{info['distinct']:,}")
        coords = centers["coords"][info["indices"]]
        frames.append(
            pd.DataFrame(
                {
                    "selection": name,
                    "index": info["indices"],
                    "x": coords[:, 0],
                    "y": coords[:, 1],
                    "weight": info["weights"] if info["weights"] is not None else 1.0,
                }
            )
        )
    views.download_csv(
        pd.concat(frames, ignore_index=True),
        key="lev_centres_csv",
        filename="krr-centres.csv",
        label="Download the centres (CSV)",
    )

views.explanation("leverage", "bless", "r_acc", "centres", "d_eff")
views.stream_in(waiting)
