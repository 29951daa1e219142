"""Predictions through Python equal the Rust library's for the same configuration and
seed, bit for bit: the reference is `examples/reference_fit.rs`, which fits with the
library directly (standardise, Backend::build, Model::fit, predict, unstandardise) from
the configuration the Python fit resolved (`config_`)."""

import json
import subprocess

import numpy as np
import pytest

import dgp
from conftest import fast, supports


def _csv(path, X, y, name):
    cols = [f"x{j}" for j in range(X.shape[1])] + [name]
    with open(path, "w") as f:
        f.write(",".join(cols) + "\n")
        for row, t in zip(X, y):
            f.write(",".join(repr(float(v)) for v in row) + "," + repr(float(t)) + "\n")


def _reference(binary, tmp_path, X, y, Xt, config, task):
    _csv(tmp_path / "train.csv", X, y, "y")
    _csv(tmp_path / "test.csv", Xt, np.zeros(len(Xt)), "y_unused")
    (tmp_path / "config.json").write_text(json.dumps(config))
    out = subprocess.run(
        [binary, str(tmp_path / "train.csv"), str(tmp_path / "test.csv"), str(tmp_path / "config.json"), task],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize("backend", dgp.backends())
def test_regression_equals_rust(backend, regression_data, reference_binary, tmp_path):
    X, y = regression_data
    m = dgp.DeepGPRegressor(backend, **fast(backend, random_state=3)).fit(X, y)
    Xt = X[:17] * 1.1
    ref = _reference(reference_binary, tmp_path, X, y, Xt, m.config_, "regression")
    w, mu, var = m.predict_mixture(Xt)
    assert ref["steps"] == m.fit_summary_["steps"]
    np.testing.assert_array_equal(w, np.array(ref["weights"]))
    np.testing.assert_array_equal(mu, np.array(ref["means"][0]))
    np.testing.assert_array_equal(var, np.array(ref["variances"][0]))


@pytest.mark.parametrize("backend", ["svi", "dspp", "star", "sghmc"])
def test_classification_equals_rust(backend, multiclass_data, reference_binary, tmp_path):
    X, y = multiclass_data
    assert supports(backend, "multiclass")
    m = dgp.DeepGPClassifier(backend, **fast(backend, random_state=5)).fit(X, y)
    idx = np.searchsorted(m.classes_, y)
    ref = _reference(reference_binary, tmp_path, X, idx, X[:23], m.config_, "classification")
    np.testing.assert_array_equal(m.predict_proba(X[:23]), np.array(ref["class_probs"]))
