"""KRR Explorer — the Streamlit entry point and router.

Run with ``streamlit run app.py``. Streamlit imports this file once to find ``app``: the pages plus
the live chart's records endpoint (:mod:`krr_app.jobs.live_api`) on one Starlette server, whose start and
end (signals, the Dask cluster's close) are :mod:`krr_app.jobs.lifecycle`'s. Then, as
``__main__``, this script runs on every interaction: it declares the pages,
draws the shared sidebar (data, kernel, λ, M, solver — all bound to the URL; its data section
first, the rest when the page asks for the settings), then runs the selected page. Every page goes
through here, so every page sees the same sidebar.

Pages are listed explicitly with ``st.navigation`` (the current API) and live in ``app_pages/``,
deliberately not in ``pages/``: a ``pages/`` folder next to this file switches Streamlit to the
legacy multipage mode until ``st.navigation`` first runs — so the first request a fresh server
gets for ``/compare`` would run the page without this router (no sidebar), and AppTest, which
resets that mode before every run, would run pages without the router on every rerun.
"""

import streamlit as st

if __name__ != "__main__":  # imported by `streamlit run` to find the ASGI app
    from krr_app.jobs.lifecycle import lifespan
    from krr_app.jobs.live_api import ROUTES

    app = st.App(__file__, routes=ROUTES, lifespan=lifespan)
else:
    from pathlib import Path

    from krr_app import tiles
    from krr_app.jobs import executor
    from krr_app.parts import sidebar
    from krr_app.teaching import teacher

    # A file, served by the app: a ":material/...:" page icon makes the browser fetch the favicon
    # from fonts.gstatic.com, a request to an outside host on every page load.
    st.set_page_config(
        page_title="KRR Explorer",
        page_icon=str(Path(__file__).parent / "krr_app" / "icon.png"),
        layout="wide",
        initial_sidebar_state="collapsed" if teacher.presenting() else "auto",
    )
    executor.warm_up()  # the Dask workers start with the first visit, not with the first Run
    tiles.style()  # tiles wrap instead of cutting a number with "…"

    explore = st.Page("app_pages/explore.py", title="Explore", icon=":material/play_circle:", default=True)
    compare = st.Page("app_pages/compare.py", title="Compare", icon=":material/stacked_line_chart:")
    # Pages that show the solver controls in the sidebar (the others only need the problem).
    SOLVER_PAGES = {explore.url_path, compare.url_path}

    conditioning = st.Page("app_pages/conditioning.py", title="Conditioning", icon=":material/tune:")
    leverage = st.Page("app_pages/leverage.py", title="Leverage scores", icon=":material/bubble_chart:")
    dataset = st.Page("app_pages/dataset.py", title="Dataset", icon=":material/table_chart:")
    tune = st.Page("app_pages/tune.py", title="Tune", icon=":material/auto_fix_high:")

    page = st.navigation([explore, compare, tune, conditioning, leverage, dataset])
    # The name a lesson step uses for each page (krr_app.teaching.lessons.PAGES maps them back to the scripts).
    PAGE_NAMES = {
        explore.url_path: "explore",
        compare.url_path: "compare",
        conditioning.url_path: "conditioning",
        leverage.url_path: "leverage",
        dataset.url_path: "dataset",
        tune.url_path: "tune",
    }
    # The sidebar's data section now; its other controls when the page asks for the settings (Explore
    # draws the data's picture first), or after the page for one that never does.
    sidebar.render(page=PAGE_NAMES[page.url_path], solver_section=page.url_path in SOLVER_PAGES)
    page.run()
    sidebar.finish()
