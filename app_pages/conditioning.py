"""Conditioning: how hard is the linear system each solver faces, and how it moves with λ and M.

Spectra and condition numbers κ = λ_max/λ_min of K + λnI (exact KRR), of the Nyström system H
(FALKON Eq. 8), of FALKON's preconditioned W = BᵀHB (Eq. 13), and of ASkotch's Nyström-
preconditioned blocks with their smoothness constants L_P (ASkotch Eq. 11, Alg. 3). The data,
kernel, λ and M come from the sidebar; everything is computed on a bounded, seeded subsample and
cached on plain parameters (:mod:`krr_app.parts.state`, computed by :mod:`krrcore.diagnostics`).
"""

import math

import streamlit as st

from krr_app import settings as limits
from krr_app.charts import figures as charts, images as image_charts
from krr_app.jobs.config import INT_KNOBS, format_number
from krr_app.parts import sidebar, state, views
from krr_app.text import plain
from krrcore.diagnostics import SYSTEMS
from krrcore.numbers import readable

#: λ grid of the "κ against λ" plot (the sidebar's λ is added to it).
PENALTY_GRID = tuple(10.0**e for e in range(-10, 1))
#: M grid of the "κ against M" plot (values above n are dropped; the sidebar's M is added).
M_GRID = (10, 20, 50, 100, 200, 400, 800)
DEFAULT_ROWS = 1000
#: Beyond this κ the smallest eigenvalue is float64 round-off relative to the largest.
ROUNDOFF_KAPPA = 1e13

settings = sidebar.current()
st.title("Conditioning")
st.caption(
    "How hard is the linear system each solver faces? Condition numbers κ = λ_max/λ_min of exact KRR's "
    "K + λnI, the Nyström system H, FALKON's preconditioned W and ASkotch's preconditioned blocks — "
    "change λ and M in the sidebar and watch them move."
)
dataset = views.require_data(settings)

col_rows, col_blocks, col_rank = st.columns(3)
with col_rows:
    rows = views.points_used(
        dataset,
        key="cond_n",
        default=DEFAULT_ROWS,
        centres=settings.M,
        maximum=limits.DIAGNOSTICS_MAX_ROWS,
        help=f"Spectra are exact up to {limits.DENSE_SPECTRUM_MAX_N:,} "
        f"points ({limits.DENSE_SPECTRUM_MAX_M:,} centres), "
        f"Lanczos estimates above; at most {limits.DIAGNOSTICS_MAX_ROWS:,} points.",
    )
with col_blocks:
    # The sidebar's ASkotch blocks share this key; empty there means "automatic": this page then uses 10.
    blocks = views.bound_number(
        "ASkotch blocks B",
        "blocks",
        INT_KNOBS["blocks"][2],
        min_value=1,
        max_value=100,
        step=1,
        help=INT_KNOBS["blocks"][3],
    )
    blocks = INT_KNOBS["blocks"][2] if blocks is None else int(blocks)
with col_rank:
    rank = int(
        views.bound_number(
            "Preconditioner rank r",
            "rank",
            INT_KNOBS["rank"][2],
            min_value=1,
            max_value=2000,
            step=5,
            help=INT_KNOBS["rank"][3],
        )
    )

X, data_key, caption = views.training_rows(dataset, settings.data, rows, seed=settings.solver_seed)
n = X.shape[0]
kernel, kernel_params = views.kernel_key(settings)
penalty, M, seed = settings.penalty, settings.M, settings.solver_seed
st.caption(caption)

# The first picture's computations start here, on the workers, the other sections' right after (in a
# new visitor's first page run: in its next run, views.first_picture); each section is drawn when its
# result is in (views.stream_in reruns the page as results arrive), the first within a second.
waiting = []
views.first_picture(
    lambda: state.kernel_spectrum(X, data_key, kernel, kernel_params),
    lambda: 1 <= M <= n and state.nystrom_systems(X, data_key, kernel, kernel_params, penalty, M, seed),
)
try:
    eigs_K = state.kernel_spectrum(X, data_key, kernel, kernel_params)
except ValueError as exc:
    st.error(f"The kernel matrix cannot be formed with these settings: {plain(exc, None)}")
    st.stop()
