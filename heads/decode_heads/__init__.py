"""Decode heads: the DPT segmentation and depth heads and Depth Anything's depth head on the finest fused map;
UperNet's head and its auxiliary FCN head on every pyramid level; Mask2Former's pixel decoder and masked-attention
transformer decoder; MoGe-2's point, normal, mask and scale heads."""
from .depth_anything import DepthAnythingHead
from .dpt import DPTDepthHead, DPTSegHead
from .fcn_head import FCNHead
from .mask2former_decoder import Mask2FormerTransformerDecoder
from .mask2former_pixel_decoder import Mask2FormerPixelDecoder
from .moge import MoGeHead
from .uper_head import UPerHead

__all__ = ['DPTDepthHead', 'DepthAnythingHead', 'DPTSegHead', 'FCNHead', 'Mask2FormerPixelDecoder',
           'Mask2FormerTransformerDecoder', 'MoGeHead', 'UPerHead']
