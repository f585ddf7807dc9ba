"""Every value a shared link gives is checked: one message names each parameter refused or
adjusted with the value used instead, the widget holds that value and the URL says it.

The table below tries every parameter of every page with the bad values a typo or a hand-edited
link produces (not a number, not whole, out of range, not an option, repeated, empty, infinite).
Runs are switched off (``auto_run=false``) so each case is one script run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from krr_app.teaching import links
from krr_app.teaching.link_rules import Rule, decide
from krr_app.text import plain, shown_as

ROOT = Path(__file__).resolve().parents[2]
QUIET = {"auto_run": "false"}
PAGES = {
    "explore": None,
    "compare": "app_pages/compare.py",
    "conditioning": "app_pages/conditioning.py",
    "leverage": "app_pages/leverage.py",
    "dataset": "app_pages/dataset.py",
}

# (page, query, key, message, value used, what the URL holds for it afterwards: None = left out)
CASES = [
    # Data
    ("explore", {"dataset": "nope"}, "dataset", "is not one of the choices (sine1d, moons", "moons", None),
    (
        "explore",
        {"n": "10000000000"},
        "n",
        "is above the maximum — using the largest allowed, 200,000",
        200_000,
        "200000",
    ),
    ("explore", {"n": "abc"}, "n", "is not a number — using the default, 500", 500, None),
    ("explore", {"n": "2"}, "n", "is below the minimum 4 — using the default, 500", 500, None),
    ("explore", {"n": "1.5"}, "n", "is not a whole number — using the default, 500", 500, None),
    ("explore", {"n": ""}, "n", "is empty — using the default, 500", 500, None),
    ("explore", {"noise": "-1"}, "noise", "is below the minimum 0 — using the default, 0.2", 0.2, None),
    (
        "explore",
        {"dataset": "checkerboard", "tiles": "2.5"},
        "tiles",
        "is not a whole number — using the default, 4",
        4,
        None,
    ),
    ("explore", {"seed": "-1"}, "seed", "is below the minimum 0 — using the default, 0", 0, None),
    # Model
    ("explore", {"kernel": "rbf"}, "kernel", "is not one of the choices (gaussian, laplacian", "gaussian", None),
    ("explore", {"sigma": "0"}, "sigma", "is below the minimum 1e-6 — using the default, 0.5", 0.5, None),
    ("explore", {"sigma": "nan"}, "sigma", "is not a finite number — using the default, 0.5", 0.5, None),
    ("explore", {"sigma": "inf"}, "sigma", "is not a finite number — using the default, 0.5", 0.5, None),
    ("explore", {"kernel": "matern", "nu": "0.7"}, "nu", "is not one of the choices (0.5, 1.5, 2.5)", 1.5, None),
    (
        "explore",
        {"log10_penalty": "5"},
        "log10_penalty",
        "is above the maximum — using the largest allowed, 1",
        1.0,
        "1",
    ),
    (
        "explore",
        {"log10_penalty": "-20"},
        "log10_penalty",
        "is below the minimum -12 — using the default, -3",
        -3.0,
        None,
    ),
    ("explore", {"M": "-5"}, "M", "is below the minimum 1 — using the default, 100", 100, None),
    ("explore", {"M": "abc"}, "M", "is not a number — using the default, 100", 100, None),
    ("explore", {"M": "1.5"}, "M", "is not a whole number — using the default, 100", 100, None),
    ("explore", {"M": ["50", "60"]}, "M", "repeats the parameter — using the last value, 60", 60, "60"),
    ("explore", {"M": ["50", "-1"]}, "M", "repeats the parameter; the last value is below the minimum 1", 100, None),
    ("explore", {"M": "100000"}, "M", "is above the maximum — using the largest allowed, 10,000", 10_000, "10000"),
    # Solver
    ("explore", {"solver": "nope"}, "solver", "is not one of the choices (falkon, falkon_bless", "falkon", None),
    ("explore", {"maxiter": "0"}, "maxiter", "is below the minimum 1 — using the default, 20", 20, None),
    (
        "explore",
        {"maxiter": "200000"},
        "maxiter",
        "is above the maximum — using the largest allowed, 100,000",
        100_000,
        "100000",
    ),
    ("explore", {"eval_train": "yes"}, "eval_train", "is neither true nor false — using the default, off", False, None),
    ("explore", {"solver": "askotch", "blocks": "0"}, "blocks", "is below the minimum 1", None, None),
    ("explore", {"solver": "askotch", "blocks": "2.5"}, "blocks", "is not a whole number", None, None),
    (
        "explore",
        {"solver": "askotch", "rank": "0"},
        "rank",
        "is below the minimum 1 — using the default, 100",
        100,
        None,
    ),
    ("explore", {"dtype": "float16"}, "dtype", "is not one of the choices (float64, float32)", "float64", None),
    ("explore", {"solver_seed": "-3"}, "solver_seed", "is below the minimum 0 — using the default, 0", 0, None),
    ("explore", {"budget_mb": "-64"}, "budget_mb", "is below the minimum 0 — using the default, 0", 0, None),
    # Explore's own controls
    ("explore", {"auto_run": "maybe"}, "auto_run", "is neither true nor false — using the default, on", True, None),
    ("explore", {"x_axis": "time"}, "x_axis", "is not one of the choices (iteration, seconds)", "iteration", None),
    # Compare
    ("compare", {"cmp_mode": "all"}, "cmp_mode", "is not one of the choices (solvers, sweep)", "solvers", None),
    (
        "compare",
        {"cmp_solvers": ["falkon", "nope"]},
        "cmp_solvers",
        "nope is not among the choices — using FALKON",
        ["falkon"],
        "falkon",
    ),
    (
        "compare",
        {"cmp_solvers": ["exact", "exact"]},
        "cmp_solvers",
        "repeats a choice — using Exact KRR",
        ["exact"],
        "exact",
    ),
    (
        "compare",
        {"cmp_mode": "sweep", "sweep_param": "sigma"},
        "sweep_param",
        "is not one of the choices (M, penalty",
        "M",
        None,
    ),
    # Conditioning, Leverage scores, Dataset
    ("conditioning", {"cond_n": "abc"}, "cond_n", "is not a number — using the default, 400", 400, None),
    ("conditioning", {"blocks": "1000"}, "blocks", "is above the maximum — using the largest allowed, 100", 100, "100"),
    ("conditioning", {"rank": "-2"}, "rank", "is below the minimum 1 — using the default, 50", 50, None),
    ("leverage", {"lev_method": "exact"}, "lev_method", "is not one of the choices (bless, bless_r", "bless", None),
    (
        "leverage",
        {"lev_log10_penalty": "3"},
        "lev_log10_penalty",
        "is above the maximum — using the largest allowed, 0",
        0.0,
        "0",
    ),
    ("leverage", {"lev_q2": "0"}, "lev_q2", "is below the minimum 0.5 — using the default, 4", 4.0, None),
    ("dataset", {"data_n": "-1"}, "data_n", "is below the minimum 2 — using the default, 400", 400, None),
]


def _message(at) -> str:
    """The link message as a reader sees it (Markdown escapes removed)."""
    notes = [shown_as(w.value) for w in at.warning if "refused or adjusted" in w.value]
    assert len(notes) == 1, f"expected one message, got {notes}"
    return notes[0]


def _open(app, page: str, query: dict):
    at = app(**{**QUIET, **query})
    if PAGES[page] is not None:
        at = at.switch_page(PAGES[page]).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.mark.parametrize(
    "page, query, key, message, used, url",
    CASES,
    ids=[f"{page}:{'&'.join(f'{k}={v}' for k, v in q.items())}" for page, q, *_ in CASES],
)
def test_a_refused_or_adjusted_link_value_is_named_with_the_value_used(app, page, query, key, message, used, url):
    at = _open(app, page, query)
    given = query[key] if isinstance(query[key], str) else f"&{key}=".join(query[key])
    assert f"“{key}={given}” {message}" in _message(at)
    value = at.session_state[key]
    assert (list(value) if isinstance(value, (list, tuple)) else value) == used
    shown = at.query_params.get(key)
    assert (shown if not isinstance(shown, list) else shown[-1]) == url


def test_good_values_and_option_keys_pass_without_a_message(app):
    at = app(**QUIET, dataset="sine1d", n="300", M="1e2", log10_penalty="-6", solver="nystrom_direct", sigma="0.25")
    assert not [w for w in at.warning if "refused or adjusted" in w.value]
    assert at.session_state["dataset"] == "sine1d" and at.session_state["M"] == 100
    assert at.query_params["dataset"] == "sine1d"  # the data set's key stays in the URL
    assert at.session_state["sigma"] == 0.25 and at.session_state["log10_penalty"] == -6.0


def test_the_data_set_key_stays_in_the_url_and_a_label_is_still_read(app):
    at = app(**QUIET, dataset="csv")
    assert at.session_state["dataset"] == "csv" and at.query_params["dataset"] == "csv"
    at = app(**QUIET, dataset="Concentric circles (2-D)")  # a link copied when the URL held labels
    assert at.session_state["dataset"] == "circles" and at.query_params["dataset"] == "circles"
    assert "“dataset=Concentric circles (2-D)” is a label: links write the key, circles — read as that." in _message(at)
    at = at.selectbox(key="dataset").select("diabetes").run()
    assert at.query_params["dataset"] == "diabetes"
    at = at.selectbox(key="dataset").select("moons").run()  # the default leaves the URL
    assert "dataset" not in at.query_params


def test_a_huge_number_keeps_a_short_form_in_the_url(app):
    at = app(**QUIET, sigma="1e300")
    assert at.session_state["sigma"] == 1e300 and at.query_params["sigma"] == "1e300"
    assert not [w for w in at.warning if "refused or adjusted" in w.value]
    assert Rule("number", 0.5, 1e-6).url_text(1e300) == "1e+300"  # when the app writes it: not 301 digits
    assert Rule("number", 0.5).url_text(2.0) == "2" and Rule("number", 0.5).url_text(0.25) == "0.25"


def test_an_old_parameter_name_is_read_under_its_new_name_and_said(app):
    """λ keeps one name from the link to the solver (log10_penalty = log₁₀ penalty); a link written
    with the old name sets the same λ, says so, and the address bar holds the new name."""
    at = app(**QUIET, log_lambda="-2")
    assert at.session_state["log10_penalty"] == -2.0
    assert "“log_lambda=-2” is now called 'log10_penalty' — read as log10_penalty." in _message(at)
    assert "log_lambda" not in at.query_params and at.query_params["log10_penalty"] == "-2"
    at = app(**QUIET, log_lambda="-2", log10_penalty="-3", lamda="1")  # both: the new name wins, and that is said
    assert at.session_state["log10_penalty"] == -3.0
    assert "is now called 'log10_penalty', which the link also gives — that one is used" in _message(at)
    assert "“lamda=1” is not a parameter of this app" in _message(at)  # the other names are still read


def test_many_bad_values_give_one_message_and_it_can_be_dismissed(app):
    at = app(**QUIET, M="-5", dataset="nope", solver="nope", sigma="0", n="10000000000", maxiter="0", lamda="1e-3")
    text = _message(at)
    for part in (
        "“M=-5”",
        "“dataset=nope”",
        "“solver=nope”",
        "“sigma=0”",
        "“n=10000000000”",
        "“maxiter=0”",
        "“lamda=1e-3” is not a parameter of this app — ignored (did you mean 'log10_penalty'?)",
    ):
        assert part in text
    assert "lamda" not in at.query_params
    at = at.button(key="link_notes_ok").click().run()
    assert not [w for w in at.warning if "refused or adjusted" in w.value]


def test_solver_knobs_are_checked_before_run_like_m(app):
    at = app(**QUIET, solver="askotch", n="500", blocks="100000")
    assert at.session_state["blocks"] == 100_000  # a whole number in range: kept, and refused below
    errors = "\n".join(shown_as(e.value) for e in at.error)
    assert (
        "ASkotch cannot run with blocks = 100000, rank = 100 on n = 400 training points: "
        "blocks must be <= n (n_samples=400" in errors
    )
    assert at.button(key="run").disabled and not at.session_state["_krr_runs"].runs()
    at = app(**QUIET, solver="nystrom_pcg", n="100", rank="200")
    assert "rank must be <= n (n_samples=80 training points), got 200" in "\n".join(shown_as(e.value) for e in at.error)
    assert at.button(key="run").disabled


def test_every_bound_widget_is_checked_and_its_parameter_known(app):
    """Source check: only krr_app/teaching/links.py and the diagnostic pages' helper (which calls
    links.check first) bind widgets; runtime check: every key checked on every page is known."""
    binders = sorted(
        str(p.relative_to(ROOT))
        for p in [*ROOT.glob("app_pages/*.py"), *ROOT.glob("krr_app/**/*.py"), ROOT / "app.py"]
        if re.search(r"""bind["']?\s*[:=]\s*["']query-params""", p.read_text())
    )
    assert binders == ["krr_app/parts/inputs.py", "krr_app/teaching/links.py"], binders
    assert "links.check(widget, key, kwargs, default=default)" in (ROOT / "krr_app/parts/inputs.py").read_text()
    at = app(**QUIET, solver="askotch", kernel="matern")
    for page in PAGES.values():
        if page is not None:
            at = at.switch_page(page).run()
            assert not at.exception
    assert {"M", "cmp_solvers", "cond_n", "lev_method", "data_n", "blocks", "nu"} <= links.CHECKED_KEYS
    assert links.CHECKED_KEYS <= links.known_parameters(), links.CHECKED_KEYS - links.known_parameters()


