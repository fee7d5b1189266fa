"""Vision Transformer (Dosovitskiy et al. 2021): patch tokens, prefix tokens, learned positions, blocks.

Keys follow timm's layout except the prefix tokens (``prefix.cls``/``dist``/``registers``) and the
position table (``pos_embed.weight``); :mod:`zoo.weights` converts timm checkpoints.
"""
from __future__ import annotations

from functools import partial

import torch
from einops import rearrange
from torch import nn

from ..contract import Backbone, Taps
from ..core import (
    AttentionPool,
    Block,
    CroppedPosEmbed,
    LearnedPosEmbed,
    Mlp,
    PatchEmbed,
    PrefixTokens,
    PreNormLinear,
    SinCosPosEmbed,
    init_linear,
)
from ..core.alibi import make_alibi
from ..core.attention import Attention
from ..core.layers import activation_layer
from ..core.pooling import ProbePool
from ..core.qkv import FusedQKV, QVBiasQKV
from ..core.rope import make_rope
from ..registry import HALF_MEAN, HALF_STD, IMAGENET_MEAN, IMAGENET_STD, register_variant
from .common import pair, select_taps
from .inputs import check_images

#: the norm kinds of ``ViTEncoder(norm=...)``
NORMS = {'layer': nn.LayerNorm, 'rms': nn.RMSNorm}


