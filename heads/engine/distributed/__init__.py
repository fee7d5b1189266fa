"""Training over any number of processes: the model sharded with FSDP2 (:mod:`.fsdp`, ``--strategy fsdp``), and
a recipe's batch made up by gradient accumulation whatever the process count (:mod:`.effective_batch`). Joining
the processes (torchrun, gloo on CPU) is :mod:`heads.engine.launch`'s."""
from .effective_batch import StepParamSchedulerHook, apply_effective_batch, world_size_of
from .fsdp import FullyShardedModel, OptimizerStateMismatchError, gather_full, held_bytes, is_fully_sharded

__all__ = ['FullyShardedModel', 'OptimizerStateMismatchError', 'StepParamSchedulerHook', 'apply_effective_batch',
           'gather_full', 'held_bytes', 'is_fully_sharded', 'world_size_of']
