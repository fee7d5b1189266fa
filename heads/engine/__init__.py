"""mmengine glue: a Runner with atomic, safely loaded checkpoints; hooks for safe checkpoints, exact resumes and
divergence; autocast training; layer-wise learning-rate decay; prediction pictures."""
from .autocast import AutocastOptimWrapper
from .layer_decay import LayerDecayOptimWrapperConstructor
from .non_finite import DivergedError, NonFiniteLossHook
from .rng_state import RngStateHook
from .runner import ZooRunner
from .safe_checkpoint import SafeCheckpointHook
from .visualization import PredictionVisualizationHook

__all__ = ['AutocastOptimWrapper', 'DivergedError', 'LayerDecayOptimWrapperConstructor', 'NonFiniteLossHook',
           'PredictionVisualizationHook', 'RngStateHook', 'SafeCheckpointHook', 'ZooRunner']
