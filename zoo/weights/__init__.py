"""Loading and converting checkpoints from other layouts (timm, HF transformers, the official code)."""
from .io import (
                 CheckpointError,
                 CorruptCheckpointError,
                 NotACheckpointError,
                 RemoteCheckpointError,
                 UnsafeCheckpointError,
                 read_state_dict,
)
from .layout_error import CheckpointLayoutError
from .load import CheckpointMismatchError, LoadReport, load_pretrained

__all__ = ['CheckpointError', 'CheckpointLayoutError', 'CheckpointMismatchError', 'CorruptCheckpointError',
           'LoadReport', 'NotACheckpointError', 'RemoteCheckpointError', 'UnsafeCheckpointError', 'load_pretrained',
           'read_state_dict']
