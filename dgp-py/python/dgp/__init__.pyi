from os import PathLike
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

from ._estimators import DeepGPClassifier as DeepGPClassifier
from ._estimators import DeepGPRegressor as DeepGPRegressor

__version__: str

def backends() -> list[str]: ...
def backend_info(name: str) -> dict[str, Any]: ...
def synth(
    n: int, seed: int = 0, path: Optional[Union[str, PathLike[str]]] = None
) -> Optional[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]: ...  # X (n, 9), y (n,)
def load(
    path: Union[str, PathLike[str]], backend: Optional[str] = None
) -> Union[DeepGPRegressor, DeepGPClassifier]: ...
