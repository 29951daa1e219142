"""scikit-learn conventions: the estimator checks, clone, Pipeline, GridSearchCV over a
backend setting, cross_val_score."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import dgp
from conftest import fast

# Checks that cannot apply, with the reason (scikit-learn 1.6+ `expected_failed_checks`).
MONTE_CARLO = (
    "predictions are Monte Carlo mixtures whose draws are made for the whole batch of "
    "rows predicted at once (one seed per call), so a row's prediction depends on the "
    "other rows in the call"
)
EXPECTED_FAILED = {
    "check_methods_subset_invariance": MONTE_CARLO,
    "check_methods_sample_order_invariance": MONTE_CARLO,
}


def _expected_failed(estimator):
    return EXPECTED_FAILED


@parametrize_with_checks(
    [
        dgp.DeepGPRegressor("svi", **fast("svi")),
        dgp.DeepGPClassifier("svi", **fast("svi")),
    ],
    expected_failed_checks=_expected_failed,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_clone_keeps_backend_settings():
    est = dgp.DeepGPRegressor("svi", steps=5, natgrad__gamma=0.1, kmeans_iters=3)
    c = clone(est)
    assert c.get_params() == est.get_params()
    assert c.get_params()["natgrad__gamma"] == 0.1
    c.set_params(kmeans_iters=7, steps=9)
    assert c.kmeans_iters if hasattr(c, "kmeans_iters") else True
    assert c.get_params()["kmeans_iters"] == 7 and c.steps == 9
    assert est.get_params()["kmeans_iters"] == 3


def test_grid_search_over_a_backend_setting(regression_data):
    X, y = regression_data
    grid = GridSearchCV(
        dgp.DeepGPRegressor("svi", **fast("svi")),
        {"kmeans_iters": [1, 5], "num_inducing": [5, 10]},
        cv=2,
    )
    grid.fit(X, y)
    assert set(grid.best_params_) == {"kmeans_iters", "num_inducing"}
    assert grid.best_estimator_.config_["settings"]["kmeans_iters"] == grid.best_params_["kmeans_iters"]
    assert np.isfinite(grid.best_score_)
    # The default score is the mean test log predictive density.
    m = grid.best_estimator_
    assert m.score(X, y) == pytest.approx(grid.score(X, y))


def test_pipeline_and_cross_val_score(regression_data, classification_data):
    X, y = regression_data
    pipe = make_pipeline(StandardScaler(), dgp.DeepGPRegressor("svi", **fast("svi")))
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores))
    Xc, yc = classification_data
    acc = cross_val_score(dgp.DeepGPClassifier("svi", **fast("svi")), Xc, yc, cv=3, scoring="accuracy")
    assert np.all(acc > 0.6)


def test_pandas_and_float32_and_array_like(regression_data, classification_data):
    pd = pytest.importorskip("pandas")
    X, y = regression_data
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    m = dgp.DeepGPRegressor("svi", **fast("svi")).fit(df, pd.Series(y))
    assert list(m.feature_names_in_) == ["a", "b", "c"]
    np.testing.assert_array_equal(m.predict(df), m.predict(X))
    # float32 and objects with __array__ give the same fit as the float64 values.
    X32 = X.astype(np.float32)
    a = dgp.DeepGPRegressor("svi", **fast("svi")).fit(X32, y).predict(X32)
    b = dgp.DeepGPRegressor("svi", **fast("svi")).fit(X32.astype(np.float64), y).predict(X32.astype(np.float64))
    np.testing.assert_array_equal(a, b)

    class Wrapped:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return np.asarray(self.a, dtype=dtype)

    c = dgp.DeepGPRegressor("svi", **fast("svi")).fit(Wrapped(X), y).predict(Wrapped(X))
    np.testing.assert_array_equal(c, m.predict(X))
    # Fortran-ordered input reads the same numbers.
    d = dgp.DeepGPRegressor("svi", **fast("svi")).fit(np.asfortranarray(X), y).predict(X)
    np.testing.assert_array_equal(d, m.predict(X))
    # Labels of several types.
    Xc, yc = classification_data
    for labels in (yc, (yc == "pos").astype(int), np.where(yc == "pos", 3.0, -1.0), pd.Categorical(yc)):
        clf = dgp.DeepGPClassifier("svi", **fast("svi")).fit(Xc, labels)
        assert set(clf.predict(Xc)) <= set(np.asarray(labels))
