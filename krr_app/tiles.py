"""The metric tiles' style: a tile's label and value wrap (and the value's type shrinks on narrow
windows) instead of being cut with "…".

Streamlit's ``st.metric`` draws its label and value on one line and truncates what does not fit;
a row of six tiles on a 1,000-pixel window leaves each about 110 pixels, too little for a number
with its unit ("22,670 salary"). The rule below is the one Streamlit itself applies when printing.
"""

from __future__ import annotations

import streamlit as st

TILE_CSS = """
[data-testid="stMetricValue"], [data-testid="stMetricValue"] *,
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] * {
  overflow: visible !important; text-overflow: clip !important; white-space: normal !important;
  overflow-wrap: break-word; min-width: 0; max-width: 100%;
}
[data-testid="stMetricValue"] { font-size: clamp(1.2rem, 1.9vw, 2.25rem) !important; line-height: 1.2; }
"""


def style() -> None:
    """Put the tiles' style on the page (every run of the script: each page is drawn afresh)."""
    st.html(f"<style>{TILE_CSS}</style>")
