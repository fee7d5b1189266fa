"""Swin Transformer V1 (Liu et al. 2021) and V2 (Liu et al. 2022) on the shared core.

Patch partition (4x4 conv) + LayerNorm, then four stages at strides 4, 8, 16, 32; each stage after the first starts
with patch merging (2x2 neighbours concatenated, Linear to twice the width). Blocks are :class:`zoo.core.Block` with
:class:`zoo.core.ShiftedWindowAttention` (the core Attention, windows as the batch; every other block shifted):

- V1: pre-norm blocks, scaled dot product, a learned relative position bias per window (:class:`zoo.core.RelPosBias`,
  resized when the window differs from the one it was built for);
- V2: residual post-norm blocks (``norm_placement='res_post'``), cosine attention with a learned per-head logit scale
  (:class:`CosineWindowAttention`: the core's :class:`zoo.core.similarity.CosineSimilarity` mixed into the window
  attention, its ``attn.logit_scale`` as timm's), the continuous log-spaced position bias
  (:class:`zoo.core.RelPosMlp`, ``mode='swin'``), q and v biases without a key bias (:class:`zoo.core.QVBiasQKV`),
  LayerNorm after the merging Linear.

Any input size: the image is zero-padded at the bottom/right to a multiple of the patch size, each block pads its
map to window multiples and crops back, merging pads odd sides, so map i is ceil(H / 2^(i+2)) x ceil(W / 2^(i+2));
a window larger than the map shrinks to it (no shift on that side), as timm built for that size does.

Keys are timm's except ``attn.pos_bias.*`` (V1 ``relative_position_bias_table``, V2 ``cpb_mlp``), ``attn.qkv.q_bias``
/ ``v_bias`` and ``head``; :mod:`zoo.weights.swin` converts timm's and the official (microsoft/Swin-Transformer)
layouts. Numerically timm's ``SwinTransformer`` / ``SwinTransformerV2`` given the same weights.
"""
from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from ..contract import Backbone, Taps
from ..core import (
    Block,
    FusedQKV,
    Mlp,
    PatchEmbed,
    QVBiasQKV,
    RelPosBias,
    RelPosMlp,
    ShiftedWindowAttention,
    init_linear,
)
from ..core.similarity import CosineSimilarity
from ..registry import register_variant
from .common import drop_path_rates, pair, run_blocks, select_taps
from .inputs import check_images


def stage_windows(window, stages: int) -> list[tuple[int, int]]:
    """One (h, w) window per stage from an int or (h, w) for all stages, or a list with one per stage."""
    if isinstance(window, int) or (len(window) == 2 and all(isinstance(w, int) for w in window)):
        return [pair(window)] * stages
    if len(window) != stages:
        raise ValueError(f"window must be an int, (h, w), or one per stage ({stages}), got {window!r}")
    return [pair(w) for w in window]


class CosineWindowAttention(CosineSimilarity, ShiftedWindowAttention):
    """Swin V2's attention: shifted windows, cosine similarity with a learned per-head logit scale."""


