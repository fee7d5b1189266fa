"""NVIDIA's own C-RADIO checkpoints (NVlabs/RADIO, the ``nvidia/C-RADIOv3-*`` / ``C-RADIOv4-*`` files) ->
:mod:`zoo.backbones.radio` (the :mod:`zoo.backbones.vit` family, :func:`radio_from_official`) and
:mod:`zoo.backbones.naflex_radio` (the NaFlex family, :func:`radio_naflex_from_official`).

The layout, as timm's converter (``timm.models.vision_transformer._convert_radio``, timm 1.0.31) reads it: the
backbone under ``radio_model.model.``, with

- ``patch_generator.embedder.weight`` 'd (c ph pw)': a bias-free linear map of flattened patches -> the patch conv's
  weight 'd c ph pw' and a zero bias;
- ``patch_generator.pos_embed`` '1 (128 128) d': the whole CPE table; the ViT brings it to the model's grid on
  loading by the cropping rule (:class:`zoo.core.CroppedPosEmbed`), the NaFlex ViT keeps it whole, '1 128 128 d';
- ``patch_generator.cls_token.token`` '(1 + r) d': the summary token, then the registers;
- ``blocks.N.*``: timm's block keys, LayerScale's ``grandma`` for ``gamma``.

Everything else (the input conditioner's mean / std, the summary indices, the teachers' adaptor heads, other keys
under ``radio_model.model.``) is left out, as timm leaves it out. Only timm's reading of the layout was available
here: no NVIDIA file was opened.
"""
from __future__ import annotations

from einops import rearrange

from .io import CheckpointError
from .layout_error import CheckpointLayoutError
from .rename import rename_keys, rules

PREFIX = 'radio_model.model.'
_RULES = rules(r"""
    ^patch_generator\.pos_embed$          -> pos_embed.weight
    ^(blocks\.\d+\.ls[12])\.grandma$      -> \1.gamma
""")


def is_radio_layout(state: dict) -> bool:
    return f'{PREFIX}patch_generator.embedder.weight' in state


def radio_from_official(state: dict) -> dict:
    """NVIDIA's RADIO layout (see the module docstring) -> this project's ViT keys."""
    if not is_radio_layout(state):
        raise CheckpointError(f"not NVIDIA's RADIO layout (no '{PREFIX}patch_generator.embedder.weight')")
    inner = {k[len(PREFIX):]: v for k, v in state.items() if k.startswith(PREFIX)}
    out = rename_keys({k: v for k, v in inner.items() if k.startswith('blocks.') or k == 'patch_generator.pos_embed'},
                      _RULES)
    embedder = inner['patch_generator.embedder.weight']
    side = round((embedder.shape[1] // 3) ** 0.5)
    if embedder.ndim != 2 or 3 * side * side != embedder.shape[1]:
        raise CheckpointError(f"{PREFIX}patch_generator.embedder.weight: expected 'd (3 p p)' (a linear map of "
                              f"flattened RGB patches), got shape {tuple(embedder.shape)}; the file is not a C-RADIO "
                              f"backbone")
    out['patch_embed.proj.weight'] = rearrange(embedder, 'd (c ph pw) -> d c ph pw', c=3, ph=side)
    out['patch_embed.proj.bias'] = embedder.new_zeros(embedder.shape[0])
    tokens_key = 'patch_generator.cls_token.token'
    if tokens_key in inner:
        tokens = inner[tokens_key]
        out['prefix.cls'], out['prefix.registers'] = tokens[None, :1], tokens[None, 1:]
    return out


def radio_naflex_from_official(state: dict) -> dict:
    """NVIDIA's RADIO layout -> :mod:`zoo.backbones.naflex_radio`'s keys: :func:`radio_from_official`'s, with the
    patch map as NaFlex's Linear over each patch's (row, column, channel) values, 'd (ph pw c)', and the table
    '1 (h w) d' as its square grid '1 h w d'."""
    out = radio_from_official(state)
    out['patch_embed.proj.weight'] = rearrange(out['patch_embed.proj.weight'], 'd c ph pw -> d (ph pw c)')
    if 'pos_embed.weight' in out:
        table = out['pos_embed.weight']
        side = round(table.shape[1] ** 0.5) if table.ndim == 3 else 0
        if table.ndim != 3 or side * side != table.shape[1]:
            raise CheckpointLayoutError(f'{PREFIX}patch_generator.pos_embed', f"expected a square table '1 (h w) d', "
                                        f"got shape {tuple(table.shape)}", "Use NVIDIA's C-RADIO file as released "
                                        "(its table is 128 x 128 positions)")
        out['pos_embed.weight'] = rearrange(table, '1 (h w) d -> 1 h w d', h=side)
    return out
