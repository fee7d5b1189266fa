"""mmsegmentation's whole DPT segmentor -> :class:`heads.models.Segmentor`, and telling it from this project's
layout.

mmseg's DPT (``EncoderDecoder`` with ``DPTHead``, ``mmseg/models/decode_heads/dpt_head.py``) keeps the whole neck
in its decode head; the published checkpoints (``dpt_vit-b16_512x512_160k_ade20k-db31cf52.pth``) are
``{'meta': {...}, 'state_dict': {...}}`` with ``backbone.*`` mmseg's ViT (:mod:`zoo.weights.mmseg`) and

- ``decode_head.reassemble_blocks.readout_projects.{i}.0`` (Linear 2d -> d) -> ``neck.reassemble.{i}.readout.project.0``
- ``decode_head.reassemble_blocks.projects.{i}.conv`` (1x1) -> ``neck.reassemble.{i}.proj``
- ``decode_head.reassemble_blocks.resize_layers.{i}`` (i = 0, 1, 3) -> ``neck.reassemble.{i}.resample``
- ``decode_head.convs.{i}.conv`` (3x3, no bias) -> ``neck.convs.{i}``
- ``decode_head.fusion_blocks.{i}.res_conv_unit{j}.conv{k}.conv`` / ``.bn`` -> ``neck.fusion.{i}.res{j}.conv{k}`` /
  ``.bn{k}``
- ``decode_head.fusion_blocks.{i}.project.conv`` (1x1) -> ``neck.fusion.{i}.proj``
- ``decode_head.project.conv`` / ``.bn`` (3x3 + BN + ReLU) -> ``decode_head.head.0`` / ``.head.1``
- ``decode_head.conv_seg`` (1x1 classifier) -> ``decode_head.head.4``

mmseg's deepest fusion block has no ``res_conv_unit1`` (it never has a skip input): the neck here matches with
``deepest_skip_unit=False``. Shapes are stored as here (conv 'o i kh kw', transposed conv 'i o k k', BN
``num_batches_tracked`` a 0-d int64).

Detection (:func:`is_mmseg_dpt`) reads names this project's task models never have: mmseg's ViT block and patch
projection names (``backbone.layers.{i}.ln1`` / ``attn.attn`` / ``ffn.layers``, ``backbone.patch_embed.projection``;
a bare ``backbone.layers.`` prefix is not one: Swin's stages are ``backbone.layers.{i}.blocks``) and its DPT head's
(``decode_head.reassemble_blocks`` / ``convs`` / ``fusion_blocks``; not ``conv_seg``, every mmseg head's classifier and
this project's UperNet heads' too). A state with such names and keys of neither mmseg's DPT nor ours is refused
(:class:`MixedLayoutError`), never half converted. mmseg's UperNet (Swin) is told apart first
(:mod:`.mmseg_upernet`).
"""
from __future__ import annotations

import re

from zoo.weights import CheckpointError, CheckpointMismatchError
from zoo.weights.mmseg import VIT_RULES, vit_from_mmseg
from zoo.weights.rename import rename_keys, rules

from .mmseg_upernet import is_mmseg_upernet, upernet_from_mmseg

_DPT_HEAD_RULES = rules(r"""
    ^reassemble_blocks\.readout_projects\.(\d+)\.0\.            -> neck.reassemble.\1.readout.project.0.
    ^reassemble_blocks\.projects\.(\d+)\.conv\.                 -> neck.reassemble.\1.proj.
    ^reassemble_blocks\.resize_layers\.(\d+)\.                  -> neck.reassemble.\1.resample.
    ^convs\.(\d+)\.conv\.                                       -> neck.convs.\1.
    ^fusion_blocks\.(\d+)\.res_conv_unit(\d)\.conv(\d)\.conv\.  -> neck.fusion.\1.res\2.conv\3.
    ^fusion_blocks\.(\d+)\.res_conv_unit(\d)\.conv(\d)\.bn\.    -> neck.fusion.\1.res\2.bn\3.
    ^fusion_blocks\.(\d+)\.project\.conv\.                      -> neck.fusion.\1.proj.
    ^project\.conv\.                                            -> decode_head.head.0.
    ^project\.bn\.                                              -> decode_head.head.1.
    ^conv_seg\.                                                 -> decode_head.head.4.
""")
#: Names only mmseg's DPT checkpoints have: its ViT's block parts and patch projection, its DPT head's own modules.
_SIGNATURE = re.compile(r'^backbone\.(layers\.\d+\.(ln[12]|attn\.attn|ffn\.layers)|patch_embed\.projection)\.'
                        r'|^decode_head\.(reassemble_blocks|convs|fusion_blocks)\.')
#: The names a whole mmseg DPT segmentor has: under each part, those its rules convert.
_OWN = {'backbone.': [re.compile(p) for p, _ in VIT_RULES],
        'decode_head.': [re.compile(p) for p, _ in _DPT_HEAD_RULES]}
