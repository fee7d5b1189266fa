"""Necks: turn backbone levels into the multi-scale maps heads read."""
from .dpt import DPTNeck, FusionBlock, Readout, ReassembleLevel, ResidualConvUnit
from .pyramid import HierarchicalFPN, LayerNorm2d, SimpleFeaturePyramid, pyramid_for

__all__ = ['DPTNeck', 'FusionBlock', 'HierarchicalFPN', 'LayerNorm2d', 'Readout', 'ReassembleLevel',
           'ResidualConvUnit', 'SimpleFeaturePyramid', 'pyramid_for']
