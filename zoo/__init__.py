"""zoo: vision-transformer backbones for dense prediction, built on one attention core (pure torch + einops)."""
from . import backbones  # noqa: F401  (registers the named variants)
from .factory import create_backbone, create_classifier
from .registry import UnknownModelError, list_backbones
from .weights import CheckpointError, CheckpointMismatchError, UnsafeCheckpointError, load_pretrained

__all__ = ['CheckpointError', 'CheckpointMismatchError', 'UnknownModelError', 'UnsafeCheckpointError',
           'create_backbone', 'create_classifier', 'list_backbones', 'load_pretrained']
__version__ = '0.1.0'
