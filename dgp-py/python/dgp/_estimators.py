"""The scikit-learn estimators of every deep-GP backend.

Everything numerical happens in the compiled module ``dgp._dgp`` (the Rust library):
standardisation, model construction, training, prediction, metrics and the model file.
This module validates and converts inputs, keeps scikit-learn's conventions (parameters,
fitted attributes, cloning, pickling) and maps class labels to indices.
"""

from __future__ import annotations

import json
import numbers
import os
import sys
import tempfile
import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _dgp

__all__ = ["DeepGPRegressor", "DeepGPClassifier", "load"]

# Seconds between two moments a fit takes the GIL back to run signal handlers and the
# progress callback (and after the last step).
_POLL_SECONDS = 0.1

# The parameters every estimator has, with their defaults (backend settings come on top).
_COMMON_DOC = """
    Parameters
    ----------
    backend : str, default="svi"
        A registered backend (``dgp.backends()``): ``svi``, ``nested``, ``dspp``,
        ``ppgpr``, ``star``, ``mf``, ``fc``, ``dgps``, ``sghmc``.
    layers : int or None
        Number of GP layers L (1 = the sparse-GP baseline); ``None``: the backend's
        default (2 for the deep backends, 1 for ``ppgpr``).
    preset : str or None
        The backend's named configuration the fit starts from (``"default"``, the good
        fast defaults ``dgp-bench run`` trains; ``"paper"``, the paper's own settings;
        ``dgp.backend_info(name)["presets"]``); every other parameter left at ``None``
        takes the preset's value.
    num_inducing, hidden_width, train_samples, predict_samples : int or None
        Inducing points per layer M, hidden-layer width, samples of the training
        objective, predictive mixture components. ``None``: the backend's default (the
        one ``dgp-bench run`` trains with; ``dgp.backend_info(name)["run_defaults"]``).
    steps : int or None
        Optimisation (or sampler) steps; ``None``: the backend's default for the number
        of training rows.
    batch_size : int or None
        Minibatch size cap; the batch is ``min(batch_size, n_samples)``.
    learning_rate : float or None
        Adam learning rate (ignored by backends that use none).
    convergence : "default" or None
        The preset's convergence stop (the run ends when the objective stops improving),
        or none (every step is taken).
    early_stopping : "default", None or dict
        Held-out early stopping: the backend's own rule (``"default"``), none, or a rule
        as the library's JSON (e.g. ``{"patience": {"fraction": 0.1, "every": 50,
        "patience": 10, "min_rows": 400, "rises": 0}}``).
    tune : bool, default=True
        Let backends that choose hyper-parameters on validation rows do so (dspp, ppgpr).
    random_state : int or None, default=0
        Seed of the initialisation, minibatch order and Monte Carlo noise (``None`` = 0);
        predictions use ``random_state + 0x5eed`` unless given a seed.
    verbose : bool, default=False
        Print a progress line to stderr while training.
    callback : callable or None
        ``callback(step, total, objective)``, called with the GIL held at most every
        0.1 s and after the last step; an exception from it stops the fit and is raised.
    checkpoint_dir : str or None
        Keep the training state in this directory (``state.json``, checksummed, the
        directory locked while the fit runs) every ``checkpoint_every`` steps, at the end
        and when stopped; a fit with a state there continues from it, bit for bit (a
        state of another run — other data, settings or seed — is refused, naming what
        differs).
    checkpoint_every : int, default=0
        Steps between checkpoints (0: the library's default, every 100 steps).
    **settings
        The backend's own settings (fields of its configuration, checked by the backend:
        an unknown key is an error listing the allowed ones). Nested fields are written
        with ``__``: ``natgrad__gamma=0.1`` is the setting ``natgrad.gamma``.
"""

