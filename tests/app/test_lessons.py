"""Lessons as data: every lesson file parses, and walking it with Next sets each step's settings
and ends in a completed run (Explore, Compare) or a drawn diagnostic page; the file format's
errors are named; a lesson link sets its experiment, a link's own values win, Back and Leave work.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import settle, wait_for_runs

from krr_app.teaching import lessons
from krr_app.teaching.lessons import LessonError, parse
from krr_app.text import shown_as

CATALOG, ERRORS = lessons.catalog()
#: Keys of the widgets a page draws itself (every other setting is a sidebar control).
PAGE_KEYS = {
    "explore": {"auto_run", "x_axis", "uncertainty"},
    "compare": {"cmp_mode", "cmp_solvers", "sweep_param", "sweep_values", "cmp_iteration"},
    "conditioning": {"cond_n", "blocks", "rank"},
    "leverage": {"lev_n", "lev_method", "lev_log10_penalty", "lev_q2"},
    "dataset": {"data_n"},
    "tune": {"tune_objective", "tune_ard", "tune_steps"},
}
ALL_PAGE_KEYS = set().union(*PAGE_KEYS.values())
#: The sidebar's solver controls, drawn on Explore and Compare only.
SOLVER_KEYS = {"solver", "maxiter", "eval_train", "blocks", "rank", "dtype", "solver_seed", "budget_mb"}
#: The ideas of the papers that each have a lesson (a word each lesson's `idea` must hold).
IDEAS = (
    "Nyström centres",
    "Preconditioning",
    "Leverage scores",
    "without storing K",
    "float32",
    "λ",
    "Tuning σ and λ",
    "Conjugate gradient",
    "Uncertainty",
)


def _markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def _expected(value):
    return list(value) if isinstance(value, list) else value


def _applied(at, lesson, step: int) -> None:
    """Every setting of the step's experiment that this page draws holds the lesson's value."""
    page = lesson.page_at(step)
    for key, value in lesson.settings_at(step).items():
        if key in ALL_PAGE_KEYS - PAGE_KEYS[page] - {"blocks", "rank"} or (
            key in SOLVER_KEYS - PAGE_KEYS[page] and page not in ("explore", "compare")
        ):
            continue  # a control this page does not draw (the step that shows it applies it again)
        got = at.session_state[key]
        assert (list(got) if isinstance(got, (list, tuple)) else got) == _expected(value), (
            f"{lesson.name} step {step}: {key} = {got!r}, the lesson sets {value!r}"
        )


def _completes(at, lesson, step: int):
    """The step's page ends in a finished run (Explore: by itself; Compare: after its Run button),
    or draws its charts (the diagnostic pages)."""
    page = lesson.page_at(step)
    if page == "explore":
        if lesson.settings_at(step).get("auto_run") is False:  # the step asks for Step, then Run
            at = at.button(key="step").click().run()
            stepped = at.session_state["explore_run"]
            assert stepped.stepped and stepped.wait(0.5) is False  # paused, not finished
            at = at.button(key="run").click().run()
        at = wait_for_runs(at, timeout=120)
        config = at.session_state["_krr_settings"].config()
        if lesson.settings_at(step).get("uncertainty"):  # the page's toggle: the posterior is part of the run
            config = replace(config, uncertainty=True)
        run = at.session_state["_krr_runs"].get(config)
        assert run is not None and run.status == "done", f"{lesson.name} step {step}: {run and run.message}"
    elif page == "compare":
        at = wait_for_runs(at.button(key="cmp_run").click().run(), timeout=120)
        runs = at.session_state["_krr_runs"].runs()
        assert runs and all(r.status == "done" for r in runs), [(r.label, r.status, r.message) for r in runs]
    elif page == "tune":
        at = wait_for_runs(at.button(key="tune_start").click().run(), timeout=120)
        run = at.session_state["tune_run"]
        assert run.status == "done", f"{lesson.name} step {step}: {run.message}"
    else:
        at = settle(at)  # the page's sections, computed on the workers, streamed in
        assert at.get("plotly_chart"), f"{lesson.name} step {step}: the {page} page drew no chart"
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def test_every_lesson_file_parses_and_each_idea_has_a_lesson():
    assert not ERRORS, ERRORS
    assert len(CATALOG) >= 6
    for idea in IDEAS:
        assert any(idea in lesson.idea for lesson in CATALOG.values()), f"no lesson about {idea}"


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_walking_a_lesson_applies_each_step_and_completes_a_run(app, name):
    lesson = CATALOG[name]
    at = app(lesson=name)
    for step in range(1, len(lesson.steps) + 1):
        if step > 1:
            at = at.button(key="lesson_next").click().run()
        assert not at.exception, at.exception
        assert at.query_params["lesson"] == name and at.query_params["step"] == str(step)
        assert f"step {step} of {len(lesson.steps)}" in _markdown(at)
        assert not [w.value for w in at.warning if "refused or adjusted" in w.value]
        _applied(at, lesson, step)
        at = _completes(at, lesson, step)
    assert at.button(key="lesson_next").disabled


def test_a_step_link_sets_the_experiment_of_that_step_and_the_link_s_own_values_win(app):
    lesson = CATALOG["nystrom-centres"]
    at = app(lesson="nystrom-centres", step=3, sigma=0.3)
    assert at.session_state["M"] == lesson.settings_at(3)["M"] == 45  # steps 1..3 add up
    assert at.session_state["dataset"] == "sine1d" and at.session_state["n"] == 2000
    assert at.session_state["sigma"] == 0.3  # the link's value, not the lesson's 0.2
    at = at.button(key="lesson_back").click().run()
    assert at.session_state["M"] == 20 and at.query_params["step"] == "2"


def test_a_lesson_hides_the_controls_it_does_not_use_and_leaving_brings_them_back(app):
    at = app(lesson="float32-float64")
    assert "Lesson: float32 or float64?" in _markdown(at)
    labels = {w.label for w in at.number_input} | {w.label for w in at.radio}
    assert "dtype" in labels  # the lesson sets dtype: its control is shown
    assert "Solver seed" not in labels and not any("Memory" in x for x in labels)
    at = at.button(key="leave_lesson").click().run()
    labels = {w.label for w in at.number_input} | {w.label for w in at.radio}
    assert {"dtype", "Solver seed"} <= labels and "lesson" not in at.query_params
    assert at.session_state["dtype"] == "float64"  # what the lesson set stays


def test_an_unknown_lesson_or_step_is_named(app):
    at = app(lesson="nope")
    text = "\n".join(shown_as(w.value) for w in at.warning)
    assert "“lesson=nope” is not a lesson here — the lessons are" in text and "nystrom-centres" in text
    assert "lesson" not in at.query_params
    at = app(lesson="nystrom-centres", step=9)
    text = "\n".join(shown_as(w.value) for w in at.warning)
    assert "“step=9” is above the maximum — using the largest allowed, 4 (lesson nystrom-centres has 4 steps)" in text
    assert at.query_params["step"] == "4" and at.session_state["M"] == 400


def test_start_a_lesson_from_the_sidebar(app):
    at = app(auto_run="false")
    assert not [b for b in at.sidebar.button if b.key.startswith("lesson_start_")]  # written once opened
    at.session_state[lessons.INDEX_KEY] = True
    at = at.run().button(key="lesson_start_lambda-overfitting").click().run()
    assert at.query_params["lesson"] == "lambda-overfitting" and at.session_state["eval_train"] is True
    assert at.session_state["log10_penalty"] == -1.0


def test_a_teacher_adds_a_lesson_with_a_file(app, tmp_path, monkeypatch):
    (tmp_path / "circles.md").write_text(
        '+++\ntitle = "Circles"\nidea = "A ring around a disc"\n+++\n'
        'Intro.\n\n## Circles\n+++\ndataset = "circles"\nM = 30\n+++\nLook.\n'
    )
    monkeypatch.setattr(lessons.settings, "LESSONS_DIR", tmp_path)
    at = wait_for_runs(app(lesson="circles"))
    assert at.session_state["dataset"] == "circles" and at.session_state["M"] == 30
    assert at.session_state["explore_run"].status == "done"


@pytest.mark.parametrize(
    "text, message",
    [
        ("no header", "a lesson starts with a +++ block holding title and idea"),
        ('+++\ntitle = "T"\n+++\n## S\n', "the first +++ block needs idea (text)"),
        ('+++\ntitle = "T"\nidea = "I"\n+++\nno steps', "a lesson needs at least one step"),
        (
            '+++\ntitle = "T"\nidea = "I"\n+++\n## S\n+++\nlamda = 3\n+++\n',
            "'lamda' is not a setting of this app (did you mean 'log10_penalty'?)",
        ),
        (
            '+++\ntitle = "T"\nidea = "I"\n+++\n## S\n+++\nlog_lambda = -3\n+++\n',
            "'log_lambda' is not a setting of this app (it is now called 'log10_penalty')",
        ),
        ('+++\ntitle = "T"\nidea = "I"\n+++\n## S\n+++\npage = "home"\n+++\n', "page = 'home' is not one of explore"),
        (
            '+++\ntitle = "T"\nidea = "I"\n+++\n## S\n+++\nM = \n+++\n',
            "step 1 (S): the settings block on line 6 is not valid TOML",
        ),
        ('+++\ntitle = "T"\nidea = "I"\n+++\n## S\n+++\nM = 3\n', "the +++ block opened on line 6 is never closed"),
    ],
)
def test_lesson_file_errors_name_the_file_step_and_setting(text, message):
    with pytest.raises(LessonError) as info:
        parse(text, "mine")
    assert str(info.value).startswith("lessons/mine.md") and message in str(info.value), str(info.value)


def test_every_named_picture_exists_and_its_step_draws_it(app):
    """A step's ``picture`` is a file of the app's folder, drawn with its caption below the step's text."""
    pictured = [(name, k) for name, lesson in CATALOG.items() for k, s in enumerate(lesson.steps, 1) if s.picture]
    assert ("tuning", 4) in pictured  # the lesson on tuning shows the app's own Tune page
    for name, k in pictured:
        step = CATALOG[name].steps[k - 1]
        assert step.picture_path().is_file(), f"{name} step {k}: {step.picture} is missing"
        at = app(lesson=name, step=k)
        assert not at.exception, at.exception
        drawn = [e.proto.imgs[0].caption for e in at.get("image")]
        assert step.caption in drawn, (name, k, drawn)


