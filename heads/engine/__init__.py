"""mmengine glue: a Runner with atomic, safely loaded checkpoints (:mod:`.runner`) and the command line turned
into its config (:mod:`.launch`), over subpackages by concern: :mod:`.checkpoints` (safe checkpoints, exact
resumes, divergence), :mod:`.config` (config mistakes named before building, config differences),
:mod:`.console` (a short console, progress, reading the logs), :mod:`.distributed` (FSDP2 sharding, a recipe's
batch made up by gradient accumulation) and :mod:`.switches` (autocast, torch.compile, layer-wise learning-rate
decay, LoRA adapters)."""
from .checkpoints import DivergedError, NonFiniteLossHook, RngStateHook, SafeCheckpointHook
from .console import EtaTimerHook, ProgressLoggerHook
from .distributed import FullyShardedModel, StepParamSchedulerHook
from .runner import ZooRunner
from .switches import AutocastOptimWrapper, LayerDecayOptimWrapperConstructor, LoRAAdapterHook

__all__ = ['AutocastOptimWrapper', 'DivergedError', 'EtaTimerHook', 'FullyShardedModel',
           'LayerDecayOptimWrapperConstructor', 'LoRAAdapterHook', 'NonFiniteLossHook', 'ProgressLoggerHook',
           'RngStateHook', 'SafeCheckpointHook', 'StepParamSchedulerHook', 'ZooRunner']