def _json_value(key, value):
    """A setting's value as plain JSON data (NumPy scalars and arrays unwrapped)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _json_value(f"{key}.{k}", v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(key, v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"setting '{key}': {type(value).__name__} is not a JSON value")


def _settings_json(settings):
    """The backend settings as the library's nested JSON object (``a__b`` → ``a.b``)."""
    out = {}
    for key in sorted(settings):
        path = key.split("__")
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"setting '{key}': '{part}' is also given a plain value")
        node[path[-1]] = _json_value(key.replace("__", "."), settings[key])
    return json.dumps(out, allow_nan=False)


def _int_or_none(name, v, minimum=1):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an int or None, got {type(v).__name__}")
    if int(v) < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {int(v)}")
    return int(v)


def _seed(random_state):
    if random_state is None:
        return 0
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, bool) or not isinstance(random_state, numbers.Integral):
        raise TypeError(
            f"random_state must be a non-negative int, a RandomState or None, "
            f"got {type(random_state).__name__}"
        )
    if int(random_state) < 0:
        raise ValueError(f"random_state must be non-negative, got {int(random_state)}")
    return int(random_state)


def _as_float_matrix(a, what):
    """A contiguous float64 matrix (no copy when it already is one)."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if not (a.flags.c_contiguous or a.flags.f_contiguous):
        a = np.ascontiguousarray(a)
    return a


class _Progress:
    """The ``verbose`` progress line and the user's callback, as one callback."""

    def __init__(self, label, verbose, callback):
        self.label, self.verbose, self.callback = label, verbose, callback
        self.start = time.perf_counter()

    def __call__(self, step, total, objective):
        if self.verbose:
            elapsed = time.perf_counter() - self.start
            end = "\n" if step >= total else ""
            sys.stderr.write(
                f"\r{self.label}: step {step}/{total}, objective {objective:.6g}, "
                f"{elapsed:.1f} s{end}"
            )
            sys.stderr.flush()
        if self.callback is not None:
            self.callback(step, total, objective)


