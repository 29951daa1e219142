"""Every bad input of the issue's list is a Python exception naming the problem, never a
crash."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import dgp
from conftest import fast


@pytest.fixture
def reg():
    return dgp.DeepGPRegressor("svi", **fast("svi"))


@pytest.fixture
def clf():
    return dgp.DeepGPClassifier("svi", **fast("svi"))


def test_nan_and_inf(reg, regression_data):
    X, y = regression_data
    for bad in (np.nan, np.inf, -np.inf):
        Xb = X.copy()
        Xb[3, 1] = bad
        with pytest.raises(ValueError, match="NaN|infinity"):
            reg.fit(Xb, y)
        yb = y.copy()
        yb[5] = bad
        with pytest.raises(ValueError, match="NaN|infinity"):
            reg.fit(X, yb)
    reg.fit(X, y)
    Xb = X[:4].copy()
    Xb[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        reg.predict(Xb)


def test_shapes(reg, regression_data):
    X, y = regression_data
    with pytest.raises(ValueError, match="Expected 2D array"):
        reg.fit(X[:, 0], y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        reg.fit(X, y[:-1])
    reg.fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features, but DeepGPRegressor is expecting 3"):
        reg.predict(X[:, :2])
    with pytest.raises(ValueError, match="Expected 2D array"):
        reg.predict(X[0])


def test_dtypes(reg, clf, regression_data, classification_data):
    X, y = regression_data
    with pytest.raises(ValueError, match="[Cc]omplex"):
        reg.fit(X + 1j, y)
    with pytest.raises(ValueError, match="could not convert|dtype"):
        reg.fit(np.array([["a", "b", "c"]] * len(X)), y)
    Xo = X.astype(object)
    Xo[0, 0] = "a"
    with pytest.raises(ValueError, match="could not convert|string"):
        reg.fit(Xo, y)
    with pytest.raises(ValueError, match="could not convert|string|numeric"):
        reg.fit(X, np.where(y > 0, "a", "b"))
    Xc, _ = classification_data
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        clf.fit(Xc, np.linspace(0, 1, len(Xc)))
    with pytest.raises(ValueError, match="at least 2 classes"):
        clf.fit(Xc, np.zeros(len(Xc), dtype=int))


def test_unknown_backend_and_settings(regression_data):
    X, y = regression_data
    with pytest.raises(ValueError, match="unknown backend 'nope'.*svi"):
        dgp.DeepGPRegressor("nope").fit(X, y)
    with pytest.raises(ValueError, match="unknown setting 'kmeans_itr'.*kmeans_iters"):
        dgp.DeepGPRegressor("svi", **fast("svi"), kmeans_itr=3).fit(X, y)
    with pytest.raises(ValueError, match="natgrad"):
        dgp.DeepGPRegressor("svi", **fast("svi"), natgrad__gama=0.1).fit(X, y)
    with pytest.raises(ValueError, match="kmeans_iters"):
        dgp.DeepGPRegressor("svi", **fast("svi"), kmeans_iters="many").fit(X, y)
    with pytest.raises(ValueError, match="num_inducing"):
        dgp.DeepGPRegressor("svi", steps=5, num_inducing=0).fit(X, y)
    with pytest.raises(ValueError, match="layers"):
        dgp.DeepGPRegressor("svi", layers=0, steps=5).fit(X, y)
    with pytest.raises(TypeError, match="layers"):
        dgp.DeepGPRegressor("svi", layers=2.5, steps=5).fit(X, y)
    with pytest.raises(TypeError, match="steps"):
        dgp.DeepGPRegressor("svi", steps="10").fit(X, y)
    with pytest.raises(ValueError, match="learning_rate"):
        dgp.DeepGPRegressor("svi", steps=5, learning_rate=-1.0).fit(X, y)
    with pytest.raises(TypeError, match="not a JSON value"):
        dgp.DeepGPRegressor("svi", steps=5, kmeans_iters=object()).fit(X, y)
    with pytest.raises(ValueError, match="does not support held-out early stopping"):
        dgp.DeepGPRegressor("dgps", steps=5, early_stopping={"patience": {}}).fit(X, y)
    with pytest.raises(ValueError, match="steps"):
        dgp.DeepGPRegressor("dgps", steps=50, max_iters=10).fit(X, y)
    with pytest.raises(ValueError, match="likelihood"):
        dgp.DeepGPClassifier("svi", steps=5, likelihood="cauchy").fit(X, y > 0)
    with pytest.raises(ValueError, match="likelihood"):
        dgp.DeepGPClassifier("svi", steps=5, likelihood__kind="softmax").fit(X, y > 0)
    with pytest.raises(ValueError, match="unknown backend"):
        dgp.backend_info("nope")


def test_predict_before_fit(reg, clf, regression_data, tmp_path):
    X, _ = regression_data
    for est in (reg, clf):
        for method in ("predict", "predict_mixture", "score", "save"):
            with pytest.raises(NotFittedError):
                if method == "score":
                    est.score(X, np.zeros(len(X)))
                elif method == "save":
                    est.save(tmp_path / "m.json")
                else:
                    getattr(est, method)(X)
    with pytest.raises(NotFittedError):
        clf.predict_proba(X)
    with pytest.raises(NotFittedError):
        reg.predict_quantiles(X)


def test_bad_prediction_arguments(reg, clf, regression_data, classification_data):
    X, y = regression_data
    reg.fit(X, y)
    with pytest.raises(ValueError, match="quantile levels must lie in"):
        reg.predict_quantiles(X, q=[0.5, 1.0])
    with pytest.raises(ValueError, match="level"):
        reg.predict_interval(X, level=1.5)
    with pytest.raises(ValueError, match="samples"):
        reg.predict(X, samples=0)
    Xc, yc = classification_data
    clf.fit(Xc, yc)
    with pytest.raises(ValueError, match="not in classes_"):
        clf.score(Xc, np.where(yc == "pos", "other", yc))


def test_constant_target_is_a_value_error(reg, regression_data):
    X, _ = regression_data
    # A constant target standardises with scale 1; the fit must not crash.
    reg.fit(X, np.full(len(X), 3.0))
    assert np.all(np.isfinite(reg.predict(X[:3])))
    with pytest.raises(ValueError, match="scale"):
        reg.fit(X, np.linspace(0, 1e-300, len(X)))
