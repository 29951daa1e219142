"""Deep Gaussian processes from Python: every backend of the Rust library as a
scikit-learn estimator.

>>> import dgp
>>> dgp.backends()                     # the registered backends
>>> m = dgp.DeepGPRegressor("svi", layers=2).fit(X, y)
>>> mean, std = m.predict(X_test, return_std=True)

See ``DeepGPRegressor``, ``DeepGPClassifier``, ``load``, ``synth``.
"""

import json as _json
from importlib.metadata import PackageNotFoundError as _NotFound
from importlib.metadata import version as _version

from . import _dgp
from ._estimators import DeepGPClassifier, DeepGPRegressor, load

try:
    __version__ = _version("dgp")
except _NotFound:  # pragma: no cover - run from a source tree without installing
    __version__ = "0+unknown"

__all__ = [
    "DeepGPRegressor",
    "DeepGPClassifier",
    "load",
    "backends",
    "backend_info",
    "synth",
]


def backends():
    """The registered backends' names, in the order the benchmark lists them."""
    return list(_dgp.backend_names())


def backend_info(name):
    """What backend ``name`` is: ``description``, ``capabilities`` (training kind,
    likelihoods, streaming, ...), ``settings`` (each setting a keyword argument may give,
    with its default) and ``run_defaults`` (what a fit with default parameters trains).
    Raises ``ValueError`` for an unknown backend."""
    return _json.loads(_dgp.backend_info(name))


def synth(n, seed=0, path=None):
    """The library's synthetic regression problem (``dgp-bench synth``): 9 inputs, one
    heteroscedastic target with a known Bayes-optimal NLL.

    Returns ``(X, y)`` of shapes (n, 9) and (n,); with ``path``, writes the rows as a row
    store there instead (any size, in bounded memory; fit it with ``fit_path``) and
    returns ``None``."""
    out = _dgp.synth(int(n), int(seed), None if path is None else str(path))
    if out is None:
        return None
    X, y = out
    return X, y[:, 0]
