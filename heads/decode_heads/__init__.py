"""Decode heads: the DPT segmentation and depth heads and Depth Anything's depth head on the finest fused map."""
from .depth_anything import DepthAnythingHead
from .dpt import DPTDepthHead, DPTSegHead

__all__ = ['DPTDepthHead', 'DepthAnythingHead', 'DPTSegHead']
