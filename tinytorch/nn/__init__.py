"""Layers: Module 09's direct Conv2d and the geometry it shares with im2col."""

from tinytorch.nn.conv import Conv2d, conv2d
from tinytorch.nn.geometry import ConvGeometry, conv_geometry

__all__ = ["Conv2d", "ConvGeometry", "conv2d", "conv_geometry"]
