"""Module 01 (Tensor) and Module 06 (autograd)."""

from tinytorch.core.autograd import Function, no_grad
from tinytorch.core.tensor import Tensor

__all__ = ["Function", "Tensor", "no_grad"]