@pytest.mark.parametrize(
    "raw, rule, value, reason",
    [
        (["7"], Rule("number", 5, 1, 10, integer=True), 7, None),
        (["1e3"], Rule("number", 5, 1, 10_000, integer=True), 1000, None),
        (["-0.5"], Rule("number", 1.0, -1.0, 1.0), -0.5, None),
        ([""], Rule("number", None, 1, None, integer=True, clearable=True), None, None),
        (["TRUE"], Rule("bool", False), True, None),
        (["b"], Rule("choice", "a", options=("a", "b"), labels=("A", "B")), "b", None),
        (["B"], Rule("choice", "a", options=("a", "b"), labels=("A", "B")), "b", None),
        (["x"], Rule("text", ""), "x", None),
        (["12"], Rule("number", 5, 1, 10, integer=True), 10, "is above the maximum — using the largest allowed, 10"),
    ],
)
def test_decide(raw, rule, value, reason):
    verdict = decide(raw, rule)
    assert verdict.value == value and verdict.reason == reason


#: Link keys and values that would be Markdown (a clickable link, an outside image, a directive)
#: if the message rendered them.
INJECTIONS = [
    {"M": "1`[Click here to log in](http://attacker.invalid/login)"},
    {"![px](http://attacker.invalid/pixel.png)": "1"},
    {"solver": "<img src=http://attacker.invalid/x.png>"},
    {"dataset": ":red[**urgent**] $x^2$ :material/warning:"},
]


