"""Type stubs of the compiled module ``dgp._dgp`` (the Rust side of the package)."""

from typing import Callable, Optional, Sequence

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

PREDICT_SEED_OFFSET: int

class Prediction:
    """A predictive distribution: per point a Gaussian mixture with shared weights."""

    n_points: int
    n_components: int
    def weights(self) -> F64: ...  # (S,)
    def means(self) -> F64: ...  # (N, S, P)
    def variances(self) -> F64: ...  # (N, S, P)
    def mean(self) -> F64: ...  # (N, P)
    def variance(self) -> F64: ...  # (N, P)
    def quantiles(self, q: Sequence[float]) -> F64: ...  # (len(q), N, P)
    def class_probs(self) -> Optional[F64]: ...  # (N, K)
    def predicted_classes(self) -> npt.NDArray[np.int64]: ...  # (N,)
    def mean_log_density(self, y: F64) -> float: ...  # y: (N, P)
    def mean_log_class_prob(self, labels: Sequence[int]) -> float: ...

class Model:
    """A trained or loaded model with its standardisation."""

    backend: str
    description: str
    n_features: int
    n_outputs: int
    stopped_early: bool
    noise_variance: Optional[float]
    def predict(self, x: F64, samples: int, seed: int, classify: bool) -> Prediction: ...  # x: (N, D)
    def to_text(self, metadata: Optional[str] = None) -> str: ...
    @property
    def metadata(self) -> Optional[str]: ...
    def report_json(self) -> str: ...

ProgressCallback = Callable[[int, int, float], object]

def fit(
    backend: str,
    layers: Optional[int],
    task: str,
    num_classes: int,
    likelihood: Optional[str],
    options: str,
    settings: str,
    x: F64,
    y: F64,
    callback: Optional[ProgressCallback] = None,
    interval: float = 0.1,
    checkpoint_dir: Optional[str] = None,
    checkpoint_every: int = 0,
) -> tuple[Model, str, Optional[BaseException]]: ...
def fit_rowstore(
    backend: str,
    layers: Optional[int],
    task: str,
    likelihood: Optional[str],
    options: str,
    settings: str,
    path: str,
    init_rows: int = 10000,
    callback: Optional[ProgressCallback] = None,
    interval: float = 0.1,
    checkpoint_dir: Optional[str] = None,
    checkpoint_every: int = 0,
) -> tuple[Model, str, Optional[BaseException], int]: ...
def resolve(
    backend: str,
    layers: Optional[int],
    task: str,
    num_classes: int,
    likelihood: Optional[str],
    options: str,
    settings: str,
    n: int,
) -> str: ...
def load_text(text: str, expect: Optional[str] = None) -> Model: ...
def backend_names() -> list[str]: ...
def backend_info(name: str) -> str: ...
def parquet_to_rowstore(path: str, features: Sequence[str], targets: Sequence[str], dest: str) -> int: ...
def synth(n: int, seed: int = 0, path: Optional[str] = None) -> Optional[tuple[F64, F64]]: ...
