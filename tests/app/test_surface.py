"""Pictures of a model on the plotting grid while a solver fits it (krr_app.jobs.surface.LiveSurface):
each is the current iterate's prediction, their cost stays within budget, and a fit keeps an
evenly spaced set of them for replay."""

from __future__ import annotations

import numpy as np
import pytest

from krrcore import datasets
from krrcore.kernels import GaussianKernel
from krrcore.solvers import Falkon, NystromCG
from krr_app.jobs import surface
from krr_app.jobs.surface import GRID_2D, LiveSurface, fit_surface, plotting_grid


@pytest.fixture(scope="module")
def moons():
    return datasets.load("moons", n=600)


def _all_x(data):
    return np.concatenate([data.X_train, data.X_test])


def test_each_picture_is_the_current_iterate_on_the_grid(moons):
    model = NystromCG(kernel=GaussianKernel(0.5), penalty=1e-4, M=60, maxiter=6)
    live = LiveSurface(_all_x(moons))
    _, points = plotting_grid(_all_x(moons))
    pictures = {}
    for record in model.iter_fit(moons.X_train, moons.y_train):
        frame = live.capture(model, record.iteration)
        assert frame.values.dtype == np.float32 and frame.values.shape == (GRID_2D**2, 1)
        np.testing.assert_allclose(frame.values[:, 0], model.predict(points), rtol=1e-4, atol=1e-5)
        pictures[record.iteration] = frame.values
    # The starting point: coef = 0, the model its offset (the labels' mean, fit_intercept).
    np.testing.assert_allclose(pictures[0], np.mean(moons.y_train), rtol=1e-6)
    assert not np.allclose(pictures[1], pictures[6], atol=1e-3)  # the picture moves as CG iterates
    final = live.finish(model, 6)
    np.testing.assert_allclose(final.values, fit_surface(_all_x(moons), model).values, rtol=1e-10, atol=1e-12)
    assert sorted(final.frames) == list(range(7))
    assert live.seconds > 0


def test_a_fit_keeps_evenly_spaced_pictures_and_its_last(moons):
    model = Falkon(kernel=GaussianKernel(0.5), penalty=1e-4, M=40, maxiter=20, tol=None)
    live = LiveSurface(_all_x(moons), keep=4)
    last = None
    for record in model.iter_fit(moons.X_train, moons.y_train):
        live.capture(model, record.iteration)
        last = record.iteration
    assert live.stride == 8 and sorted(live.frames) == [0, 8, 16]
    final = live.finish(model, last)
    assert sorted(final.frames) == [0, 8, 16, last]


def test_pictures_stay_within_their_share_of_the_wall_time(moons, monkeypatch):
    """With the clock stopped, the allowance alone bounds the pictures; as the fit's wall time
    grows, FRAME_SHARE of it pays for more."""
    clock = [100.0]
    monkeypatch.setattr(surface.time, "perf_counter", lambda: clock[0])
    live = LiveSurface(_all_x(moons), share=0.1, allowance=0.0)
    model = NystromCG(kernel=GaussianKernel(0.5), penalty=1e-4, M=60, maxiter=3)
    fit = model.iter_fit(moons.X_train, moons.y_train)
    next(fit)
    assert live.due(model)  # f = 0: a picture costs nothing
    live.capture(model, 0)
    next(fit)
    assert not live.due(model)  # the estimate of a kernel picture exceeds a zero budget
    live._predictions_of(model)._cost = 0.5  # a picture measured at 0.5 s
    clock[0] += 4.0
    assert not live.due(model)  # 10% of 4 s does not pay for it
    clock[0] += 1.0
    assert live.due(model)  # 10% of 5 s does


def test_the_kept_rows_one_off_evaluation_is_not_charged_to_later_pictures(monkeypatch):
    """A large problem's first picture evaluates the grid's kernel rows (1 s here) and keeps them;
    reading them costs 0.01 s. Charging that second to the rate budget held the picture at one
    iteration for 13 s of 0.2 s iterations; not charged, every iteration gets its picture, and
    the pictures' own cost stays within the allowance plus FRAME_SHARE of the wall time."""
    clock = [0.0]
    monkeypatch.setattr(surface.time, "perf_counter", lambda: clock[0])

    class Predictions:  # IteratePredictions' contract: cost(), a call, kept_now
        estimator, kept_now, calls = None, False, 0

        def cost(self):
            return 0.01 if self.calls else 0.3

        def __call__(self):
            clock[0] += 1.0 if not self.calls else 0.01
            self.kept_now, self.calls = not self.calls, self.calls + 1
            return np.zeros((4, 1))

    live = LiveSurface(np.zeros((10, 2)), share=0.05, allowance=0.2)
    predictions = Predictions()
    monkeypatch.setattr(live, "_predictions_of", lambda estimator: predictions)
    pictured = []
    for iteration in range(1, 26):
        clock[0] += 0.2  # the solver's iteration
        if live.due(None):
            pictured.append(live.capture(None, iteration).iteration)
    # The evaluation waits until the budget affords its estimate (0.2 s + 5% of 2 s), then it is
    # taken once, and from there every record has its picture: in step with the records.
    assert pictured[0] == 10 and live.setup_seconds == pytest.approx(1.0)
    assert pictured == list(range(10, 26))
    assert live.seconds - live.setup_seconds <= 0.2 + 0.05 * clock[0]


