"""timm's key layout -> this project's, per backbone family."""
from __future__ import annotations

import re

from einops import rearrange

from ..backbones.coatnet import HEAD_DIM as COATNET_HEAD_DIM
from .dinov2 import dinov2_from_official
from .dinov3 import dinov3_from_timm
from .eva import eva_to_vit, is_eva_layout
from .naflex import naflex_embeds_to_vit
from .rename import heads_first_table, rename_keys, rules
from .swin import swin_from_timm
from .timm_levit_pit import levit_from_timm, pit_from_timm

# timm ViT/DeiT keep prefix tokens and the position table as bare parameters.
_VIT_RENAMES = {'cls_token': 'prefix.cls', 'dist_token': 'prefix.dist', 'reg_token': 'prefix.registers',
                'pos_embed': 'pos_embed.weight'}


# timm's MAP head (AttentionPoolLatent: SigLIP) -> zoo.core.ProbePool: its q / kv / proj fill the attention's slots
_MAP_RULES = rules(r"""
    ^attn_pool\.(q|kv)\.  -> attn_pool.attn.qkv.\1.
    ^attn_pool\.proj\.    -> attn_pool.attn.proj.
""")


def vit_from_timm(state: dict) -> dict:
    state = eva_to_vit(state) if is_eva_layout(state) else state  # timm's RoPE ViTs (its EVA model)
    if 'attn_pool.latent' in state:
        state = rename_keys(state, _MAP_RULES)
    return {_VIT_RENAMES.get(k, k): v for k, v in state.items()}


# CoAtNet (timm's MaxxVit): MBConv conv + BN pairs become ConvBN modules, the early SE their gate.
_MBCONV_RULES = rules(r"""
    \.conv1_1x1\.  -> .conv1.conv.
    \.norm1\.      -> .conv1.norm.
    \.conv2_kxk\.  -> .conv2.conv.
    \.norm2\.      -> .conv2.norm.
    \.se_early\.   -> .conv2.gate.
    \.conv3_1x1\.  -> .conv3.
""")
_COATNET_RULES = rules(r"""
    ^stem\.conv1\.                                  -> stem.conv1.conv.
    ^stem\.norm1\.                                  -> stem.conv1.norm.
    \.norm1\.norm\.                                 -> .norm1.
    \.attn\.rel_pos\.mlp\.                          -> .attn.pos_bias.mlp.
    \.attn\.rel_pos\.relative_position_bias_table$  -> .attn.pos_bias.table
    ^head\.norm\.                                   -> norm.
    ^head\.pre_logits\.fc\.                         -> pre_logits.
    ^head\.fc\.                                     -> head.
""")


def coatnet_from_timm(state: dict) -> dict:
    """timm MaxxVit CoAtNet keys and tensor layouts -> :mod:`zoo.backbones.coatnet`."""
    conv_blocks = tuple({k.split('.conv1_1x1.')[0] + '.' for k in state if '.conv1_1x1.' in k})
    conv_part = {k: v for k, v in state.items() if k.startswith(conv_blocks)}
    state = {**{k: v for k, v in state.items() if k not in conv_part}, **rename_keys(conv_part, _MBCONV_RULES)}
    out = {}
    for key, value in rename_keys(state, _COATNET_RULES).items():
        if re.search(r'\.(attn\.(qkv|proj)|mlp\.fc[12])\.weight$', key) and value.ndim == 4:
            value = value.flatten(1)  # 1x1 conv -> Linear
        if re.search(r'\.attn\.qkv\.(weight|bias)$', key):  # rows '(heads three d)' -> '(three heads d)'
            value = rearrange(value, '(h three d) ... -> (three h d) ...', three=3, d=COATNET_HEAD_DIM)
        if key.endswith('.attn.pos_bias.table'):
            value = heads_first_table(value, key.replace('.attn.pos_bias.', '.attn.rel_pos.relative_position_bias_'))
        out[key] = value
    return out


# CrossViT: timm names the per-branch tables pos_embed_0 / cls_token_0 (the official IBM code pos_embed.0 /
# cls_token.0, otherwise the same keys); the cross-attention's wq/wk/wv are our SeparateQKV's q/k/v.
_CROSSVIT_RULES = rules(r"""
    ^pos_embed[._](\d+)$   -> branches.\1.pos_embed.weight
    ^cls_token[._](\d+)$   -> branches.\1.prefix.cls
    ^patch_embed\.(\d+)\.  -> branches.\1.patch_embed.
    \.attn\.w([qkv])\.     -> .attn.qkv.\1.
""")


def crossvit_from_timm(state: dict) -> dict:
    """timm's or the official CrossViT keys -> :mod:`zoo.backbones.crossvit`."""
    return rename_keys(state, _CROSSVIT_RULES)


FROM_TIMM = {'vit': vit_from_timm, 'coatnet': coatnet_from_timm, 'crossvit': crossvit_from_timm,
             'swin': swin_from_timm, 'pit': pit_from_timm, 'levit': levit_from_timm,
             'dinov2': dinov2_from_official,  # timm's DINOv2 keys are the official ones less mask/registers
             'dinov3': dinov3_from_timm,
             'naflex': lambda state: vit_from_timm(naflex_embeds_to_vit(state))}  # NaFlex: its embeds, then a ViT
