"""Decode heads: the DPT segmentation and depth heads on the finest fused map."""
from .dpt import DPTDepthHead, DPTSegHead

__all__ = ['DPTDepthHead', 'DPTSegHead']