class _DeepGPBase(BaseEstimator):
    _task = "regression"

    def __init__(
        self,
        backend="svi",
        layers=None,
        *,
        preset=None,
        num_inducing=None,
        hidden_width=None,
        train_samples=None,
        predict_samples=None,
        steps=None,
        batch_size=None,
        learning_rate=None,
        early_stopping="default",
        convergence="default",
        tune=True,
        random_state=0,
        verbose=False,
        callback=None,
        checkpoint_dir=None,
        checkpoint_every=0,
        **settings,
    ):
        self.backend = backend
        self.layers = layers
        self.preset = preset
        self.num_inducing = num_inducing
        self.hidden_width = hidden_width
        self.train_samples = train_samples
        self.predict_samples = predict_samples
        self.steps = steps
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.early_stopping = early_stopping
        self.convergence = convergence
        self.tune = tune
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self._settings = dict(settings)

    # -- parameters -------------------------------------------------------------------

    def get_params(self, deep=True):
        """The estimator's parameters, backend settings included (scikit-learn API)."""
        params = super().get_params(deep=deep)
        params.update(getattr(self, "_settings", {}))
        return params

    def set_params(self, **params):
        """Sets parameters; a name that is not a shared parameter is a backend setting
        (checked by the backend when fitting)."""
        explicit = set(self._get_param_names())
        for key, value in params.items():
            if key in explicit:
                setattr(self, key, value)
            else:
                self._settings[key] = value
        return self

    def _options(self):
        if not isinstance(self.backend, str):
            raise TypeError(f"backend must be a str, got {type(self.backend).__name__}")
        es = self.early_stopping
        if es is None or es is False or (isinstance(es, str) and es == "none"):
            early = "none"
        elif isinstance(es, str) and es == "default":
            early = "default"
        elif isinstance(es, dict):
            early = {"rule": _json_value("early_stopping", es)}
        else:
            raise ValueError(
                f"early_stopping must be 'default', None or a rule dict, got {es!r}"
            )
        lr = self.learning_rate
        if lr is not None:
            if isinstance(lr, bool) or not isinstance(lr, numbers.Real):
                raise TypeError(f"learning_rate must be a float or None, got {type(lr).__name__}")
            lr = float(lr)
            if not (np.isfinite(lr) and lr > 0):
                raise ValueError(f"learning_rate must be a finite number > 0, got {lr}")
        if not isinstance(self.tune, (bool, np.bool_)):
            raise TypeError(f"tune must be a bool, got {type(self.tune).__name__}")
        conv = self.convergence
        if conv is None or conv is False or (isinstance(conv, str) and conv == "none"):
            convergence = "none"
        elif isinstance(conv, str) and conv == "default":
            convergence = "default"
        else:
            raise ValueError(f"convergence must be 'default' or None, got {conv!r}")
        preset = self.preset
        if preset is not None and not isinstance(preset, str):
            raise TypeError(f"preset must be a str or None, got {type(preset).__name__}")
        options = {
            "preset": preset,
            "num_inducing": _int_or_none("num_inducing", self.num_inducing),
            "hidden_width": _int_or_none("hidden_width", self.hidden_width),
            "train_samples": _int_or_none("train_samples", self.train_samples),
            "predict_samples": _int_or_none("predict_samples", self.predict_samples),
            "learning_rate": lr,
            "tune": bool(self.tune),
            "steps": _int_or_none("steps", self.steps),
            "batch_size": _int_or_none("batch_size", self.batch_size),
            "seed": _seed(self.random_state),
            "early_stopping": early,
            "convergence": convergence,
            "checkpointing": self.checkpoint_dir is not None,
        }
        layers = _int_or_none("layers", self.layers)
        every = _int_or_none("checkpoint_every", self.checkpoint_every, minimum=0) or 0
        if self.callback is not None and not callable(self.callback):
            raise TypeError("callback must be callable or None")
        return layers, json.dumps(options, allow_nan=False), _settings_json(self._settings), every

    def _config_for(self, n_samples, n_classes=2):
        """The resolved configuration a fit on ``n_samples`` rows would train with (as
        ``config_`` after a fit), checked by the backend, without training."""
        layers, options, settings, _ = self._options()
        return json.loads(
            _dgp.resolve(
                self.backend,
                layers,
                self._task,
                int(n_classes),
                getattr(self, "likelihood", None),
                options,
                settings,
                int(n_samples),
            )
        )

    def _hooks(self):
        progress = None
        if self.verbose or self.callback is not None:
            label = self.backend if self.layers is None else f"{self.backend} L={self.layers}"
            progress = _Progress(label, self.verbose, self.callback)
        ckpt = None if self.checkpoint_dir is None else os.fspath(self.checkpoint_dir)
        return progress, ckpt

    def _run_fit(self, X, y2, num_classes, likelihood):
        layers, options, settings, every = self._options()
        progress, ckpt = self._hooks()
        model, resolved, pending = _dgp.fit(
            self.backend,
            layers,
            self._task,
            num_classes,
            likelihood,
            options,
            settings,
            X,
            y2,
            progress,
            _POLL_SECONDS,
            ckpt,
            every,
        )
        self._keep(model, resolved, pending)

    def _keep(self, model, resolved, pending):
        """Stores a fitted model (even one whose fit was stopped), then raises the
        exception the fit's hooks caught, if any."""
        resolved = json.loads(resolved)
        report = json.loads(model.report_json())
        self.model_ = model
        self.backend_ = model.backend
        self.config_ = resolved
        self.fit_summary_ = {
            "backend": model.backend,
            "model": model.description,
            "steps": report.get("steps", 0),
            "max_steps": resolved["fit"]["steps"],
            "final_objective": report.get("final_objective"),
            "train_seconds": report.get("seconds"),
            "history": report.get("history", []),
            "held_out": report.get("held_out"),
            "converged_after": report.get("converged_after"),
            "noise_variance": model.noise_variance,
            "interrupted": pending is not None,
        }
        self._predict_samples_ = int(resolved["predict"]["samples"])
        self._predict_seed_ = int(resolved["predict"]["seed"])
        if pending is not None:
            raise pending

    # -- prediction ----------------------------------------------------------------------

    def _predictive(self, X, samples=None, seed=None):
        check_is_fitted(self, "model_")
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=True)
        X = _as_float_matrix(X, "X")
        samples = self._predict_samples_ if samples is None else _int_or_none("samples", samples)
        seed = self._predict_seed_ if seed is None else _seed(seed)
        return self.model_.predict(X, samples, seed, self._task == "classification")

    def predict_mixture(self, X, *, samples=None, seed=None):
        """The predictive Gaussian mixture at the rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        samples : int, optional
            Mixture components (Monte Carlo samples); default: the fit's
            ``predict_samples``. Ignored by backends whose components are the model's own
            (dspp's quadrature sites).
        seed : int, optional
            Prediction seed; default ``random_state + 0x5eed``.

        Returns
        -------
        weights : ndarray of shape (n_components,)
            Mixture weights, shared by every point, summing to 1.
        means : ndarray of shape (n_samples, n_components) or (n_samples, n_components, n_outputs)
            Component means in the targets' original units.
        variances : ndarray, same shape as ``means``
            Component variances (observation noise included).
        """
        p = self._predictive(X, samples, seed)
        means, variances = p.means(), p.variances()
        if getattr(self, "_y_1d_", True):
            means, variances = means[:, :, 0], variances[:, :, 0]
        return p.weights(), means, variances

    # -- persistence --------------------------------------------------------------------

    def _meta(self):
        meta = {
            "format": "dgp-python-estimator",
            "version": 1,
            "class": type(self).__name__,
            "params": {},
            "n_features_in_": int(self.n_features_in_),
            "predict_samples": self._predict_samples_,
            "predict_seed": self._predict_seed_,
            "y_1d": bool(getattr(self, "_y_1d_", True)),
            "config": self.config_,
            "fit_summary": self.fit_summary_,
        }
        for k, v in self.get_params(deep=False).items():
            if k == "callback":
                continue
            try:
                meta["params"][k] = _json_value(k, v)
            except TypeError:
                pass
        if hasattr(self, "feature_names_in_"):
            meta["feature_names_in_"] = [str(c) for c in self.feature_names_in_]
        if hasattr(self, "classes_"):
            meta["classes_"] = self.classes_.tolist()
            meta["classes_dtype"] = str(self.classes_.dtype)
        return meta

    def save(self, path):
        """Writes the fitted model to ``path``, atomically, as the library's versioned,
        checksummed model file (readable from Rust with ``Fitted::load`` or
        ``dgp_registry::load_path``), the estimator's parameters and labels inside it as
        the file's metadata (covered by the checksum)."""
        check_is_fitted(self, "model_")
        path = os.fspath(path)
        _write_atomic(path, self.model_.to_text(json.dumps(self._meta())))
        return self

    def __getstate__(self):
        state = self.__dict__.copy()
        if "model_" in state:
            state["model_"] = {"dgp-model-file": self.model_.to_text()}
        return state

    def __setstate__(self, state):
        model = state.get("model_")
        if isinstance(model, dict) and "dgp-model-file" in model:
            state["model_"] = _dgp.load_text(model["dgp-model-file"])
        self.__dict__.update(state)

    # -- streamed fit -----------------------------------------------------------------

    def fit_path(self, path, *, target=None, features=None, init_rows=10_000, work_dir=None):
        """Fits on rows on disk without loading them, as ``dgp-bench stream`` does.

        Parameters
        ----------
        path : str
            A row store (``dgp-bench synth``/``convert``, ``dgp.synth(path=...)``) or a
            Parquet file (``.parquet``, streamed into a temporary row store first).
        target : str or list of str
            Parquet only: the target column(s) (classification: integer labels 0..K-1).
        features : list of str, optional
            Parquet only: the input columns (default: every other column).
        init_rows : int, default=10000
            Rows of the seeded reservoir sample the model is initialised on.
        work_dir : str, optional
            Where the temporary row store of a Parquet file is written (default: the
            system's temporary directory).

        Validation tuning is off for streamed fits (it needs the rows in memory).
        """
        path = os.fspath(path)
        if path.lower().endswith(".parquet"):
            if target is None:
                raise ValueError("fit_path of a Parquet file needs target=COLUMN")
            targets = [target] if isinstance(target, str) else list(target)
            feats = [] if features is None else [str(f) for f in features]
            with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
                store = os.path.join(tmp, "rows.dgprows")
                _dgp.parquet_to_rowstore(path, feats, targets, store)
                return self._fit_rowstore(store, init_rows)
        if target is not None or features is not None:
            raise ValueError("target and features apply to Parquet files; a row store names its own")
        return self._fit_rowstore(path, init_rows)

    def _fit_rowstore(self, path, init_rows):
        layers, options, settings, every = self._options()
        progress, ckpt = self._hooks()
        likelihood = getattr(self, "likelihood", None)
        model, resolved, pending, k = _dgp.fit_rowstore(
            self.backend,
            layers,
            self._task,
            likelihood,
            options,
            settings,
            path,
            _int_or_none("init_rows", init_rows),
            progress,
            _POLL_SECONDS,
            ckpt,
            every,
        )
        for attr in ("feature_names_in_", "classes_"):
            self.__dict__.pop(attr, None)
        self.n_features_in_ = model.n_features
        self._y_1d_ = model.n_outputs == 1
        if self._task == "classification":
            self.classes_ = np.arange(k)
        self._keep(model, resolved, pending)
        return self


