"""mmengine glue: safe checkpoints, autocast training, prediction pictures."""
from .autocast import AutocastOptimWrapper
from .safe_checkpoint import SafeCheckpointHook
from .visualization import PredictionVisualizationHook

__all__ = ['AutocastOptimWrapper', 'PredictionVisualizationHook', 'SafeCheckpointHook']
