"""TinyTorch: a small ML framework built from scratch in Python and NumPy (Milestone 07 edition)."""

from tinytorch.core.tensor import Tensor

__version__ = "0.7.0"

__all__ = ["Tensor", "__version__"]
