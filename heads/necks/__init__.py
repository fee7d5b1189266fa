"""Necks: turn backbone levels into the multi-scale maps heads read."""
from .conv_stack import ConvStack
from .depth_anything import DepthAnythingNeck
from .dpt import DPTNeck, FusionBlock, Readout, ReassembleLevel, ResidualConvUnit
from .levels import PyramidLevels
from .pyramid import HierarchicalFPN, LayerNorm2d, SimpleFeaturePyramid, pyramid_for
from .temporal import FrameQKV, TemporalBlock, TemporalCache, TemporalModule
from .video_depth_anything import VideoDepthAnythingNeck

__all__ = ['ConvStack', 'DPTNeck', 'DepthAnythingNeck', 'FrameQKV', 'FusionBlock', 'HierarchicalFPN', 'LayerNorm2d',
           'PyramidLevels', 'Readout', 'ReassembleLevel', 'ResidualConvUnit', 'SimpleFeaturePyramid', 'TemporalBlock',
           'TemporalCache', 'TemporalModule', 'VideoDepthAnythingNeck', 'pyramid_for']