full = None if views.pending(eigs_K, waiting, draw=False) else state.full_system(eigs_K, n, penalty)

# -- Nyström / FALKON at the sidebar's λ and M (kept on bad input) ---------------------------------
nystrom_problem = None
if M < 1:
    nystrom_problem = f"M must be at least 1 (got {M})."
elif M > n:
    nystrom_problem = (
        f"M = {M:,} centres, but only n = {n:,} training points are used here: choose M ≤ n in the "
        "sidebar (or use more points)."
    )
nystrom_spectra = None
if nystrom_problem is None:
    try:
        nystrom_spectra = state.nystrom_systems(X, data_key, kernel, kernel_params, penalty, M, seed)
    except ValueError as exc:
        nystrom = views.last_valid("nystrom", f"The Nyström systems cannot be formed: {exc}")
    else:
        nystrom = (
            None
            if views.pending(nystrom_spectra, waiting, draw=False)
            else views.remember("nystrom", {"penalty": penalty, "M": M, "rows": n, "spectra": nystrom_spectra})
        )
else:
    nystrom = views.last_valid("nystrom", nystrom_problem)

# -- ASkotch's blocks ----------------------------------------------------------------------------
askotch_problem = None
block_size = n // blocks
if blocks > n // 2:
    askotch_problem = f"B = {blocks} blocks leave fewer than 2 points per block (n = {n:,}): lower B."
elif rank > block_size:
    if rank != INT_KNOBS["rank"][2]:  # the user's r; the default is capped quietly (the caption says so)
        st.info(
            f"Rank r = {rank} exceeds the block size ⌊n/B⌋ = {block_size}: using r = {block_size} "
            "(a rank-|b| Nyström approximation is K_bb itself, so the blocks are perfectly "
            "preconditioned). Lower r or B to see a real preconditioner."
        )
    rank = block_size

# -- headline numbers ----------------------------------------------------------------------------
# Drawn here, written after the spectra's picture below: a new visitor's browser lays out what it
# is sent in order, and the picture is the page's first.
headline = st.container()

spectra = {"K + λnI": {"eigenvalues": full["eigenvalues"], "method": eigs_K["method"]}} if full is not None else {}
if nystrom:
    for key in ("nystrom", "falkon"):
        spectra[SYSTEMS[key]] = nystrom["spectra"][key]
st.markdown("**Eigenvalue spectra** (each divided by its largest: the lowest point of a curve is 1/κ)")
views.pending(eigs_K, waiting)
views.pending(nystrom_spectra, waiting)
# The page's first picture: an image in a session's first page run (painted before plotly.js has
# loaded), the interactive chart from the next run on, which the rest of the page waits for too.
charts_due = views.after_first_picture("cond_charts")
if spectra:
    spectra_table = charts.spectra_frame(spectra)
    if charts_due:
        views.plot(charts.spectra_figure(spectra_table), key="cond_spectra", filename="krr-spectra")
    else:
        st.markdown(image_charts.spectra_image(spectra_table))
    views.download_csv(spectra_table, key="cond_spectra_csv", filename="krr-spectra.csv")

with headline:
    heading = f"At λ = {format_number(penalty)}" + (f", M = {nystrom['M']:,}" if nystrom else "")
    st.subheader(heading)
    cards = []
    if full is not None:
        cards.append(("κ(K + λnI)", full["condition_number"], eigs_K["method"], "Exact KRR's system (n × n)."))
    if nystrom:
        sp = nystrom["spectra"]
        cards += [
            (
                "κ(H) — Nyström",
                sp["nystrom"]["condition_number"],
                sp["nystrom"]["method"],
                "The Nyström system of FALKON Eq. 8 (M × M), no preconditioner.",
            ),
            (
                "κ(W) — FALKON",
                sp["falkon"]["condition_number"],
                sp["falkon"]["method"],
                "FALKON's preconditioned system BᵀHB (Eq. 13).",
            ),
        ]
    for col, (label, value, method, help_text) in zip(st.columns(len(cards)) if cards else (), cards):
        col.metric(label, views.format_kappa(value), help=help_text)
        col.caption(views.kappa_label(method))
    if any(value > ROUNDOFF_KAPPA for _, value, _, _ in cards):
        st.caption(
            "κ above ~10¹³ is at the limit of float64: λ_min is then round-off, so read such a κ as "
            '"numerically singular" rather than as an exact number.'
        )
    if nystrom and (nystrom["M"], nystrom["penalty"]) != (M, penalty):
        st.caption(
            f"(Nyström numbers from the last valid setting: λ = {format_number(nystrom['penalty'])}, "
            f"M = {nystrom['M']}.)"
        )

