"""NVIDIA's C-RADIO backbones (v3 B/L/H/g, v4 SO400M/H) as NaFlex ViTs: timm's ``naflexvit_*_patch16_radio_v*``
names, on the :mod:`.naflex` classes (images of any size and aspect ratio, a mixed-size batch packed under a patch
budget), nothing here but the registered variants.

What they take from each side:
- from :mod:`.radio` (the same networks under timm's ``vit_*_radio_*`` names): the sizes (``RADIO_SIZES``), a summary
  (CLS) token then 7 (v3) or 9 (v4) registers with no positions, LayerScale 1e-5 in B and L, pre-LN blocks, LayerNorm
  eps 1e-6, no final norm, the summary token after the last block as the pooled feature (headless), OpenAI CLIP's
  mean / std, 512 px, and each checkpoint's bilinear corner rule (``RADIO_CORNERS``: True for v3-B and v3-H);
- from :mod:`.naflex`: the patch Linear and a position table read per image: here RADIO's whole 128 x 128 table
  (2048 px at 16 px patches; :class:`~.naflex_pos.GridPosEmbed` '1 128 128 d'), resampled bilinearly, without
  antialias, to the square of each image's larger grid side and cut to its top-left h x w (``pos_ar_preserving``:
  RADIO's "cropped position embedding"). The :mod:`.radio` names keep that table already brought to the 32 x 32 grid
  of 512 px, so away from 512 px these names read RADIO's own table where those read a resampled copy.

Weights: timm's files (:mod:`zoo.weights.naflex`) and NVIDIA's ``radio_model.model.*`` checkpoints
(:func:`zoo.weights.radio.radio_naflex_from_official`).
"""
from __future__ import annotations

from ..registry import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, register_variant
from .naflex import NAFLEX
from .radio import RADIO_CORNERS, RADIO_SIZES, radio_spec

#: RADIO's table: 128 x 128, bilinear without antialias, square of the larger side then cropped top-left
RADIO_TABLE = dict(pos_grid=(128, 128), pos_interp='bilinear', pos_antialias=False, pos_ar_preserving=True)
_HEAD = dict(global_pool='token', final_norm=False)  # the summary token after the last block, no norm
for (_size, _version), _corners in RADIO_CORNERS.items():
    register_variant(f'naflexvit_{_size}_patch16_radio_v{_version}', NAFLEX, mean=OPENAI_CLIP_MEAN,
                     std=OPENAI_CLIP_STD, input_size=512, num_classes=0, head=_HEAD, patch_size=16,
                     spec=radio_spec(_size, _version, _corners), pos_align_corners=_corners, **RADIO_TABLE,
                     **RADIO_SIZES[_size])
