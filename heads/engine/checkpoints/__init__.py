"""Checkpoints that survive and resume exactly: an old checkpoint kept until its successor is complete, files that
``torch.load(weights_only=True)`` reads, the torch generator state stored for exact resumes, which checkpoint
``--resume`` continues from, and a stop at the first non-finite loss naming a checkpoint that was good. The atomic
writes and safe reads themselves are :class:`heads.engine.ZooRunner`'s."""
from .checkpoint_hook import KeepUntilReplacedCheckpointHook
from .non_finite import DivergedError, NonFiniteLossHook
from .resume_search import NoCompleteCheckpointError, latest_complete_checkpoint
from .rng_state import RngStateError, RngStateHook
from .safe_checkpoint import SafeCheckpointHook

__all__ = ['DivergedError', 'KeepUntilReplacedCheckpointHook', 'NoCompleteCheckpointError', 'NonFiniteLossHook',
           'RngStateError', 'RngStateHook', 'SafeCheckpointHook', 'latest_complete_checkpoint']
