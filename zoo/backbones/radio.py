"""NVIDIA's C-RADIO backbones (Ranzinger et al. 2024, "AM-RADIO"; Heinrich et al. 2025, "RADIOv2.5"; C-RADIOv3 and v4)
under timm's non-NaFlex ``vit_*_patch16_radio_v3`` / ``_v4`` names: the plain :mod:`.vit` family with options, so
nothing here but the registered variants.

- a learned position table on the patch tokens only, read by RADIO's "cropped position embedding" rule
  (``pos_embed='cropped'``, :class:`zoo.core.CroppedPosEmbed`): for an input grid (h, w) the table is resampled
  bilinearly, without antialias, to the square of the larger side and its top-left h x w part is kept. RADIO trains a
  128 x 128 table; timm stores it already brought to the 32 x 32 grid of 512 px by that rule, and a larger table in a
  checkpoint is brought to the build grid by the same rule on loading. The bilinear corner rule follows the
  checkpoint (``pos_align_corners``): True for C-RADIOv3-B and -H, False for v3-L, v3-g and every v4 (timm's
  ``_RADIO_ALIGN_CORNERS``);
- prefix tokens: a summary (CLS) token then registers (7 in v3, 9 in v4; RADIO's further per-teacher summary tokens
  are registers in timm's layout), with no positions;
- pre-LN blocks, LayerNorm eps 1e-6, LayerScale 1e-5 in the base and large ones, no final norm; the pooled feature is
  the summary token after the last block (``global_pool='token'``, headless: ``num_classes=0``).

Mean / std: OpenAI CLIP's. The same backbones as NaFlex ViTs, keeping the whole 128 x 128 table: :mod:`.naflex_radio`.
Weights: timm's files (:func:`zoo.weights.timm.vit_from_timm`) and NVIDIA's own RADIO
checkpoints (``radio_model.model.*``, :mod:`zoo.weights.radio`).
"""
from __future__ import annotations

from ..registry import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, register_variant
from .vit import VIT, VIT_SIZES
from .vit_spec import EncoderSpec, PositionSpec

#: the cropped position table on the patch tokens; registers and the corner rule per name (:func:`radio_spec`)
RADIO_SPEC = EncoderSpec(positions=PositionSpec(kind='cropped', prefix=False))
_PRETRAINED = dict(mean=OPENAI_CLIP_MEAN, std=OPENAI_CLIP_STD, input_size=512, num_classes=0, patch_size=16)
RADIO_LAYER_SCALE = {'base': 1e-5, 'large': 1e-5}  #: LayerScale's initial value where a size has LayerScale
RADIO_SIZES = {
    'base': VIT_SIZES['base'],
    'large': VIT_SIZES['large'],
    'huge': dict(embed_dim=1280, depth=32, num_heads=16),
    'giant': dict(embed_dim=1536, depth=40, num_heads=24),
    'so400m': dict(embed_dim=1152, depth=27, num_heads=16, mlp_ratio=4304 / 1152),
}
_HEAD = dict(global_pool='token', final_norm=False)  # the summary token after the last block, no norm
#: (size, version) -> bilinear align_corners of the checkpoint's position table (also read by :mod:`.naflex_radio`)
RADIO_CORNERS = {('base', 3): True, ('large', 3): False, ('huge', 3): True, ('giant', 3): False,
           ('so400m', 4): False, ('huge', 4): False}


def radio_spec(size: str, version: int, align_corners: bool) -> EncoderSpec:
    """A name's spec: 7 registers in v3, 9 in v4, the checkpoint's corner rule, LayerScale in base and large."""
    return RADIO_SPEC.replace(prefix=dict(registers=7 if version == 3 else 9),
                              positions=dict(align_corners=align_corners),
                              block=dict(layer_scale=RADIO_LAYER_SCALE.get(size)))


for (_size, _version), _corners in RADIO_CORNERS.items():
    register_variant(f'vit_{_size}_patch16_radio_v{_version}', VIT, spec=radio_spec(_size, _version, _corners),
                     head=_HEAD, **_PRETRAINED, **RADIO_SIZES[_size])