# -- how κ moves with λ and M (one system per grid point: bounded sizes) -------------------------
X_sweep, sweep_key, _ = views.training_rows(dataset, settings.data, min(rows, limits.SWEEP_MAX_ROWS), seed=seed)
n_sweep = X_sweep.shape[0]
sweep_note = f" The sweeps use n = {n_sweep:,} of the points to stay interactive." if n_sweep < n else ""
eigs_sweep = state.kernel_spectrum(X_sweep, sweep_key, kernel, kernel_params) if n_sweep < n else eigs_K
full_sweep = (
    None
    if views.pending(eigs_sweep, waiting, draw=False)
    else (state.full_system(eigs_sweep, n_sweep, penalty) if n_sweep < n else full)
)
use_blocks = askotch_problem is None
rank_sweep = min(rank, n_sweep // blocks) if use_blocks else None

st.subheader("How κ moves with λ")
sweep_M = min(M, limits.SWEEP_MAX_M, n_sweep) if nystrom_problem is None else None
if sweep_M is not None:
    capped = f" (capped at {limits.SWEEP_MAX_M} for speed)" if sweep_M < min(M, n_sweep) else ""
    st.caption(
        f"M = {sweep_M} uniform centres{capped}"
        + (f"; ASkotch: worst of B = {blocks} blocks at rank r = {rank_sweep}" if use_blocks else "")
        + ". Open markers are estimates (lower bounds)."
        + sweep_note
    )
    penalties = tuple(sorted(set(PENALTY_GRID) | {penalty}))
    try:
        by_penalty = state.condition_vs_penalty(
            X_sweep,
            sweep_key,
            kernel,
            kernel_params,
            sweep_M,
            seed,
            penalties,
            blocks if use_blocks else None,
            rank_sweep,
        )
    except ValueError as exc:
        st.error(f"The λ sweep failed: {plain(exc, None)}")
    else:
        if not views.pending(by_penalty, waiting) and charts_due:
            views.plot(
                charts.kappa_figure(by_penalty, "penalty", current=penalty),
                key="cond_lambda",
                filename="krr-kappa-vs-lambda",
            )
            views.download_csv(by_penalty, key="cond_lambda_csv", filename="krr-kappa-vs-lambda.csv")
else:
    st.info("Fix M in the sidebar to see the λ sweep.")

st.subheader("How κ moves with M")
current_M = {M} if nystrom_problem is None else set()
Ms = tuple(sorted({m for m in M_GRID if m <= n_sweep} | {m for m in current_M if m <= n_sweep}))
if Ms:
    st.caption(
        f"At λ = {format_number(penalty)}; K + λnI does not depend on M (dashed). Open markers are "
        "estimates (lower bounds)." + sweep_note
    )
    try:
        by_M = state.condition_vs_M(X_sweep, sweep_key, kernel, kernel_params, penalty, seed, Ms)
    except ValueError as exc:
        st.error(f"The M sweep failed: {plain(exc, None)}")
    else:
        if not views.pending(by_M, waiting) and not views.pending(eigs_sweep, waiting) and charts_due:
            fig = charts.kappa_figure(
                by_M,
                "M",
                current=M if nystrom_problem is None and M in Ms else None,
                reference=(
                    f"K + λnI: κ = {views.format_kappa(full_sweep['condition_number'])}",
                    full_sweep["condition_number"],
                ),
            )
            views.plot(fig, key="cond_M", filename="krr-kappa-vs-M")
            views.download_csv(by_M, key="cond_M_csv", filename="krr-kappa-vs-M.csv")

# -- ASkotch -------------------------------------------------------------------------------------
st.subheader("ASkotch: Nyström-preconditioned blocks")
result = None
if askotch_problem is None:
    try:
        result = state.askotch_blocks(X, data_key, kernel, kernel_params, penalty, blocks, rank, seed)
        result = None if views.pending(result, waiting) else views.remember("askotch", result)
    except ValueError as exc:
        result = views.last_valid("askotch", f"ASkotch's block preconditioners cannot be built: {exc}")
else:
    result = views.last_valid("askotch", askotch_problem)
if result is not None:
    table, whole = result
    worst = table.loc[table["kappa_preconditioned"].idxmax()]
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Block size |b|", f"{int(table['size'].min())}–{int(table['size'].max())}")
    c2.metric("κ(K_bb + λnI), worst block", views.format_kappa(float(table["kappa_block"].max())))
    c3.metric("κ preconditioned, worst block", views.format_kappa(float(worst["kappa_preconditioned"])))
    c4.metric(
        "L_P (get_L) / exact λ_max",
        f"{readable(worst['L_P (get_L)'], 3)} / {readable(worst['lambda_max_preconditioned'], 3)}",
        help="get_L's 10 steps of randomized powering against the exact top eigenvalue, worst block.",
    )
    st.caption(
        f"Spectra: {views.kappa_label(str(table['method'].iloc[0]))}; rank r = {rank} per block"
        + (
            f" (the default r = {INT_KNOBS['rank'][2]}, capped at the block size ⌊n/B⌋)"
            if rank < INT_KNOBS["rank"][2] == st.session_state.get("rank")
            else ""
        )
        + "."
    )
    if charts_due:
        views.plot(charts.askotch_figure(table), key="cond_askotch", filename="krr-askotch-blocks")
    shown = table.rename(
        columns={
            "kappa_block": "κ(K_bb + λnI)",
            "kappa_preconditioned": "κ preconditioned",
            "L_b": "L_b = λ₁(K_bb + λnI)",
            "lambda_max_preconditioned": "λ_max preconditioned",
            "rho": "ρ (damping)",
        }
    )
    st.dataframe(shown, hide_index=True, width="stretch")
    views.download_csv(table, key="cond_askotch_csv", filename="krr-askotch-blocks.csv")
    st.markdown(
        "**The whole partition.** What limits accelerated block descent is the system's strong "
        "convexity in the blocks' norm, not one block's κ (Theorem 5.1):"
    )
    w1, w2, w3, w4 = st.columns(4)
    w1.metric("λ_min(K + λnI)", readable(whole["lambda_min"], 3), help=f"λn = {readable(whole['lam_n'], 3)}")
    w2.metric(
        "μ_P, preconditioned",
        readable(whole["mu_P"], 3),
        help="λ_min of blkdiag(P_b + ρ_bI)^{-1/2}(K + λnI)blkdiag(P_b + ρ_bI)^{-1/2}: ASkotch's μ.",
    )
    w3.metric(
        "Σ√L_b / √λ_min, plain",
        readable(whole["factor_plain"], 3),
        help="NU_ACDM's iteration factor (ASkotch without preconditioning).",
    )
    w4.metric(
        "Σ√L_Pb / √μ_P, ASkotch",
        readable(whole["factor_preconditioned"], 3),
        help="ASkotch's iteration factor, Theorem 5.1.",
    )
    method = "exact" if whole["method"] == "exact" else f"estimates ({whole['method']}), from above"
    gain = whole["factor_plain"] / whole["factor_preconditioned"]
    verdict = (
        "a constant is not positive in floating point: the system is numerically singular at this λ"
        if not math.isfinite(gain)
        else f"the preconditioners cut the asymptotic iteration factor {readable(gain, 2)}×"
        if gain >= 1.25
        else f"the preconditioned factor is {readable(1 / gain, 2)}× the plain one: this fixed partition gains "
        "nothing asymptotically from its preconditioners (they can still speed the early iterations)"
        if gain <= 0.8
        else "the two factors are about equal: this fixed partition gains little "
        "asymptotically from its preconditioners (they can still speed the early iterations)"
    )
    st.caption(f"μ_P and λ_min: {method}. Here {verdict}; see the note below.")

views.explanation("condition", "systems", "askotch_blocks", "estimates", "lambda", "M")
views.stream_in(waiting)
