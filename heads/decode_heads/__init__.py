"""Decode heads: the DPT segmentation and depth heads and Depth Anything's depth head on the finest fused map;
UperNet's head and its auxiliary FCN head on every pyramid level."""
from .depth_anything import DepthAnythingHead
from .dpt import DPTDepthHead, DPTSegHead
from .fcn_head import FCNHead
from .uper_head import UPerHead

__all__ = ['DPTDepthHead', 'DepthAnythingHead', 'DPTSegHead', 'FCNHead', 'UPerHead']
