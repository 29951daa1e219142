from os import PathLike
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from ._dgp import Model

ArrayLike = npt.ArrayLike
F64 = npt.NDArray[np.float64]
Path = Union[str, PathLike[str]]
EarlyStopping = Union[str, None, dict[str, Any]]

class _DeepGPBase(BaseEstimator):
    backend: str
    layers: Optional[int]
    preset: Optional[str]
    num_inducing: Optional[int]
    hidden_width: Optional[int]
    train_samples: Optional[int]
    predict_samples: Optional[int]
    steps: Optional[int]
    batch_size: Optional[int]
    learning_rate: Optional[float]
    early_stopping: EarlyStopping
    convergence: Optional[str]
    tune: bool
    random_state: Optional[int]
    verbose: bool
    callback: Optional[Callable[[int, int, float], object]]
    checkpoint_dir: Optional[Path]
    checkpoint_every: int
    # Fitted attributes.
    model_: Model
    n_features_in_: int
    feature_names_in_: npt.NDArray[np.object_]
    backend_: str
    config_: dict[str, Any]
    fit_summary_: dict[str, Any]
    def get_params(self, deep: bool = ...) -> dict[str, Any]: ...
    def set_params(self, **params: Any) -> "_DeepGPBase": ...
    def predict_mixture(
        self, X: ArrayLike, *, samples: Optional[int] = ..., seed: Optional[int] = ...
    ) -> tuple[F64, F64, F64]: ...  # (S,), (N, S[, P]), (N, S[, P])
    def save(self, path: Path) -> "_DeepGPBase": ...
    def fit_path(
        self,
        path: Path,
        *,
        target: Union[str, Sequence[str], None] = ...,
        features: Optional[Sequence[str]] = ...,
        init_rows: int = ...,
        work_dir: Optional[Path] = ...,
    ) -> "_DeepGPBase": ...

class DeepGPRegressor(RegressorMixin, _DeepGPBase):
    def __init__(
        self,
        backend: str = "svi",
        layers: Optional[int] = None,
        *,
        preset: Optional[str] = None,
        num_inducing: Optional[int] = None,
        hidden_width: Optional[int] = None,
        train_samples: Optional[int] = None,
        predict_samples: Optional[int] = None,
        steps: Optional[int] = None,
        batch_size: Optional[int] = None,
        learning_rate: Optional[float] = None,
        early_stopping: EarlyStopping = "default",
        convergence: Optional[str] = "default",
        tune: bool = True,
        random_state: Optional[int] = 0,
        verbose: bool = False,
        callback: Optional[Callable[[int, int, float], object]] = None,
        checkpoint_dir: Optional[Path] = None,
        checkpoint_every: int = 0,
        **settings: Any,
    ) -> None: ...
    def fit(self, X: ArrayLike, y: ArrayLike) -> "DeepGPRegressor": ...  # X (N, D), y (N,) or (N, P)
    def predict(
        self, X: ArrayLike, return_std: bool = False, *, samples: Optional[int] = ..., seed: Optional[int] = ...
    ) -> Any: ...  # mean (N,) or (N, P); with return_std: (mean, std)
    def predict_quantiles(
        self, X: ArrayLike, q: Sequence[float] = ..., *, samples: Optional[int] = ..., seed: Optional[int] = ...
    ) -> F64: ...  # (N, len(q)) or (N, P, len(q))
    def predict_interval(
        self, X: ArrayLike, level: float = 0.95, *, samples: Optional[int] = ..., seed: Optional[int] = ...
    ) -> tuple[F64, F64]: ...
    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: None = None) -> float: ...

class DeepGPClassifier(ClassifierMixin, _DeepGPBase):
    likelihood: Optional[str]
    classes_: npt.NDArray[Any]
    def __init__(
        self,
        backend: str = "svi",
        layers: Optional[int] = None,
        *,
        likelihood: Optional[str] = None,
        preset: Optional[str] = None,
        num_inducing: Optional[int] = None,
        hidden_width: Optional[int] = None,
        train_samples: Optional[int] = None,
        predict_samples: Optional[int] = None,
        steps: Optional[int] = None,
        batch_size: Optional[int] = None,
        learning_rate: Optional[float] = None,
        early_stopping: EarlyStopping = "default",
        convergence: Optional[str] = "default",
        tune: bool = True,
        random_state: Optional[int] = 0,
        verbose: bool = False,
        callback: Optional[Callable[[int, int, float], object]] = None,
        checkpoint_dir: Optional[Path] = None,
        checkpoint_every: int = 0,
        **settings: Any,
    ) -> None: ...
    def fit(self, X: ArrayLike, y: ArrayLike) -> "DeepGPClassifier": ...  # X (N, D), y (N,)
    def predict(self, X: ArrayLike, *, samples: Optional[int] = ..., seed: Optional[int] = ...) -> npt.NDArray[Any]: ...
    def predict_proba(self, X: ArrayLike, *, samples: Optional[int] = ..., seed: Optional[int] = ...) -> F64: ...  # (N, K)
    def predict_log_proba(self, X: ArrayLike, *, samples: Optional[int] = ..., seed: Optional[int] = ...) -> F64: ...
    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: None = None) -> float: ...

def load(path: Path, backend: Optional[str] = None) -> Union[DeepGPRegressor, DeepGPClassifier]: ...
