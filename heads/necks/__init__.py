"""Necks: turn backbone levels into the multi-scale maps heads read."""
from .dpt import DPTNeck, FusionBlock, Readout, ReassembleLevel, ResidualConvUnit

__all__ = ['DPTNeck', 'FusionBlock', 'Readout', 'ReassembleLevel', 'ResidualConvUnit']