def test_a_missing_picture_is_named_and_a_bad_one_refused(monkeypatch, tmp_path):
    lesson = parse('+++\ntitle = "T"\nidea = "I"\n+++\n## S\n+++\npicture = "docs/none.png"\nM = 5\n+++\n', "mine")
    assert lesson.steps[0].picture == "docs/none.png" and lesson.steps[0].settings == (("M", 5),)
    assert not lesson.steps[0].picture_path().is_file()
    for block, message in (
        ('picture = "docs/notes.md"', "picture = 'docs/notes.md' must name an image file"),
        ('caption = "no picture"', "caption = 'no picture' must be text, and goes with a picture"),
    ):
        with pytest.raises(LessonError, match=message):
            parse(f'+++\ntitle = "T"\nidea = "I"\n+++\n## S\n+++\n{block}\n+++\n', "mine")


def test_steps_add_up_and_pages_carry_over():
    lesson = parse(
        '+++\ntitle = "T"\nidea = "I"\n+++\nIntro\n## A\n+++\npage = "compare"\nM = 5\nn = 100\n+++\n'
        "text A\n## B\n+++\nM = 6\n+++\ntext B\n## C\ntext C\n",
        "mine",
    )
    assert lesson.intro == "Intro" and [s.title for s in lesson.steps] == ["A", "B", "C"]
    assert lesson.settings_at(1) == {"M": 5, "n": 100} and lesson.settings_at(3) == {"M": 6, "n": 100}
    assert [lesson.page_at(k) for k in (1, 2, 3)] == ["compare"] * 3 and lesson.steps[2].text == "text C"
    assert lesson.keys == {"M", "n"}