def _write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class DeepGPRegressor(RegressorMixin, _DeepGPBase):
    __doc__ = (
        """Deep Gaussian-process regression with any backend of the library.

    ``fit(X, y)`` standardises inputs and targets with the training rows' statistics,
    builds and trains the backend's model (its defaults are those of ``dgp-bench run``)
    and keeps the standardisation; predictions are in the targets' original units. The
    GIL is released while Rust trains and predicts; Ctrl-C stops a fit after the current
    step, keeps the model trained so far (``fit_summary_["interrupted"]``) and re-raises
    ``KeyboardInterrupt``.
"""
        + _COMMON_DOC
        + """
    Attributes
    ----------
    model_ : dgp._dgp.Model
        The trained model (``model_.description`` describes it).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had column names (a DataFrame).
    backend_ : str
    config_ : dict
        The resolved configuration: common settings, backend settings, training (steps,
        batch, seed, early stopping) and default prediction.
    fit_summary_ : dict
        Steps taken and allowed, final objective, training seconds, objective history,
        held-out early-stopping summary, noise variance (original units), whether the fit
        was interrupted.

    Examples
    --------
    >>> import numpy as np, dgp
    >>> X = np.random.default_rng(0).normal(size=(200, 3)); y = np.sin(X[:, 0])
    >>> m = dgp.DeepGPRegressor("svi", layers=2, steps=200).fit(X, y)
    >>> mean, std = m.predict(X[:5], return_std=True)
    """
    )

    _task = "regression"

    def fit(self, X, y):
        """Fits the model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            float64 or float32 arrays, anything with ``__array__``, DataFrames.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        X, y = validate_data(
            self,
            X,
            y,
            dtype=np.float64,
            ensure_all_finite=True,
            multi_output=True,
            y_numeric=True,
            ensure_min_samples=2,
        )
        self._y_1d_ = y.ndim == 1
        self._run_fit(_as_float_matrix(X, "X"), _as_float_matrix(y, "y"), 0, None)
        return self

    def predict(self, X, return_std=False, *, samples=None, seed=None):
        """Predictive mean (and standard deviation) at the rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation (of the whole mixture, noise
            included).
        samples, seed : int, optional
            As in :meth:`predict_mixture`.

        Returns
        -------
        mean : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        std : ndarray, same shape, if ``return_std``
        """
        p = self._predictive(X, samples, seed)
        mean = p.mean()
        if self._y_1d_:
            mean = mean[:, 0]
        if not return_std:
            return mean
        std = np.sqrt(p.variance())
        return mean, (std[:, 0] if self._y_1d_ else std)

    def predict_quantiles(self, X, q=(0.05, 0.5, 0.95), *, samples=None, seed=None):
        """Quantiles of the predictive mixture.

        Returns
        -------
        ndarray of shape (n_samples, len(q)) or (n_samples, n_outputs, len(q))
        """
        q = np.atleast_1d(np.asarray(q, dtype=np.float64))
        if q.ndim != 1 or q.size == 0:
            raise ValueError("q must be a non-empty sequence of levels in (0, 1)")
        out = self._predictive(X, samples, seed).quantiles(q.tolist())  # (len(q), N, P)
        out = np.moveaxis(out, 0, -1)  # (N, P, len(q))
        return out[:, 0, :] if self._y_1d_ else out

    def predict_interval(self, X, level=0.95, *, samples=None, seed=None):
        """Central predictive interval of probability ``level``.

        Returns
        -------
        lower, upper : ndarrays of shape (n_samples,) or (n_samples, n_outputs)
        """
        level = float(level)
        if not 0.0 < level < 1.0:
            raise ValueError(f"level must lie in (0, 1), got {level}")
        qs = self.predict_quantiles(X, ((1 - level) / 2, (1 + level) / 2), samples=samples, seed=seed)
        return qs[..., 0], qs[..., 1]

    def score(self, X, y, sample_weight=None):
        """Mean log predictive density of ``y`` at ``X`` (original units; higher is
        better): ``(1/N) Σ_n log p(y_n | x_n)`` under the predictive mixture. Not the R²
        of ``RegressorMixin``."""
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported")
        p = self._predictive(X)
        y = _as_float_matrix(np.asarray(y, dtype=np.float64), "y")
        return float(p.mean_log_density(y))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        # `score` is the mean log predictive density, not R²: a threshold on R² does not apply.
        tags.regressor_tags.poor_score = True
        return tags


class DeepGPClassifier(ClassifierMixin, _DeepGPBase):
    __doc__ = (
        """Deep Gaussian-process classification with any backend that trains a
    classification likelihood.

    Labels of any type are mapped to ``0..K-1`` through ``classes_`` (sorted). Inputs are
    standardised with the training rows' statistics; the likelihood is ``likelihood``
    (default: Bernoulli probit for two classes, robust-max for more).
