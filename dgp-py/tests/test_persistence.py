"""save/load through the library's model file, and pickle: identical predictions."""

import json
import os
import pickle

import numpy as np
import pytest

import dgp
from conftest import fast, supports

BACKENDS = dgp.backends()


def _same_predictions(a, b, X):
    wa, ma, va = a.predict_mixture(X)
    wb, mb, vb = b.predict_mixture(X)
    np.testing.assert_array_equal(wa, wb)
    np.testing.assert_array_equal(ma, mb)
    np.testing.assert_array_equal(va, vb)


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_load_and_pickle_round_trips(backend, regression_data, tmp_path):
    X, y = regression_data
    m = dgp.DeepGPRegressor(backend, **fast(backend)).fit(X, y)
    path = tmp_path / "model.json"
    m.save(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "dgp-model" and doc["backend"] == backend
    loaded = dgp.load(path)
    assert type(loaded) is dgp.DeepGPRegressor and loaded.backend == backend
    _same_predictions(m, loaded, X[:25])
    assert loaded.get_params() == m.get_params()
    p = pickle.loads(pickle.dumps(m))
    _same_predictions(m, p, X[:25])
    np.testing.assert_array_equal(p.predict(X[:25], return_std=True), m.predict(X[:25], return_std=True))
    assert p.fit_summary_ == m.fit_summary_


def test_classifier_round_trip_keeps_labels(multiclass_data, tmp_path):
    X, y = multiclass_data
    m = dgp.DeepGPClassifier("svi", **fast("svi")).fit(X, y.astype(str))
    m.save(tmp_path / "clf")
    for other in (dgp.load(tmp_path / "clf"), pickle.loads(pickle.dumps(m))):
        assert type(other) is dgp.DeepGPClassifier
        np.testing.assert_array_equal(other.classes_, m.classes_)
        np.testing.assert_array_equal(other.predict_proba(X), m.predict_proba(X))
        np.testing.assert_array_equal(other.predict(X), m.predict(X))


def test_model_file_alone_loads_as_regressor(regression_data, tmp_path):
    X, y = regression_data
    m = dgp.DeepGPRegressor("nested", **fast("nested")).fit(X, y)
    # A model file without the estimator's metadata, as the Rust library writes one.
    (tmp_path / "m").write_text(m.model_.to_text())
    loaded = dgp.load(tmp_path / "m")
    # Without the estimator description the prediction defaults are the library's.
    np.testing.assert_array_equal(
        loaded.predict(X[:5], samples=m._predict_samples_, seed=m._predict_seed_), m.predict(X[:5])
    )


def test_bad_model_files(regression_data, tmp_path):
    X, y = regression_data
    m = dgp.DeepGPRegressor("svi", **fast("svi")).fit(X, y)
    m.save(tmp_path / "svi.json")
    with pytest.raises(ValueError, match="holds a 'svi' model, not a 'dspp' model"):
        dgp.load(tmp_path / "svi.json", backend="dspp")
    text = (tmp_path / "svi.json").read_text()
    (tmp_path / "edited.json").write_text(text.replace('"svi"', '"svi" ', 1).replace("0.", "1.", 1))
    with pytest.raises(ValueError, match="checksum|model file"):
        dgp.load(tmp_path / "edited.json")
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match="not a model file, or truncated"):
        dgp.load(tmp_path / "cut.json")
    with pytest.raises(FileNotFoundError):
        dgp.load(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="unknown backend"):
        dgp.load(tmp_path / "svi.json", backend="nope")


def test_save_writes_one_file_with_the_estimator_inside(regression_data, tmp_path):
    """The estimator's parameters travel in the model file's metadata (covered by its
    checksum): one file, and an edit of the metadata is refused."""
    X, y = regression_data
    m = dgp.DeepGPRegressor("svi", **fast("svi")).fit(X, y)
    m.save(tmp_path / "m.json")
    assert sorted(os.listdir(tmp_path)) == ["m.json"]
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["metadata"]["class"] == "DeepGPRegressor"
    text = (tmp_path / "m.json").read_text().replace('"DeepGPRegressor"', '"DeepGPClassifier"')
    (tmp_path / "edited.json").write_text(text)
    with pytest.raises(ValueError, match="checksum"):
        dgp.load(tmp_path / "edited.json")
