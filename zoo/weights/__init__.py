"""Loading and converting backbone checkpoints from other layouts (timm, HF transformers, the official code, mmseg).

One rule for where a backbone layout lives: per source. Each source has its module with its table of converters by
family (:mod:`.timm` ``FROM_TIMM``, :mod:`.hf` ``FROM_HF``, :mod:`.official` ``FROM_OFFICIAL``, :mod:`.mmseg`), and
:mod:`.formats` picks among them. A converter that several sources share or that is long sits in a module of its
own that those tables import (:mod:`.dinov2`: timm's = the official, transformers' via it; :mod:`.swin`: timm's and
the official; :mod:`.dinov3`: timm's, the official and transformers' DINOv3; :mod:`.eva`, :mod:`.timm_levit_pit`:
timm's; :mod:`.clip`, :mod:`.siglip`: transformers' CLIP and SigLIP image towers). Whole task models' layouts
(their necks and heads) are :mod:`heads.layouts`'; nothing here imports :mod:`heads` (:mod:`.mmseg` only forwards
the names that moved there, when old code asks for them).
"""
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
