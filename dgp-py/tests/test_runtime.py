"""Long fits behave as Python users expect: the GIL is released, Ctrl-C stops a fit after
the current step and keeps a usable model, progress callbacks and `verbose`, checkpoints
in a directory and resuming from them."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import dgp
from conftest import fast


def _data(n=2000, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)


def test_keyboard_interrupt_stops_after_the_current_step_and_keeps_the_model():
    X, y = _data()
    est = dgp.DeepGPRegressor(
        "svi", steps=1_000_000, num_inducing=20, predict_samples=5, convergence=None
    )
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, y)
    elapsed = time.perf_counter() - t0
    timer.join()
    assert elapsed < 10, elapsed
    s = est.fit_summary_
    assert s["interrupted"] and 0 < s["steps"] < 1_000_000
    mean = est.predict(X[:10])
    assert np.all(np.isfinite(mean))


def test_keyboard_interrupt_during_a_build_leaves_the_estimator_unfitted():
    """dgps' L-BFGS restarts end with the library's Interrupted error: nothing is kept."""
    X, y = _data(300, 3)
    est = dgp.DeepGPRegressor("dgps", steps=1000, num_inducing=30, restarts=50, max_iters=1000)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, y)
    timer.join()
    assert not hasattr(est, "model_")


def test_the_gil_is_released_while_rust_trains():
    X, y = _data()
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        before = counter[0]
        t0 = time.perf_counter()
        dgp.DeepGPRegressor("svi", steps=400, num_inducing=30, predict_samples=5).fit(X, y)
        elapsed = time.perf_counter() - t0
        during = counter[0] - before
    finally:
        stop.set()
        t.join()
    # A Python thread holding the GIL counts millions a second; had the fit held the GIL,
    # the thread would not have run at all.
    assert elapsed > 0.2, elapsed
    assert during > 100_000 * elapsed, (during, elapsed)


def test_callback_and_verbose(regression_data, capsys):
    X, y = regression_data
    calls = []
    est = dgp.DeepGPRegressor(
        "svi", **fast("svi", steps=50), callback=lambda s, t, o: calls.append((s, t, o)), verbose=True
    ).fit(X, y)
    assert calls and calls[-1][0] == calls[-1][1] == 50
    assert all(np.isfinite(o) for _, _, o in calls)
    assert "svi L=2: step 50/50" in capsys.readouterr().err
    assert est.fit_summary_["steps"] == 50

    class Boom(Exception):
        pass

    def boom(step, total, objective):
        raise Boom("from the callback")

    est = dgp.DeepGPRegressor("svi", **fast("svi", steps=100000), callback=boom)
    with pytest.raises(Boom, match="from the callback"):
        est.fit(X, y)
    assert est.fit_summary_["interrupted"] and est.fit_summary_["steps"] < 100000


def test_checkpoint_and_resume_give_the_uninterrupted_run(tmp_path, monkeypatch):
    import dgp._estimators

    monkeypatch.setattr(dgp._estimators, "_POLL_SECONDS", 0.0)
    X, y = _data(500, 3)
    kw = dict(steps=300, num_inducing=15, predict_samples=5, early_stopping=None)
    full = dgp.DeepGPRegressor("svi", **kw).fit(X, y)

    def stop_at_120(step, total, objective):
        if step >= 120:
            raise KeyboardInterrupt

    ckpt = tmp_path / "ckpt"
    first = dgp.DeepGPRegressor("svi", **kw, checkpoint_dir=ckpt, checkpoint_every=50, callback=stop_at_120)
    with pytest.raises(KeyboardInterrupt):
        first.fit(X, y)
    assert 120 <= first.fit_summary_["steps"] < 300
    assert (ckpt / "state.json").exists()
    seen = []
    resumed = dgp.DeepGPRegressor(
        "svi", **kw, checkpoint_dir=ckpt, checkpoint_every=50, callback=lambda s, t, o: seen.append(s)
    ).fit(X, y)
    # The resumed run starts after the step the first one stopped at.
    assert seen[0] == first.fit_summary_["steps"] + 1 and seen[-1] == 300
    np.testing.assert_array_equal(resumed.predict_mixture(X[:20])[1], full.predict_mixture(X[:20])[1])
    with pytest.raises(ValueError, match="cannot continue a run from a checkpoint"):
        dgp.DeepGPRegressor("sghmc", **fast("sghmc"), checkpoint_dir=tmp_path / "x").fit(X, y)


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    X, y = _data(300, 3)
    kw = dict(steps=40, num_inducing=8, predict_samples=3, early_stopping=None, convergence=None)
    ckpt = tmp_path / "ckpt"
    dgp.DeepGPRegressor("svi", **kw, checkpoint_dir=ckpt).fit(X, y)
    with pytest.raises(ValueError, match="data"):
        dgp.DeepGPRegressor("svi", **kw, checkpoint_dir=ckpt).fit(X, y + 1.0)
    with pytest.raises(ValueError, match="seed"):
        dgp.DeepGPRegressor("svi", **kw, checkpoint_dir=ckpt, random_state=4).fit(X, y)
