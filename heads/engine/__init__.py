"""mmengine glue: a Runner with atomic, safely loaded checkpoints; hooks for safe checkpoints, exact resumes and
divergence; sharded training (FSDP2); progress and a short console; autocast training; layer-wise learning-rate
decay; a recipe's batch made up by gradient accumulation."""
from .autocast import AutocastOptimWrapper
from .effective_batch import StepParamSchedulerHook
from .fsdp import FullyShardedModel
from .layer_decay import LayerDecayOptimWrapperConstructor
from .lora_hook import LoRAAdapterHook
from .non_finite import DivergedError, NonFiniteLossHook
from .progress import EtaTimerHook, ProgressLoggerHook
from .rng_state import RngStateHook
from .runner import ZooRunner
from .safe_checkpoint import SafeCheckpointHook

__all__ = ['AutocastOptimWrapper', 'DivergedError', 'EtaTimerHook', 'FullyShardedModel',
           'LayerDecayOptimWrapperConstructor', 'LoRAAdapterHook', 'NonFiniteLossHook', 'ProgressLoggerHook',
           'RngStateHook', 'SafeCheckpointHook', 'StepParamSchedulerHook', 'ZooRunner']
