"""Data larger than memory: fits streamed from a row store or a Parquet file, and the
synthetic problem."""

import numpy as np
import pytest

import dgp
from conftest import fast


def test_synth_in_memory_and_on_disk(tmp_path):
    X, y = dgp.synth(500, seed=3)
    assert X.shape == (500, 9) and y.shape == (500,)
    X2, y2 = dgp.synth(500, seed=3)
    np.testing.assert_array_equal(X, X2)
    assert dgp.synth(500, seed=3, path=tmp_path / "s.rows") is None
    with pytest.raises(ValueError, match="0 rows"):
        dgp.synth(0)


def test_streamed_fit_from_a_row_store(tmp_path):
    store = tmp_path / "train.rows"
    dgp.synth(3000, seed=1, path=store)
    X, y = dgp.synth(3000, seed=1)
    kw = dict(steps=60, num_inducing=16, predict_samples=5, batch_size=256, early_stopping=None)
    m = dgp.DeepGPRegressor("svi", **kw).fit_path(store, init_rows=500)
    assert m.n_features_in_ == 9 and m.config_["common"]["tune"] is False
    assert m.fit_summary_["steps"] == 60
    mean, std = m.predict(X[:50], return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    assert m.score(X[:500], y[:500]) > -3
    with pytest.raises(ValueError, match="in memory only"):
        dgp.DeepGPRegressor("dgps", **fast("dgps")).fit_path(store)
    with pytest.raises(FileNotFoundError):
        dgp.DeepGPRegressor("svi", **kw).fit_path(tmp_path / "missing.rows")


def test_parquet_fit(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3))
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df["y"] = np.sin(X[:, 0])
    df["label"] = (X[:, 0] > 0).astype(np.int64)
    path = tmp_path / "d.parquet"
    df.to_parquet(path)
    kw = dict(steps=40, num_inducing=10, predict_samples=5, early_stopping=None)
    m = dgp.DeepGPRegressor("svi", **kw).fit_path(path, target="y", features=["a", "b", "c"], work_dir=tmp_path)
    assert m.n_features_in_ == 3
    assert np.all(np.isfinite(m.predict(X[:5])))
    c = dgp.DeepGPClassifier("svi", **kw).fit_path(path, target="label", features=["a", "b", "c"])
    assert list(c.classes_) == [0, 1] and c.predict_proba(X[:5]).shape == (5, 2)
    with pytest.raises(ValueError, match="target"):
        dgp.DeepGPRegressor("svi", **kw).fit_path(path)
    with pytest.raises(ValueError, match="nope"):
        dgp.DeepGPRegressor("svi", **kw).fit_path(path, target="nope")
    # No temporary row store is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.parquet"]