@pytest.mark.parametrize("query", INJECTIONS, ids=["value-link", "key-image", "value-html", "value-directives"])
def test_link_keys_and_values_are_shown_as_text_not_markdown(app, query):
    at = _open(app, "explore", query)
    markdown = next(w.value for w in at.warning if "refused or adjusted" in w.value)
    ((key, value),) = query.items()
    assert f"“{key}={value}”" in shown_as(markdown)  # the reader sees exactly what the link held
    assert plain(f"{key}={value}") in markdown  # ... because every character is escaped
    # no link, image, HTML tag or directive is left unescaped in the Markdown
    assert not re.search(r"(?<!\\)(\]\(|!\[|<img|:red\[|:material/)", markdown), markdown


def test_a_long_link_value_is_cut_with_its_length_said(app):
    at = _open(app, "explore", {"sigma": "9" * 5000})
    text = _message(at)
    assert "… (5,006 characters)” is not a finite number" in text and "9" * 200 not in text  # "sigma=" + 5,000


@pytest.mark.parametrize(
    "query, key, message, used",
    [
        ({"seed": "99999999999999999999999"}, "seed", "is above the maximum — using the largest allowed", 2**53 - 1),
        (
            {"kernel": "polynomial", "degree": "1000"},
            "degree",
            "is above the maximum — using the largest allowed, 20",
            20,
        ),
    ],
)
def test_a_whole_number_past_what_the_page_holds_is_clipped_and_announced(app, query, key, message, used):
    at = _open(app, "explore", query)
    assert f"“{key}={query[key]}” {message}" in _message(at)
    assert at.session_state[key] == used