"""
        + _COMMON_DOC
        + """
    likelihood : {"probit", "logit", "robust-max", "softmax"} or None
        The classification likelihood (``probit``/``logit``: two classes only).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    model_, n_features_in_, feature_names_in_, backend_, config_, fit_summary_
        As in :class:`DeepGPRegressor`.
    """
    )

    _task = "classification"

    def __init__(
        self,
        backend="svi",
        layers=None,
        *,
        likelihood=None,
        preset=None,
        num_inducing=None,
        hidden_width=None,
        train_samples=None,
        predict_samples=None,
        steps=None,
        batch_size=None,
        learning_rate=None,
        early_stopping="default",
        convergence="default",
        tune=True,
        random_state=0,
        verbose=False,
        callback=None,
        checkpoint_dir=None,
        checkpoint_every=0,
        **settings,
    ):
        super().__init__(
            backend,
            layers,
            preset=preset,
            num_inducing=num_inducing,
            hidden_width=hidden_width,
            train_samples=train_samples,
            predict_samples=predict_samples,
            steps=steps,
            batch_size=batch_size,
            learning_rate=learning_rate,
            early_stopping=early_stopping,
            convergence=convergence,
            tune=tune,
            random_state=random_state,
            verbose=verbose,
            callback=callback,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=checkpoint_every,
            **settings,
        )
        self.likelihood = likelihood

    def fit(self, X, y):
        """Fits the model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels of any type (at least two distinct).

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=True, ensure_min_samples=2)
        check_classification_targets(y)
        classes, idx = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"a classifier needs at least 2 classes in y; got 1 class ({classes[0]!r})"
            )
        if self.likelihood is not None and not isinstance(self.likelihood, str):
            raise TypeError(f"likelihood must be a str or None, got {type(self.likelihood).__name__}")
        self.classes_ = classes
        self._y_1d_ = True
        y2 = idx.astype(np.float64).reshape(-1, 1)
        self._run_fit(_as_float_matrix(X, "X"), y2, int(classes.size), self.likelihood)
        return self

    def predict_proba(self, X, *, samples=None, seed=None):
        """Class probabilities.

        Returns
        -------
        ndarray of shape (n_samples, n_classes), columns in the order of ``classes_``.
        """
        return self._predictive(X, samples, seed).class_probs()

    def predict_log_proba(self, X, *, samples=None, seed=None):
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X, samples=samples, seed=seed))

    def predict(self, X, *, samples=None, seed=None):
        """The most probable class of each row (ties to the first in ``classes_``).

        Returns
        -------
        ndarray of shape (n_samples,) with the labels' type.
        """
        check_is_fitted(self, "model_")
        return self.classes_[self._predictive(X, samples, seed).predicted_classes()]

    def score(self, X, y, sample_weight=None):
        """Mean log predictive probability of the true labels, ``(1/N) Σ_n log p(y_n |
        x_n)`` (higher is better; the negative log loss). Not the accuracy of
        ``ClassifierMixin``."""
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported")
        check_is_fitted(self, "model_")
        y = np.asarray(y)
        idx = np.searchsorted(self.classes_, y)
        idx = np.clip(idx, 0, self.classes_.size - 1)
        if y.ndim != 1 or not np.all(self.classes_[idx] == y):
            raise ValueError("y holds labels that are not in classes_")
        p = self._predictive(X)
        return float(p.mean_log_class_prob(idx.astype(np.int64).tolist()))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # `score` is a mean log probability, and the fast test settings train briefly.
        tags.classifier_tags.poor_score = True
        return tags


