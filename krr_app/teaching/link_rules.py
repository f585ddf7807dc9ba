"""What a URL-bound widget accepts, and the decision on a value a link or a lesson gives it.

:func:`krr_app.teaching.links.rule_for` reads a widget's own arguments (options, ``min_value``,
``max_value``, integer or float) into a :class:`Rule`; :func:`decide` turns the raw URL text into a
:class:`Verdict`: the value used and, when it was refused or adjusted, why. Plain data in and out, no Streamlit, so the
rules of :mod:`krr_app.teaching.links` are testable alone.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from krr_app.jobs.config import format_number


# -- what a widget accepts ---------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """What a widget accepts, read from the arguments it is drawn with.

    ``kind`` is "number", "choice", "multi", "bool" or "text"; ``options`` are the option values
    and ``labels`` what the URL holds for them (the widget's ``format_func`` applied)."""

    kind: str
    default: object = None
    minimum: float | None = None
    maximum: float | None = None
    integer: bool = False
    clearable: bool = False
    options: tuple = ()
    labels: tuple[str, ...] = ()
    keys_in_url: bool = False  # the URL writes an option as its key, not its label

    def _url_label(self, option) -> str:
        return str(option) if self.keys_in_url else self.labels[self.options.index(option)]

    def url_text(self, value) -> str | list[str] | None:
        """How the URL writes ``value`` (None for the default: bound widgets leave it out)."""
        if value == self.default:
            return None
        if self.kind == "choice":
            return self._url_label(value)
        if self.kind == "multi":
            return [self._url_label(v) for v in value]
        if self.kind == "bool":
            return "true" if value else "false"
        if self.kind == "number" and value is None:
            return ""
        if self.kind == "number" and isinstance(value, float):
            # Whole numbers as integers up to 1e15 (2.0 → "2"), larger ones as "1e+300", not 301 digits.
            return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
        return str(value)

    def same(self, raw: list[str], value) -> bool:
        """Whether the URL's ``raw`` text already says ``value`` (a number may be written any way
        Python reads it: "1e300", "1E+300" and the 301-digit integer are one value)."""
        wanted = self.url_text(value)
        if (wanted if isinstance(wanted, list) else [wanted]) == raw:
            return True
        if self.kind != "number" or len(raw) != 1 or value is None:
            return False
        try:
            return float(raw[0]) == value
        except ValueError:
            return False

    def shown(self, value) -> str:
        """``value`` as a message shows it."""
        if self.kind == "choice":
            return self.labels[self.options.index(value)]
        if self.kind == "multi":
            return ", ".join(self.labels[self.options.index(v)] for v in value) or "none"
        if self.kind == "bool":
            return "on" if value else "off"
        if value is None:
            return "automatic (empty)"
        return f"{value:,}" if isinstance(value, int) else format_number(value)


def is_whole_number(value) -> bool:
    """An int that is not a bool (True is 1 to Python, not a count to a widget)."""
    return isinstance(value, int) and not isinstance(value, bool)


# -- the decision --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """The value a widget takes from raw URL text, and why it differs from it (``reason``)."""

    value: object
    reason: str | None = None  # None: taken as given

    @property
    def noted(self) -> bool:
        """True when the value was refused or adjusted (the user must be told)."""
        return self.reason is not None


def decide(raw: list[str], rule: Rule) -> Verdict:
    """The value to use for the raw URL values ``raw`` (repeated parameters: the last one)."""
    verdict = _decide_one(raw[-1] if raw else "", rule) if rule.kind != "multi" else _decide_multi(raw, rule)
    if len(raw) > 1 and rule.kind != "multi":
        if verdict.noted:
            return Verdict(verdict.value, f"repeats the parameter; the last value {verdict.reason}")
        return Verdict(verdict.value, f"repeats the parameter — using the last value, {rule.shown(verdict.value)}")
    return verdict


def _default(rule: Rule, reason: str) -> Verdict:
    return Verdict(rule.default, f"{reason} — using the default, {rule.shown(rule.default)}")


#: The largest whole number a browser's number box (a JavaScript double) holds exactly: a link's
#: 99999999999999999999999 would otherwise reach the widget as something else (0) without a word.
MAX_WHOLE_NUMBER = 2**53 - 1


def _decide_one(text: str, rule: Rule) -> Verdict:
    text = text.strip()
    if rule.kind == "choice":
        for option, label in zip(rule.options, rule.labels):
            if text in (str(option), label):
                return Verdict(option, _label_read(rule, text, option))
        shown = ", ".join(str(o) for o in rule.options[:12]) + (", …" if len(rule.options) > 12 else "")
        return _default(rule, f"is not one of the choices ({shown})")
    if rule.kind == "bool":
        if text.lower() in ("true", "false"):
            return Verdict(text.lower() == "true")
        return _default(rule, "is neither true nor false")
    if rule.kind == "text":
        return Verdict(text)
    if text == "":
        return Verdict(None) if rule.clearable else _default(rule, "is empty")
    try:
        number = float(text)
    except ValueError:
        return _default(rule, "is not a number")
    if not math.isfinite(number):
        return _default(rule, "is not a finite number")
    if rule.integer and not number.is_integer():
        return _default(rule, "is not a whole number")
    value = int(number) if rule.integer else number
    if rule.integer and re.fullmatch(r"[-+]?\d+", text):
        value = int(text)  # exactly: float() rounds whole numbers past 2**53
    if rule.minimum is not None and value < rule.minimum:
        return _default(rule, f"is below the minimum {rule.shown(rule.minimum)}")
    maximum = rule.maximum
    if rule.integer and (maximum is None or maximum > MAX_WHOLE_NUMBER):
        maximum = MAX_WHOLE_NUMBER  # the browser's number box holds no larger whole number
    if maximum is not None and value > maximum:
        top = int(maximum) if rule.integer else float(maximum)
        return Verdict(top, f"is above the maximum — using the largest allowed, {rule.shown(top)}")
    if rule.integer and rule.minimum is None and value < -MAX_WHOLE_NUMBER:
        return _default(rule, f"is below the minimum {rule.shown(-MAX_WHOLE_NUMBER)}")
    return Verdict(value)


def _label_read(rule: Rule, text: str, option) -> str | None:
    """Why a choice given by its label (a link written before links carried keys) is noted: the key
    it was read as, which the address bar now holds (None: given by its key, or keys not in use)."""
    if not rule.keys_in_url or option is None or text == str(option):
        return None
    return f"is a label: links write the key, {option} — read as that"


def _decide_multi(raw: list[str], rule: Rule) -> Verdict:
    by_text = {**{str(o): o for o in rule.options}, **dict(zip(rule.labels, rule.options))}
    values = [by_text[t.strip()] for t in raw if t.strip() in by_text]
    unknown = [t for t in raw if t.strip() not in by_text]
    repeated = len(values) != len(set(values))
    labels = [t.strip() for t in raw if _label_read(rule, t.strip(), by_text.get(t.strip()))]
    values = list(dict.fromkeys(values))
    if not unknown and not repeated and not labels:
        return Verdict(tuple(values))
    reasons = (
        ([f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not among the choices"] if unknown else [])
        + (["repeats a choice"] if repeated else [])
        + (
            [
                f"names {', '.join(labels)} by {'its label' if len(labels) == 1 else 'their labels'}: "
                "links write the keys, " + ", ".join(str(by_text[t]) for t in labels)
            ]
            if labels
            else []
        )
    )
    if not values:
        return _default(rule, " and ".join(reasons))
    return Verdict(tuple(values), f"{' and '.join(reasons)} — using {rule.shown(tuple(values))}")
