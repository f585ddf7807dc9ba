"""The one rule for showing a string the user supplied (or one that may contain such a string):
as text, never as Markdown or HTML.

Streamlit renders the body of ``st.markdown``, ``st.warning``, ``st.error``, ``st.caption`` … as
Markdown with its own directives (``:red[…]``, ``:material/…:``, ``$…$`` for LaTeX). A link key, a
link value, a CSV header or cell, a file name, or a krrcore message that quotes one of them, could
otherwise turn into a clickable link or an image fetched from elsewhere. :func:`plain` escapes
every ASCII punctuation character (CommonMark allows a backslash before each of them, and then
shows the character itself) and shortens very long strings (:func:`chart_text` does the same for
plotly's labels, which read a few HTML tags). An invisible word joiner (:data:`JOINER`) inside
``://`` and ``www.`` and after ``@`` keeps GFM's autolink literals from making a bare URL or e-mail
address a link (Streamlit finds them in the text after the escapes were read). The app adds its
own formatting around the escaped text, never inside it. Code spans are not used for such strings: a backslash
does not escape inside them, so a backtick in the string would end the span.
"""

from __future__ import annotations

import html
import re

#: Characters shown of one user string before it is cut ("… (N characters)").
MAX_SHOWN = 120

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: U+2060 WORD JOINER: zero width, not shown, and no autolink literal runs across it.
JOINER = "\u2060"
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)", re.IGNORECASE)


def _one_line(value, limit: int | None) -> str:
    """``value`` as one line of text: control characters dropped, newlines as spaces, cut after
    ``limit`` characters with the full length said."""
    text = _CONTROL.sub("", str(value)).replace("\r", " ").replace("\n", " ")
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}… ({len(text):,} characters)"
    return text


def plain(value, limit: int | None = MAX_SHOWN) -> str:
    """``value`` as text that Streamlit's Markdown shows character for character.

    Longer than ``limit`` characters: cut, with the full length said. Newlines become spaces (a
    user string is one item of a message, not a paragraph of its own); other control characters
    are dropped.
    """
    return _PUNCTUATION.sub(r"\\\1", _AUTOLINK.sub(JOINER, _one_line(value, limit)))


def shown_as(markdown: str) -> str:
    """The text a reader sees for Markdown made of :func:`plain` pieces (backslash escapes
    and word joiners removed): what tests compare messages with."""
    return re.sub(r"\\(.)", r"\1", markdown.replace(JOINER, ""))


def quoted(value, limit: int | None = MAX_SHOWN) -> str:
    """:func:`plain` between typographic quotes, for naming a value inside a sentence."""
    return f"“{plain(value, limit)}”"


def chart_text(value, limit: int | None = MAX_SHOWN) -> str:
    """``value`` for a plotly title, tick label or legend entry: plotly draws a few HTML tags there
    (``<a href>`` becomes a link, ``<b>``, ``<br>``), so ``<``, ``>`` and ``&`` are written as HTML
    entities, which plotly shows as the characters themselves."""
    return html.escape(_one_line(value, limit), quote=False)