def load(path, backend=None):
    """Reads a model written by ``save(path)`` (or by the Rust library's ``Fitted::save``).

    Parameters
    ----------
    path : str
        The model file. The estimator's parameters and labels are read from its metadata;
        a file without them (written by the Rust library) loads as a regressor with the
        backend's parameters.
    backend : str, optional
        Refuse a file of another backend (``ValueError``).

    Returns
    -------
    DeepGPRegressor or DeepGPClassifier, fitted.
    """
    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        model = _dgp.load_text(f.read(), backend)
    meta = None if model.metadata is None else json.loads(model.metadata)
    cls = DeepGPRegressor
    params = {"backend": model.backend}
    if meta is not None:
        if not isinstance(meta, dict) or meta.get("format") != "dgp-python-estimator":
            raise ValueError(f"{path}: its metadata is not a dgp estimator description")
        cls = {"DeepGPRegressor": DeepGPRegressor, "DeepGPClassifier": DeepGPClassifier}[meta["class"]]
        params = dict(meta["params"])
        if params.get("backend") != model.backend:
            raise ValueError(
                f"{path}: its metadata describes a '{params.get('backend')}' model but the "
                f"file holds a '{model.backend}' model"
            )
    est = cls(**params)
    est.model_ = model
    est.backend_ = model.backend
    est.n_features_in_ = model.n_features
    if meta is None:
        est._y_1d_ = model.n_outputs == 1
        est._predict_samples_ = 100
        est._predict_seed_ = int(_dgp.PREDICT_SEED_OFFSET)
        est.config_ = {}
        est.fit_summary_ = {"backend": model.backend, "model": model.description}
        return est
    est._y_1d_ = meta["y_1d"]
    est._predict_samples_ = meta["predict_samples"]
    est._predict_seed_ = meta["predict_seed"]
    est.config_ = meta["config"]
    est.fit_summary_ = meta["fit_summary"]
    if "feature_names_in_" in meta:
        est.feature_names_in_ = np.asarray(meta["feature_names_in_"], dtype=object)
    if "classes_" in meta:
        est.classes_ = np.asarray(meta["classes_"], dtype=meta["classes_dtype"])
    return est