def default_taps(depth: int) -> tuple[int, ...]:
    """Four evenly spaced block indices: (2, 5, 8, 11) for 12 blocks, (5, 11, 17, 23) for 24; every block when
    there are fewer than four."""
    step = max(depth // 4, 1)
    return tuple(sorted({min(step * (i + 1), depth) - 1 for i in range(4)}))


class ViTEncoder(nn.Module):
    """Patch embedding, prefix tokens, positional encoding and a stack of :class:`zoo.core.Block`.

    pos_embed: 'learned' (resampled to each input's grid), 'cropped' (a learned table on the patch tokens, resampled
    to the square of the grid's larger side and cropped top-left, :class:`zoo.core.CroppedPosEmbed`; RADIO),
    'sincos' (fixed 2-D) or 'none'; pos_align_corners: the corner rule of the 'cropped' table's bilinear resampling;
    pos_embed_prefix: the learned table also covers the prefix tokens (timm's ``no_embed_class=False``);
    rope: 2-D rotary positions in every attention, ``dict(kind='axial' | 'mixed', ...)`` (zoo.core.rope.make_rope);
    alibi: 2-D ALiBi bias in every attention, True or ``dict(metric=...)`` (:func:`zoo.core.alibi.make_alibi`);
    key_bias: False for learned q and v biases only (EVA, timm's RoPE ViTs; :class:`zoo.core.qkv.QVBiasQKV`);
    patch_bias: the patch-embedding conv has a bias (timm); without it (mmseg 1.x's ViT) a checkpoint's
    ``patch_embed.proj.bias`` is dropped on loading, as mmseg drops it.
    swiglu: SwiGLU MLPs (:class:`zoo.core.Mlp` ``gated`` with SiLU, DINOv2 giant), hidden width embed_dim * mlp_ratio.
    act: the MLPs' activation, a name of :data:`zoo.core.ACTIVATIONS` ('quick_gelu' for OpenAI's CLIP towers);
    pre_norm: a LayerNorm on the tokens before the blocks (``norm_pre``, CLIP's ``ln_pre``; timm's ``pre_norm``).
    mlp_norm: a LayerNorm on the MLPs' hidden width before fc2 (the :class:`zoo.core.Mlp` ``norm`` part; EVA-02,
    timm's ``scale_mlp``);
    attn_norm: a LayerNorm on the heads' output before the attention's projection (its ``proj`` part a
    :class:`zoo.core.PreNormLinear`; EVA-02 CLIP, timm's ``scale_attn_inner``);
    norm_placement: the blocks' norms (:data:`zoo.core.block.NORM_PLACEMENTS`), 'post' with ``post_norm``, else 'pre'
    unless given ('res_post': EVA-02 CLIP enormous).
    norm: every norm's kind, 'layer' (LayerNorm) or 'rms' (RMSNorm: no centring, no bias; AIMv2), eps ``norm_eps``;
    patch_norm: a norm on the patch tokens before the positions are added (timm's ``embed_norm_layer``; AIMv2);
    proj_bias: the attention's output projection and the MLPs' Linears have biases (timm's ``proj_bias``; AIMv2 none).
    drop_remainder: the input's last rows / columns that the patches do not tile are dropped (what timm's strided
    conv does; SigLIP so400m/14 at 384 px reads 27 x 27 patches of 378 px); else such an input is refused.
    """
    family = 'vit'
    classifier_only = ('norm.', 'fc_norm.', 'attn_pool.', 'head.', 'head_dist.')

    def __init__(self, img_size: int | tuple[int, int] = 224, patch_size: int = 16, in_chans: int = 3,
                 embed_dim: int = 768, depth: int = 12, num_heads: int = 12, mlp_ratio: float = 4.0,
                 qkv_bias: bool = True, class_token: bool = True, dist_token: bool = False, reg_tokens: int = 0,
                 pos_embed: str = 'learned', pos_embed_prefix: bool = True, pos_interp: str = 'bicubic',
                 pos_antialias: bool = True, pos_align_corners: bool = False, init_values: float | None = None,
                 post_norm: bool = False,
                 norm_eps: float = 1e-6, patch_bias: bool = True, rope: dict | None = None,
                 alibi: dict | bool | None = None, key_bias: bool = True,
                 drop_rate: float = 0.0, attn_drop_rate: float = 0.0, drop_path_rate: float = 0.0,
                 swiglu: bool = False, act: str = 'gelu', pre_norm: bool = False, mlp_norm: bool = False,
                 attn_norm: bool = False, norm_placement: str | None = None, norm: str = 'layer',
                 patch_norm: bool = False, proj_bias: bool = True, drop_remainder: bool = False):
        super().__init__()
        img_size = pair(img_size)
        self.embed_dim, self.patch_size, self.depth, self.in_chans = embed_dim, patch_size, depth, in_chans
        self.num_heads, self.drop_remainder = num_heads, drop_remainder
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {sorted(NORMS)}, got {norm!r}")
        self.norm_layer = norm_layer = partial(NORMS[norm], eps=norm_eps)
        self.patch_embed = PatchEmbed(patch_size, in_chans, embed_dim, bias=patch_bias,
                                      norm_layer=norm_layer if patch_norm else None)
        if not patch_bias:  # checkpoint keys load_pretrained drops when present (zoo.weights.load)
            self.ignored_checkpoint_keys = ('patch_embed.proj.bias',)
        self.prefix = PrefixTokens(embed_dim, cls=class_token, dist=dist_token, registers=reg_tokens)
        grid = (img_size[0] // patch_size, img_size[1] // patch_size)
        if pos_embed == 'learned':
            self.pos_embed = LearnedPosEmbed(grid, embed_dim, len(self.prefix) if pos_embed_prefix else 0,
                                             mode=pos_interp, antialias=pos_antialias)
        elif pos_embed == 'cropped':
            self.pos_embed = CroppedPosEmbed(grid, embed_dim, align_corners=pos_align_corners)
        elif pos_embed == 'sincos':
            self.pos_embed = SinCosPosEmbed(embed_dim)
        elif pos_embed == 'none':
            self.pos_embed = None
        else:
            raise ValueError(f"pos_embed must be 'learned', 'cropped', 'sincos' or 'none', got {pos_embed!r}")
        self.pos_drop = nn.Dropout(drop_rate) if drop_rate else nn.Identity()
        self.norm_pre = norm_layer(embed_dim) if pre_norm else nn.Identity()
        rates = [drop_path_rate * i / max(depth - 1, 1) for i in range(depth)]  # stochastic depth rule
        mlp_act = dict(act_layer=nn.SiLU, gated=True) if swiglu else dict(act_layer=activation_layer(act))
        hidden = int(embed_dim * mlp_ratio)
        self.blocks = nn.ModuleList(
            Block(embed_dim, num_heads, mlp_ratio, qkv_bias=qkv_bias, norm_layer=norm_layer, drop=drop_rate,
                  attn_drop=attn_drop_rate, drop_path=rate, init_values=init_values,
                  norm_placement=norm_placement or ('post' if post_norm else 'pre'),
                  attn=self._position_attention(rope, alibi, qkv_bias, key_bias, attn_drop_rate, drop_rate,
                                                norm_layer if attn_norm else None, proj_bias),
                  mlp=Mlp(embed_dim, hidden, drop=drop_rate, norm=norm_layer(hidden) if mlp_norm else None,
                          bias=proj_bias, **mlp_act) if mlp_norm or not proj_bias else None,
                  act_layer=mlp_act['act_layer'], gated_mlp=swiglu)
            for rate in rates)
        self.apply(init_linear)

    def _position_attention(self, rope, alibi, qkv_bias, key_bias, attn_drop, proj_drop,
                            proj_norm=None, proj_bias: bool = True) -> Attention | None:
        """A block's attention with rotary positions, ALiBi, no k bias, a norm before its projection
        (``proj_norm``, a norm class) or a bias-free projection; None (the block's default) otherwise."""
        if rope is None and not alibi and (key_bias or not qkv_bias) and proj_norm is None and proj_bias:
            return None
        heads = self.num_heads
        qkv = QVBiasQKV(self.embed_dim) if qkv_bias and not key_bias else None
        # the parts built in this order (q/v-bias projection, rope, ALiBi, fused projection): seeded inits as ever
        rope, pos_bias = make_rope(rope, self.embed_dim // heads, heads), make_alibi(alibi, heads, len(self.prefix))
        qkv = FusedQKV(self.embed_dim, bias=qkv_bias) if qkv is None else qkv
        proj = None if proj_norm is None else PreNormLinear(self.embed_dim, self.embed_dim, proj_norm(self.embed_dim))
        proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False) if proj is None and not proj_bias else proj
        return Attention(self.embed_dim, heads, qkv=qkv, rope=rope, pos_bias=pos_bias, proj=proj, attn_drop=attn_drop,
                         proj_drop=proj_drop)

    @property
    def min_input_size(self) -> int:
        """The smallest input side: one patch."""
        return self.patch_size

    @property
    def num_prefix_tokens(self) -> int:
        return len(self.prefix)

    @property
    def prefix_names(self) -> list[str]:
        return self.prefix.names

    def embed(self, x: torch.Tensor):
        """'b c H W -> b (p + h w) d' with positions added; also returns the grid (h, w)."""
        check_images(self, x)
        if self.drop_remainder:  # 'b c H W -> b c (h p) (w p)': the untiled last rows / columns go
            p = self.patch_size
            x = x[..., :x.shape[-2] // p * p, :x.shape[-1] // p * p]
        x, grid = self.patch_embed(x)
        return self.add_prefix_and_positions(x, grid), grid

    def add_prefix_and_positions(self, x: torch.Tensor, grid) -> torch.Tensor:
        """Patch tokens 'b (h w) d' -> 'b (p + h w) d': prefix tokens prepended, positions added, dropout, then the
        pre-norm (``pre_norm``)."""
        if self.pos_embed is None:
            x = self.prefix(x)
        elif self.pos_embed.num_prefix:
            x = self.prefix(x) + self.pos_embed(grid)
        else:
            x = self.prefix(x + self.pos_embed(grid))
        return self.norm_pre(self.pos_drop(x))

    def run_blocks(self, x: torch.Tensor, grid, taps=(), stop: int | None = None):
        """Blocks 0..stop-1 on tokens 'b n d'; returns the last tokens and those after each tap index."""
        tapped = []
        for i, block in enumerate(self.blocks[:stop]):
            x = block(x, grid)
            if i in taps:
                tapped.append(x)
        return x, tapped

    def attention_maps(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Softmax weights 'b heads n n' of every block, from the explicit attention path."""
        x, grid = self.embed(x)
        maps = []
        for block in self.blocks:
            x, attn = block(x, grid, return_attn=True)
            maps.append(attn)
        return maps


class ViTClassifier(ViTEncoder):
    """ViT with final norm, pooling ('token' = first prefix token, 'avg' = mean of patch tokens, 'attention' = a
    learned query attending over itself and the patch tokens, :class:`zoo.core.AttentionPool`; 'map' = a learned
    probe attending over the patch tokens, then a residual MLP, :class:`zoo.core.ProbePool`, SigLIP's MAP head with
    the blocks' MLP width and activation) and head. ``pool_heads`` / ``pool_mlp_ratio``: the pooling's heads and
    MLP width ratio when they are not the blocks' (Perception Encoder's MAP head: 8 heads, ratio 4);
    ``pool_prefix``: 'avg' and the attention pools read the prefix tokens too (PE's MAP head reads the CLS token).

    As in timm, 'avg' (and 'attention') pooling normalises after pooling (``fc_norm``) instead of before (``norm``);
    ``fc_norm=False`` normalises the tokens before 'avg' pooling instead (SigLIP's ``_gap_`` towers). 'map' normalises
    the tokens before pooling. ``final_norm=False`` normalises neither (Perception Encoder's lang and spatial towers:
    the mean of the last block's patch tokens).
    """

    def __init__(self, num_classes: int = 1000, global_pool: str = 'token', head_drop: float = 0.0,
                 fc_norm: bool | None = None, final_norm: bool = True, pool_heads: int | None = None,
                 pool_mlp_ratio: float | None = None, pool_prefix: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.pool_prefix = pool_prefix
        if global_pool not in ('token', 'avg', 'attention', 'map'):
            raise ValueError(f"global_pool must be 'token', 'avg', 'attention' or 'map', got {global_pool!r}")
        if global_pool == 'token' and not self.num_prefix_tokens:
            raise ValueError("global_pool='token' needs a prefix token; use class_token=True or global_pool='avg'")
        self.global_pool, self.num_classes = global_pool, num_classes
        norm = self.norm_layer
        fc_norm = global_pool in ('avg', 'attention') if fc_norm is None else fc_norm
        self.norm = nn.Identity() if fc_norm or not final_norm else norm(self.embed_dim)
        self.fc_norm = norm(self.embed_dim) if fc_norm and final_norm else nn.Identity()
        heads = pool_heads or self.blocks[0].attn.num_heads
        if global_pool == 'attention':
            self.attn_pool = AttentionPool(self.embed_dim, heads)
        elif global_pool == 'map':
            mlp = self.blocks[0].mlp
            hidden = mlp.fc2.in_features if pool_mlp_ratio is None else int(self.embed_dim * pool_mlp_ratio)
            self.attn_pool = ProbePool(self.embed_dim, heads, hidden, norm, type(mlp.act))
        self.head_drop = nn.Dropout(head_drop) if head_drop else nn.Identity()
        self.head = self._new_head()

    def _new_head(self) -> nn.Module:
        head = nn.Linear(self.embed_dim, self.num_classes) if self.num_classes else nn.Identity()
        init_linear(head)
        return head

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """'b c H W -> b (p + h w) d' after the final norm."""
        x, grid = self.embed(x)
        return self.norm(self.run_blocks(x, grid)[0])

    def pool(self, x: torch.Tensor) -> torch.Tensor:
        """'b n d -> b d': the first prefix token, the mean of the patch tokens, or attention pooling over them (over
        every token with ``pool_prefix``)."""
        if self.global_pool == 'token':
            return x[:, 0]
        tokens = x if self.pool_prefix else x[:, self.num_prefix_tokens:]
        return tokens.mean(dim=1) if self.global_pool == 'avg' else self.attn_pool(tokens)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False):
        x = self.head_drop(self.fc_norm(self.pool(x)))
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor):
        return self.forward_head(self.forward_features(x))


class ViTBackbone(ViTEncoder, Backbone):
    """ViT as a dense backbone (:mod:`zoo.contract`): NCHW maps of the tokens after the blocks in ``out_indices``,
    with each tap's prefix tokens 'b p d' for a DPT readout.

    Taps are taken before the final norm (as DPT and ViTDet do); the blocks after the last tap are dropped.
    """

    def __init__(self, out_indices=None, **kwargs):
        super().__init__(**kwargs)
        select_taps(self, out_indices, default_taps(self.depth), self.blocks, [self.embed_dim] * self.depth,
                    [self.patch_size] * self.depth, 'block', distinct=True)

    def forward_taps(self, x: torch.Tensor) -> Taps:
        """Maps 'b d h w' and prefix tokens 'b p d' (None without prefix tokens), one per tap."""
        x, grid = self.embed(x)
        _, tapped = self.run_blocks(x, grid, taps=self.out_indices)
        p = self.num_prefix_tokens
        maps = [rearrange(t[:, p:], 'b (h w) d -> b d h w', h=grid[0]) for t in tapped]
        return Taps(maps, [t[:, :p] for t in tapped] if p else None)


VIT = {'backbone': ViTBackbone, 'classifier': ViTClassifier}
VIT_SIZES = {
    'tiny': dict(embed_dim=192, depth=12, num_heads=3),
    'small': dict(embed_dim=384, depth=12, num_heads=6),
    'base': dict(embed_dim=768, depth=12, num_heads=12),
    'large': dict(embed_dim=1024, depth=24, num_heads=16),
}
# (size, patch, input resolution) of timm's original ViT names
_TIMM_VITS = [(s, 16, r) for s in VIT_SIZES for r in (224, 384)] + \
             [(s, 32, r) for s in ('small', 'base', 'large') for r in (224, 384)] + \
             [(s, 8, 224) for s in ('small', 'base')]
# timm's default weights of these are headless: DINO (ImageNet mean/std) or ImageNet-21k features (orig_in21k)
_HEADLESS = {'vit_small_patch8_224': dict(mean=IMAGENET_MEAN, std=IMAGENET_STD, num_classes=0),
             'vit_large_patch32_224': dict(mean=HALF_MEAN, std=HALF_STD, num_classes=0)}
for _size, _patch, _res in _TIMM_VITS:
    _name = f'vit_{_size}_patch{_patch}_{_res}'
    register_variant(_name, VIT, input_size=_res, patch_size=_patch,
                     **_HEADLESS.get(_name, dict(mean=HALF_MEAN, std=HALF_STD)), **VIT_SIZES[_size])
register_variant('vit_base_patch16_reg4_gap_256', VIT, mean=HALF_MEAN, std=HALF_STD, input_size=256, patch_size=16,
                 class_token=False, reg_tokens=4, pos_embed_prefix=False, head=dict(global_pool='avg'),
                 **VIT_SIZES['base'])
