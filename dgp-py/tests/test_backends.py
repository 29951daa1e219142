"""Every backend fits and predicts through both estimators where its capabilities allow;
a backend that cannot train a likelihood is refused with a message naming it."""

import numpy as np
import pytest

import dgp
from conftest import fast, supports

BACKENDS = dgp.backends()


def test_every_registered_backend_is_covered():
    from conftest import FAST

    assert sorted(BACKENDS) == sorted(FAST)
    assert len(BACKENDS) == 9


@pytest.mark.parametrize("backend", BACKENDS)
def test_regressor(backend, regression_data):
    X, y = regression_data
    m = dgp.DeepGPRegressor(backend, **fast(backend)).fit(X, y)
    mean, std = m.predict(X[:20], return_std=True)
    assert mean.shape == (20,) and std.shape == (20,)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    w, mu, var = m.predict_mixture(X[:20])
    assert mu.shape == (20, w.size) and var.shape == mu.shape
    assert abs(w.sum() - 1) < 1e-9
    # The mixture's moments are the prediction's.
    np.testing.assert_allclose(mu @ w, mean, rtol=1e-12, atol=1e-12)
    q = m.predict_quantiles(X[:20], q=(0.1, 0.5, 0.9))
    assert q.shape == (20, 3) and np.all(np.diff(q, axis=1) > 0)
    lo, hi = m.predict_interval(X[:20], level=0.8)
    np.testing.assert_allclose(lo, q[:, 0], rtol=1e-9)
    np.testing.assert_allclose(hi, q[:, 2], rtol=1e-9)
    assert np.isfinite(m.score(X, y))
    assert m.n_features_in_ == 3 and m.backend_ == backend
    s = m.fit_summary_
    assert s["steps"] >= 1 and not s["interrupted"]
    assert m.config_["fit"]["steps"] == fast(backend)["steps"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_binary_classifier(backend, classification_data):
    X, y = classification_data
    if not supports(backend, "bernoulli"):
        with pytest.raises(ValueError, match="does not train probit likelihoods"):
            dgp.DeepGPClassifier(backend, **fast(backend)).fit(X, y)
        return
    m = dgp.DeepGPClassifier(backend, **fast(backend)).fit(X, y)
    assert list(m.classes_) == ["neg", "pos"]
    p = m.predict_proba(X[:30])
    assert p.shape == (30, 2)
    np.testing.assert_allclose(p.sum(axis=1), 1, atol=1e-12)
    pred = m.predict(X[:30])
    assert pred.dtype == m.classes_.dtype
    np.testing.assert_array_equal(pred, m.classes_[np.argmax(p, axis=1)])
    np.testing.assert_allclose(m.predict_log_proba(X[:30]), np.log(p))
    # The score is the mean log probability of the true labels.
    idx = np.searchsorted(m.classes_, y)
    expect = np.mean(np.log(m.predict_proba(X)[np.arange(len(y)), idx]))
    assert m.score(X, y) == pytest.approx(expect, rel=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_multiclass_classifier(backend, multiclass_data):
    X, y = multiclass_data
    if not supports(backend, "multiclass"):
        with pytest.raises(ValueError, match="does not train robust-max likelihoods"):
            dgp.DeepGPClassifier(backend, **fast(backend)).fit(X, y)
        return
    m = dgp.DeepGPClassifier(backend, **fast(backend)).fit(X, y)
    assert list(m.classes_) == [7, 17, 27]
    p = m.predict_proba(X)
    assert p.shape == (200, 3)
    assert set(np.unique(m.predict(X))) <= {7, 17, 27}


def test_softmax_and_logit_likelihoods(classification_data, multiclass_data):
    X, y = classification_data
    m = dgp.DeepGPClassifier("svi", likelihood="logit", **fast("svi")).fit(X, y)
    assert m.config_["settings"]["likelihood"]["kind"] == "bernoulli_logit"
    X3, y3 = multiclass_data
    m = dgp.DeepGPClassifier("svi", likelihood="softmax", **fast("svi")).fit(X3, y3)
    assert m.config_["settings"]["likelihood"]["kind"] == "softmax"
    with pytest.raises(ValueError, match="binary"):
        dgp.DeepGPClassifier("svi", likelihood="probit", **fast("svi")).fit(X3, y3)


def test_multi_output_regression(regression_data):
    X, y = regression_data
    Y = np.column_stack([y, -2 * y + 1])
    m = dgp.DeepGPRegressor("svi", **fast("svi")).fit(X, Y)
    mean, std = m.predict(X[:5], return_std=True)
    assert mean.shape == (5, 2) and std.shape == (5, 2)
    w, mu, var = m.predict_mixture(X[:5])
    assert mu.shape == (5, w.size, 2)
    assert m.predict_quantiles(X[:5]).shape == (5, 2, 3)


def test_default_configuration_is_the_backends_run_default(regression_data):
    """With no options a fit resolves to what `dgp-bench run` trains (the backend's
    RunDefaults: steps, batch, learning rate, sample counts, early stopping)."""
    X, y = regression_data
    for backend in BACKENDS:
        d = dgp.backend_info(backend)["run_defaults"]
        est = dgp.DeepGPRegressor(backend)
        cfg = est._config_for(len(X))
        assert cfg["common"]["layers"] == d["layers"], backend
        assert cfg["fit"]["convergence"] == d["convergence"], backend
        assert cfg["common"]["num_inducing"] == d["num_inducing"], backend
        assert cfg["common"]["predict_samples"] == d["predict_samples"], backend
        assert cfg["fit"]["batch_size"] == min(d["batch_cap"], len(X)), backend
        rule = d["early_stopping"]
        assert cfg["fit"]["early_stopping"] == rule, backend
        steps = d["steps"]
        if d["epochs"]:
            steps = max(steps, d["epochs"] * 1)  # one batch holds all 200 rows
        if backend == "dgps":
            steps = min(steps, dgp.backend_info("dgps")["settings"]["max_iters"])
        assert cfg["fit"]["steps"] == steps, backend
        assert cfg["common"]["seed"] == 0 and cfg["fit"]["seed"] == 0
        assert cfg["predict"]["seed"] == 0x5EED


def test_a_preset_is_the_backends_named_configuration(regression_data):
    """`preset="paper"` starts from the paper's configuration: what the backend declares
    for it, and not the default's; an unknown preset is refused by name."""
    X, _ = regression_data
    for backend in ("star", "dspp", "nested"):
        names = [p["name"] for p in dgp.backend_info(backend)["presets"]]
        assert names[0] == "default" and "paper" in names, backend
        default = dgp.DeepGPRegressor(backend)._config_for(len(X))
        paper = dgp.DeepGPRegressor(backend, preset="paper")._config_for(len(X))
        assert paper["common"]["preset"] == "paper", backend
        assert (paper["settings"], paper["fit"], paper["common"]) != (
            default["settings"],
            default["fit"],
            default["common"],
        ), backend
    with pytest.raises(ValueError, match="nope"):
        dgp.DeepGPRegressor("svi", preset="nope")._config_for(len(X))