class PatchMerging(nn.Module):
    """'b h w c -> b ceil(h/2) ceil(w/2) d': each 2x2 neighbourhood concatenated ('(w2 h2 c)', odd sides zero-padded),
    LayerNorm then a Linear without bias (V1), or the Linear then the LayerNorm (V2, ``norm_after``)."""

    def __init__(self, dim: int, out_dim: int, norm_after: bool = False):
        super().__init__()
        self.norm_after = norm_after
        self.reduction = nn.Linear(4 * dim, out_dim, bias=False)
        self.norm = nn.LayerNorm(out_dim if norm_after else 4 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[1:3]
        if h % 2 or w % 2:
            x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
        x = rearrange(x, 'b (h h2) (w w2) c -> b h w (w2 h2 c)', h2=2, w2=2)
        return self.norm(self.reduction(x)) if self.norm_after else self.reduction(self.norm(x))


class SwinStage(nn.Module):
    """'b h w c -> b h' w' d': patch merging (all stages but the first), then ``depth`` window-attention blocks,
    the odd ones shifted."""

    def __init__(self, in_dim: int, dim: int, depth: int, num_heads: int, window, *, downsample: bool,
                 v2: bool = False, pretrained_window=None, mlp_ratio: float = 4.0, qkv_bias: bool = True,
                 proj_drop: float = 0.0, attn_drop: float = 0.0, drop_paths=(), pad_first: bool = False):
        super().__init__()
        self.downsample = PatchMerging(in_dim, dim, norm_after=v2) if downsample else nn.Identity()

        def attention(shifted: bool) -> ShiftedWindowAttention:
            if v2:
                qkv = QVBiasQKV(dim) if qkv_bias else FusedQKV(dim, bias=False)
                bias = RelPosMlp(num_heads, 512, drop=0.0, mode='swin', pretrained_window=pretrained_window)
                kind = CosineWindowAttention
            else:
                bias = RelPosBias(window, num_heads)
                qkv, kind = FusedQKV(dim, bias=qkv_bias), ShiftedWindowAttention
            return kind(dim, num_heads, window, shifted, pad_first=pad_first, qkv=qkv, pos_bias=bias,
                        attn_drop=attn_drop, proj_drop=proj_drop)

        self.blocks = nn.ModuleList(
            Block(dim, attention(j % 2 == 1), Mlp(dim, int(dim * mlp_ratio), drop=proj_drop), norm_layer=nn.LayerNorm,
                  drop_path=drop_paths[j], norm_placement='res_post' if v2 else 'pre')
            for j in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.downsample(x)
        grid = tuple(x.shape[1:3])
        tokens = rearrange(x, 'b h w c -> b (h w) c')
        tokens = run_blocks(self.blocks, tokens, grid)
        return rearrange(tokens, 'b (h w) c -> b h w c', h=grid[0], w=grid[1])


class SwinEncoder(nn.Module):
    """Patch embedding and stages; ``forward_stages`` returns each stage's map 'b h w c'.

    ``version`` 1 or 2; ``window``: one window side (or (h, w)) for every stage, or one per stage;
    ``pretrained_windows``: V2's per-stage window the position MLP was trained with (0: the window itself).
    ``window_layout``: 'timm' (roll then pad, windows shrunk to small maps: timm, the classifiers) or 'mmseg' (pad to
    window multiples then roll, the built window everywhere: mmseg, the official segmentation / detection code,
    transformers' ``SwinBackbone`` inside UperNet and Mask2Former); :mod:`zoo.core.windows` says where they differ.
    Weights keep the outputs they were trained with only in their own layout.
    """
    window_layouts = ('timm', 'mmseg')
    family = 'swin'
    classifier_only = ('norm.', 'head.')

    def __init__(self, img_size: int | tuple[int, int] = 224, patch_size: int = 4, in_chans: int = 3,
                 embed_dim: int = 96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), window=7, version: int = 1,
                 pretrained_windows=(0, 0, 0, 0), mlp_ratio: float = 4.0, qkv_bias: bool = True,
                 proj_drop_rate: float = 0.0, attn_drop_rate: float = 0.0, drop_path_rate: float = 0.0,
                 window_layout: str = 'timm'):
        super().__init__()
        if window_layout not in self.window_layouts:
            raise ValueError(f"window_layout must be one of {self.window_layouts}, got {window_layout!r}")
        if version not in (1, 2):
            raise ValueError(f"Swin version must be 1 or 2, got {version!r}")
        if len(num_heads) != len(depths):
            raise ValueError(f"num_heads {tuple(num_heads)} needs one entry per stage of depths {tuple(depths)}")
        stages = len(depths)
        windows = stage_windows(window, stages)
        self.patch_size, self.in_chans, self.img_size = patch_size, in_chans, pair(img_size)
        self.dims = [embed_dim * 2 ** i for i in range(stages)]
        self.strides = [patch_size * 2 ** i for i in range(stages)]
        self.patch_embed = PatchEmbed(patch_size, in_chans, embed_dim, norm_layer=nn.LayerNorm)
        rates = drop_path_rates(drop_path_rate, list(depths))
        self.layers = nn.ModuleList(
            SwinStage(self.dims[max(i - 1, 0)], self.dims[i], depths[i], num_heads[i], windows[i], downsample=i > 0,
                      v2=version == 2, pretrained_window=pair(pretrained_windows[i]) if pretrained_windows[i] else None,
                      mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, proj_drop=proj_drop_rate, attn_drop=attn_drop_rate,
                      drop_paths=rates[i], pad_first=window_layout == 'mmseg')
            for i in range(stages))
        self.apply(init_linear)
        if version == 2:  # residual post-norms start at zero: each block starts as the identity (as timm)
            for stage in self.layers:
                for block in stage.blocks:
                    for norm in (block.norm1, block.norm2):
                        nn.init.zeros_(norm.weight)
                        nn.init.zeros_(norm.bias)

    @property
    def min_input_size(self) -> int:
        """The smallest input side: one patch (smaller maps are padded, merging rounds up)."""
        return self.patch_size

    def forward_stages(self, x: torch.Tensor) -> list[torch.Tensor]:
        """'b c H W' -> the map of each built stage 'b ceil(H/s) ceil(W/s) c_i' (channels last)."""
        check_images(self, x)
        p = self.patch_size
        if x.shape[-2] % p or x.shape[-1] % p:  # bottom/right zero padding to whole patches
            x = F.pad(x, (0, -x.shape[-1] % p, 0, -x.shape[-2] % p))
        tokens, grid = self.patch_embed(x)
        fmap = rearrange(tokens, 'b (h w) c -> b h w c', h=grid[0], w=grid[1])
        maps = []
        for stage in self.layers:
            fmap = stage(fmap)
            maps.append(fmap)
        return maps


class SwinClassifier(SwinEncoder):
    """LayerNorm on the last map, average pool, dropout, Linear."""

    def __init__(self, num_classes: int = 1000, drop_rate: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.norm = nn.LayerNorm(self.dims[-1])
        self.head_drop = nn.Dropout(drop_rate) if drop_rate else nn.Identity()
        self.head = nn.Linear(self.dims[-1], num_classes) if num_classes else nn.Identity()
        init_linear(self.head)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """'b c H W -> b d' pooled features before the classifier."""
        return self.norm(self.forward_stages(x)[-1]).mean((1, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.head_drop(self.forward_features(x)))


class SwinBackbone(SwinEncoder, Backbone):
    """Swin as a dense backbone (:mod:`zoo.contract`): the stage maps in ``out_indices`` (default all four, strides
    4, 8, 16, 32), each through a LayerNorm of its own (``out_norms``, as mmseg; not in classifier checkpoints, so left
    at their initialisation when one loads). No prefix tokens. Stages after the last tap are dropped."""
    prefix_names: list[str] = []
    # Parameters a classifier checkpoint does not have: left at their initialisation when one loads.
    backbone_only = ('out_norms.',)

    def __init__(self, out_indices=None, out_norms: bool = True, **kwargs):
        super().__init__(**kwargs)
        taps = select_taps(self, out_indices, (0, 1, 2, 3), self.layers, self.dims, self.strides, 'stage')
        self.out_norms = nn.ModuleList(nn.LayerNorm(self.dims[i]) for i in taps) if out_norms else None

    def forward_taps(self, x: torch.Tensor) -> Taps:
        maps = self.forward_stages(x)
        taps = [maps[i] for i in self.out_indices]
        if self.out_norms is not None:
            taps = [norm(m) for norm, m in zip(self.out_norms, taps)]
        return Taps([m.permute(0, 3, 1, 2) for m in taps], None)  # 'b h w c -> b c h w' (channels-last strides)


SWIN = {'backbone': SwinBackbone, 'classifier': SwinClassifier}
SIZES = {'tiny': dict(embed_dim=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24)),
         'small': dict(embed_dim=96, depths=(2, 2, 18, 2), num_heads=(3, 6, 12, 24)),
         'base': dict(embed_dim=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32)),
         'large': dict(embed_dim=192, depths=(2, 2, 18, 2), num_heads=(6, 12, 24, 48))}
#: timm's names. Each says its size, window and input size; ``window12to16_192to256`` is a model pre-trained with
#: window 12 at 192 and fine-tuned with window 16 at 256 (its pre-training windows: 12, capped by each stage's map).
SWIN_NAMES = """
    swin_tiny_patch4_window7_224  swin_small_patch4_window7_224  swin_base_patch4_window7_224
    swin_base_patch4_window12_384  swin_large_patch4_window7_224  swin_large_patch4_window12_384
    swinv2_tiny_window8_256  swinv2_tiny_window16_256  swinv2_small_window8_256  swinv2_small_window16_256
    swinv2_base_window8_256  swinv2_base_window16_256  swinv2_base_window12_192  swinv2_large_window12_192
    swinv2_base_window12to16_192to256  swinv2_base_window12to24_192to384
    swinv2_large_window12to16_192to256  swinv2_large_window12to24_192to384
""".split()
_NAME = re.compile(r'swin(?P<v2>v2)?_(?P<size>tiny|small|base|large)_(patch4_)?window((?P<pre_window>\d+)to)?'
                   r'(?P<window>\d+)_((?P<pre_size>\d+)to)?(?P<input>\d+)$')


def _options(name: str) -> dict:
    """Input size and model options from a timm Swin name (see :data:`SWIN_NAMES`)."""
    m = _NAME.match(name)
    options = dict(SIZES[m['size']], window=int(m['window']), version=2 if m['v2'] else 1,
                   input_size=int(m['input']))
    if m['pre_window']:  # stage i's map in pre-training: pre_size / (4 * 2^i)
        options['pretrained_windows'] = tuple(min(int(m['pre_window']), int(m['pre_size']) // (4 << i))
                                              for i in range(4))
    return options


for _name in SWIN_NAMES:  # the 192 ones are ImageNet-22k classifiers (21841 classes)
    register_variant(_name, SWIN, num_classes=21841 if _name.endswith('_192') else 1000, **_options(_name))
