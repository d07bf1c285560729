"""Module 09's import path in the course: `from tinytorch.core.spatial import Conv2d`.

One implementation, two names: the layer lives in `tinytorch.nn` (`tinytorch.nn.Conv2d`).
"""

from tinytorch.nn.conv import Conv2d

__all__ = ["Conv2d"]
