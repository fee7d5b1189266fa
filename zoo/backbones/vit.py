"""Vision Transformer (Dosovitskiy et al. 2021): patch tokens, prefix tokens, learned positions, blocks.

Keys follow timm's layout except the prefix tokens (``prefix.cls``/``dist``/``registers``) and the
position table (``pos_embed.weight``); :mod:`zoo.weights` converts timm checkpoints.
"""
from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from ..contract import Backbone, Taps
from ..core import AttentionPool, init_linear
from ..core.grid import TokenGrid
from ..core.pooling import ProbePool
from ..registry import HALF_MEAN, HALF_STD, IMAGENET_MEAN, IMAGENET_STD, register_variant
from .common import drop_path_rates, pair, select_taps
from .inputs import check_images
from .timm_options import OPTIONS, spec_from_timm_options
from .vit_spec import EncoderSpec, PositionSpec, PrefixSpec


def default_taps(depth: int) -> tuple[int, ...]:
    """Four evenly spaced block indices: (2, 5, 8, 11) for 12 blocks, (5, 11, 17, 23) for 24; every block when
    there are fewer than four."""
    step = max(depth // 4, 1)
    return tuple(sorted({min(step * (i + 1), depth) - 1 for i in range(4)}))


class ViTEncoder(nn.Module):
    """Patch embedding, prefix tokens, positional encoding and a stack of :class:`zoo.core.Block`, assembled from a
    family's :class:`~.vit_spec.EncoderSpec` (``spec``; the plain ViT's by default).

    The arguments are what a user sets: the input size (``img_size``, the grid of a learned position table),
    ``patch_size``, ``in_chans``, the sizes (``embed_dim``, ``depth``, ``num_heads``, ``mlp_ratio``: the MLPs' hidden
    width ``embed_dim * mlp_ratio``) and the drop rates (``drop_path_rate``: stochastic depth rising linearly to it at
    the last block, :func:`.common.drop_path_rates`). ``options``: timm's names of parts (``qkv_bias=False``,
    ``init_values=1e-5``, ``class_token=False``, ``reg_tokens=4``, ...), changes of ``spec``
    (:func:`.timm_options.spec_from_timm_options`, the list in :data:`.timm_options.OPTIONS`).
    """
    family = 'vit'
    classifier_only = ('norm.', 'fc_norm.', 'attn_pool.', 'head.', 'head_dist.')
    #: the names ``**options`` takes, with their types (:func:`zoo.option_types.accepted_options` reads them)
    options_accepted = {name: hint for name, (hint, _) in OPTIONS.items()}

    def __init__(self, img_size: int | tuple[int, int] = 224, patch_size: int = 16, in_chans: int = 3,
                 embed_dim: int = 768, depth: int = 12, num_heads: int = 12, mlp_ratio: float = 4.0,
                 drop_rate: float = 0.0, attn_drop_rate: float = 0.0, drop_path_rate: float = 0.0,
                 spec: EncoderSpec | None = None, **options):
        super().__init__()
        self.spec = spec = spec_from_timm_options(spec or EncoderSpec(), **options)
        img_size = pair(img_size)
        self.embed_dim, self.patch_size, self.depth, self.in_chans = embed_dim, patch_size, depth, in_chans
        self.num_heads, self.drop_remainder = num_heads, spec.patch.remainder == 'drop'
        self.norm_layer = norm_layer = spec.norm_layer()
        self.patch_embed = spec.patch.build(patch_size, in_chans, embed_dim, norm_layer)
        if not spec.patch.bias:  # checkpoint keys load_pretrained drops when present (zoo.weights.load)
            self.ignored_checkpoint_keys = ('patch_embed.proj.bias',)
        self.prefix = spec.prefix.build(embed_dim)
        self.pos_embed = spec.positions.build((img_size[0] // patch_size, img_size[1] // patch_size), embed_dim,
                                              len(self.prefix))
        self.pos_drop = nn.Dropout(drop_rate) if drop_rate else nn.Identity()
        self.norm_pre = norm_layer(embed_dim) if spec.pre_norm else nn.Identity()
        self.blocks = nn.ModuleList(
            spec.block.build(embed_dim, num_heads, mlp_ratio, len(self.prefix), norm_layer, drop_rate, attn_drop_rate,
                             rate)
            for rate in drop_path_rates(drop_path_rate, [depth])[0])
        self.apply(init_linear)

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
        """'b c H W -> b (p + h w) d' with positions added; also returns the grid (h, w), a
        :class:`zoo.core.grid.TokenGrid` carrying what the blocks compute once per forward (the rotary tables)."""
        check_images(self, x)
        if self.drop_remainder:  # 'b c H W -> b c (h p) (w p)': the untiled last rows / columns go
            p = self.patch_size
            x = x[..., :x.shape[-2] // p * p, :x.shape[-1] // p * p]
        x, grid = self.patch_embed(x)
        return self.add_prefix_and_positions(x, grid), TokenGrid(grid)

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
                 spec=EncoderSpec(prefix=PrefixSpec(cls=False, registers=4), positions=PositionSpec(prefix=False)),
                 head=dict(global_pool='avg'), **VIT_SIZES['base'])
