"""Decode heads: the DPT segmentation and depth heads and Depth Anything's depth head on the finest fused map;
Mask2Former's pixel decoder and masked-attention transformer decoder."""
from .depth_anything import DepthAnythingHead
from .dpt import DPTDepthHead, DPTSegHead
from .mask2former_decoder import Mask2FormerTransformerDecoder
from .mask2former_pixel_decoder import Mask2FormerPixelDecoder

__all__ = ['DPTDepthHead', 'DepthAnythingHead', 'DPTSegHead', 'Mask2FormerPixelDecoder',
           'Mask2FormerTransformerDecoder']