_PATCH_BIAS = 'backbone.patch_embed.proj.bias'


def dpt_from_mmseg(state: dict) -> dict:
    """A whole mmseg DPT segmentor's keys -> :class:`heads.models.Segmentor`'s (see the module docstring).
    Keys of neither part are kept as they are (and reported as not in the model when loaded)."""
    def part(prefix: str) -> dict:
        return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    rest = {k: v for k, v in state.items() if not k.startswith(('backbone.', 'decode_head.'))}
    return {**{f'backbone.{k}': v for k, v in rename_keys(part('backbone.'), VIT_RULES).items()},
            **rename_keys(part('decode_head.'), _DPT_HEAD_RULES), **rest}


class MixedLayoutError(CheckpointError):
    """A state dict with mmseg DPT names beside keys mmseg's DPT does not have: neither layout cleanly."""


def _is_mmsegs(key: str) -> bool:
    """Whether ``key`` is one of the names a whole mmseg DPT segmentor's state dict has."""
    return any(key.startswith(part) and any(p.search(key[len(part):]) for p in rules) for part, rules in _OWN.items())


def is_mmseg_dpt(state, name: str = 'state dict') -> bool:
    """Whether a (unwrapped) state dict is a whole mmseg DPT model: it has mmseg's own names, and nothing else.
    Raises :class:`MixedLayoutError` (naming ``name`` and the keys) for mmseg names mixed with other keys."""
    signature = [k for k in state if isinstance(k, str) and _SIGNATURE.search(k)]
    if not signature:
        return False
    other = [k for k in state if not (isinstance(k, str) and _is_mmsegs(k))]
    if other:
        raise MixedLayoutError(
            f"{name}: neither this project's layout nor mmseg's DPT: it has mmseg DPT keys ({len(signature)}, e.g. "
            f"{', '.join(signature[:3])}) and {len(other)} keys an mmseg DPT does not have (e.g. "
            f"{', '.join(map(str, other[:5]))}); nothing was loaded. Load a checkpoint written by one of the two "
            f"(an mmseg EncoderDecoder with DPTHead, or training here), or convert the keys first")
    return True


def from_mmseg(state: dict, family: str | None) -> dict:
    """The 'mmseg' layout converter: a whole task model (``family`` None: DPT, or UperNet with a Swin backbone,
    :mod:`.mmseg_upernet`) or a ViT backbone."""
    if family is None:
        if is_mmseg_upernet(state):
            return upernet_from_mmseg(state)
        if not is_mmseg_dpt(state):
            raise CheckpointError("no mmseg DPT keys (backbone.layers.{i}.ln1 / attn.attn / ffn.layers, "
                                  "decode_head.reassemble_blocks / convs / fusion_blocks / conv_seg): not an mmseg DPT")
        return dpt_from_mmseg(state)
    if family != 'vit':
        raise CheckpointError(f"no mmseg layout converter for the {family!r} family")
    return vit_from_mmseg(state)


def check_patch_bias(state: dict, model) -> None:
    """mmseg 0.x trained its ViT with a patch-embedding bias (the published DPT checkpoints have one), 1.x builds it
    without: say which option makes a model take such a checkpoint whole (converted ``state``, model's keys)."""
    keys = model.state_dict()
    if _PATCH_BIAS in state and _PATCH_BIAS not in keys and 'backbone.patch_embed.proj.weight' in keys:
        raise CheckpointMismatchError(
            f"this mmseg checkpoint's ViT has a patch-embedding bias ({_PATCH_BIAS}, as mmseg 0.x trained it) but "
            f"the model was built without one (patch_bias=False, mmseg 1.x's ViT); to evaluate the checkpoint as "
            f"it was trained, build with --cfg-options model.backbone.patch_bias=True")


def is_mmseg_segmentor(state, name: str = 'state dict') -> bool:
    """Whether ``state`` is a whole mmseg segmentor: an UperNet with its Swin (:mod:`.mmseg_upernet`, told first), or
    a DPT (:func:`is_mmseg_dpt`, which refuses mmseg DPT names mixed with others, naming ``name``)."""
    return is_mmseg_upernet(state) or is_mmseg_dpt(state, name)


def segmentor_from_mmseg(state: dict, model) -> dict:
    """A whole mmseg segmentor's keys -> ``model``'s: an UperNet (Swin) as :func:`upernet_from_mmseg`, a DPT as
    :func:`dpt_from_mmseg` and refused (:func:`check_patch_bias`) when ``model`` lacks the patch bias it has."""
    if is_mmseg_upernet(state):
        return upernet_from_mmseg(state)
    state = dpt_from_mmseg(state)
    check_patch_bias(state, model)
    return state
