"""The one way a number is written for a person to read: tiles, captions, tables, legends, hover
text, file headers.

:func:`readable` rounds to a chosen number of significant digits, groups thousands with commas,
and writes plain decimals from 10⁻³ up to 10⁹ (``22,670``, ``0.0125``, ``3.2``); only outside that
range does it switch to a short exponent (``1.2e-7``, ``3.4e12``). A unit, when given, follows
after a space (``22,670 Salary``). :data:`D3_FORMAT` is the nearest plotly (d3) format, for the
hover text and ticks plotly formats itself.
"""

from __future__ import annotations

import math

#: Plain decimals are written for magnitudes in [SMALLEST, LARGEST).
SMALLEST, LARGEST = 1e-3, 1e9

#: Significant digits unless asked otherwise.
DIGITS = 4

#: plotly's (d3's) format for the same rule inside [SMALLEST, LARGEST): significant digits, thousands
#: grouped, trailing zeros dropped, never an exponent.
D3_FORMAT = f",.{DIGITS}~r"


def readable(value, digits: int = DIGITS, unit: str = "", *, grouping: bool = True) -> str:
    """``value`` (an int, float or numpy number; None or NaN as "—") written for a person.
    ``grouping=False`` leaves out the thousands commas (for text that is read back as a number).

    >>> readable(22670.4), readable(0.012346), readable(1234567.0, 3), readable(2.5e-7), readable(7, unit="s")
    ('22,670', '0.01235', '1,230,000', '2.5e-7', '7 s')
    """
    text = _number(value, digits, grouping)
    return f"{text} {unit}" if unit and text != "—" else text


def _number(value, digits: int, grouping: bool) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu"):
        return f"{int(value):,}" if grouping else str(int(value))
    value = float(value)
    if math.isnan(value):
        return "—"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if value == 0:
        return "0"
    rounded = float(f"{value:.{digits}g}")
    if SMALLEST <= abs(rounded) < LARGEST:
        exponent = math.floor(math.log10(abs(rounded)))
        decimals = max(digits - 1 - exponent, 0)
        text = f"{rounded:{',' if grouping else ''}.{decimals}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return text
    mantissa, exponent = f"{value:.{max(digits - 1, 0)}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def readable_range(low, high, digits: int = DIGITS, unit: str = "") -> str:
    """``low–high`` with one unit: ``1,200–3,400 Salary``."""
    return readable(low, digits) + "–" + readable(high, digits, unit)