def test_only_one_and_two_dimensional_data_have_a_grid():
    with pytest.raises(ValueError, match="1 or 2 features, got 3"):
        plotting_grid(np.zeros((5, 3)))


def test_a_fit_is_replayed_from_the_pictures_it_kept():
    final = np.full((3, 1), 9.0)
    fit = surface.FitSurface(
        axes=(np.arange(3.0),),
        values=final,
        frames={0: np.zeros((3, 1)), 4: np.ones((3, 1)), 8: np.full((3, 1), 2.0), 10: final},
    )
    assert fit.at(0)[0] == 0 and fit.at(3)[0] == 0 and fit.at(4)[0] == 4 and fit.at(9)[0] == 8
    assert fit.at(5)[1][0, 0] == 1.0
    assert fit.at(10) == (10, final) and fit.at(50)[0] == 10
    bare = surface.FitSurface(axes=(np.arange(3.0),), values=final)
    assert bare.at(7) == (None, final)


# -- run_fit: the pictures and the steps of a run ---------------------------------------------------
def _spec(solver="falkon", maxiter=8, **params):
    from krr_app.jobs.spec import DataSpec, FitSpec

    params = {"penalty": 1e-4, "maxiter": maxiter, **({"M": 40} if solver == "falkon" else {}), **params}
    return FitSpec(
        "test", DataSpec("moons", n=400), solver, "gaussian", (("sigma", 0.5),), tuple(sorted(params.items()))
    )


def test_a_watched_run_pictures_its_iterates_outside_the_solver_time():
    from krr_app.jobs.worker import run_fit

    frames, records = [], []
    outcome = run_fit(_spec(), emit=lambda r: records.append((r.iteration, len(frames))), on_frame=frames.append)
    assert outcome.status == "done", outcome.message
    # A small problem is pictured at every iteration, each picture before its record goes out.
    assert [f.iteration for f in frames] == [r.iteration for r in outcome.trace] == list(range(9))
    assert records == [(k, k + 1) for k in range(9)]
    assert sorted(outcome.surface.frames) == list(range(9))
    np.testing.assert_allclose(outcome.surface.frames[8], outcome.surface.values, rtol=1e-5, atol=1e-6)
    timings = outcome.timings
    assert timings["frames"] == 9 and 0 < timings["frame_seconds"] < timings["wall_seconds"]
    unwatched = run_fit(_spec())
    assert unwatched.timings["frames"] == 0 and unwatched.surface.frames == {}
    np.testing.assert_allclose(unwatched.surface.values, outcome.surface.values, rtol=1e-6, atol=1e-9)


def test_a_stepped_run_goes_as_far_as_its_gate_allows():
    import threading
    import time

    from krr_app.jobs.worker import StepGate, run_fit

    limit = [1]
    frames, result = [], {}
    paused = threading.Event()
    gate = StepGate(lambda: limit[0], before_wait=paused.set, poll=0.01)
    thread = threading.Thread(
        target=lambda: result.update(
            outcome=run_fit(
                _spec(solver="askotch", blocks=4, rank=20).reporting_every_iteration(),
                on_frame=frames.append,
                steps=gate,
            )
        )
    )
    thread.start()

    def settle(expected):
        assert paused.wait(30)
        paused.clear()
        time.sleep(0.2)  # nothing more comes while paused
        assert [f.iteration for f in frames] == expected

    settle([0, 1])  # set-up, then one block step
    limit[0] = 2
    settle([0, 1, 2])
    limit[0] = None  # Run: on to the end
    thread.join(60)
    outcome = result["outcome"]
    assert outcome.status == "done" and [r.iteration for r in outcome.trace] == list(range(9))


def test_a_paused_run_stops_on_stop_and_after_its_longest_wait():
    import threading

    from krr_app.jobs.worker import StepGate, run_fit

    gate = StepGate(lambda: 1, poll=0.01, max_wait=0.3)
    outcome = run_fit(_spec(), on_frame=lambda f: None, steps=gate)
    assert outcome.status == "stopped" and len(outcome.trace) == 2
    assert outcome.message.startswith("no Step or Run for")
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()  # Stop pressed while it is paused
    outcome = run_fit(_spec(), steps=StepGate(lambda: 1, poll=0.01), stop_event=stop)
    assert outcome.status == "stopped" and len(outcome.trace) == 2 and outcome.message == "stopped by the user"
