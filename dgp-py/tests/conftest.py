"""Shared test configuration: small, fast settings of every backend (test settings
only — not a preset of the library) and small data sets."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import dgp

# Per backend: the layer count and keyword arguments of a fit that takes well under a
# second on 200 rows. `fc` without its mean-field warm start (1 500 Adam steps),
# `dgps` with one L-BFGS restart, `sghmc` with a short burn-in.
FAST = {
    "svi": dict(steps=30, num_inducing=10, predict_samples=10),
    "nested": dict(steps=30, num_inducing=10, predict_samples=10),
    "dspp": dict(steps=30, num_inducing=10, tune=False),
    "ppgpr": dict(layers=1, steps=30, num_inducing=10, tune=False),
    "star": dict(steps=20, num_inducing=10, predict_samples=10, train_samples=1),
    "mf": dict(steps=20, num_inducing=10, predict_samples=10, train_samples=1),
    "fc": dict(steps=10, num_inducing=8, predict_samples=10, train_samples=1, warm_start=None),
    "dgps": dict(steps=20, num_inducing=10, predict_samples=10, restarts=1, max_iters=20),
    "sghmc": dict(
        steps=60,
        num_inducing=10,
        predict_samples=10,
        sampler__burn_in=20,
        sampler__window=10,
        sampler__kept=5,
        sampler__thinning=2,
    ),
}

REPO = pathlib.Path(__file__).resolve().parents[2]


def fast(backend, **extra):
    """Keyword arguments of a fast fit of ``backend`` (``layers`` included)."""
    kw = dict(FAST[backend])
    kw.setdefault("layers", 2)
    kw.update(extra)
    return kw


def supports(backend, family):
    return family in dgp.backend_info(backend)["capabilities"]["likelihoods"]


@pytest.fixture(scope="session")
def regression_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=200)
    return X, y


@pytest.fixture(scope="session")
def classification_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "pos", "neg")
    return X, y


@pytest.fixture(scope="session")
def multiclass_data():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3))
    y = np.digitize(X[:, 0], [-0.5, 0.5]) * 10 + 7  # labels 7, 17, 27
    return X, y


@pytest.fixture(scope="session")
def reference_binary():
    """The Rust reference fit (`dgp-py/examples/reference_fit.rs`), built if missing."""
    path = os.environ.get("DGP_REFERENCE_FIT")
    if path:
        return path
    exe = REPO / "target" / "release" / "examples" / "reference_fit"
    subprocess.run(
        ["cargo", "build", "--release", "-p", "dgp-py", "--example", "reference_fit"],
        cwd=REPO,
        check=True,
    )
    return str(exe)
