"""CvT (Wu et al. 2021): three stages of conv token embedding + transformer blocks with conv q/k/v projections.

Every block is a :class:`zoo.core.Block` whose attention is the shared :class:`zoo.core.Attention` with a
:class:`zoo.core.ConvQKV` projection (depthwise conv + BN, stride 1 for q and 2 for k/v, then Linear) and the
softmax scale ``dim ** -0.5``. There is no position embedding; the last stage prepends a CLS token, which
bypasses the convs. Numerically transformers' CvtModel / CvtForImageClassification given the same weights
(LayerNorm eps 1e-5, torch's default, which is what transformers builds; exact GELU as transformers,
``act='quick_gelu'`` for the official code's QuickGELU).

Keys: ``stages.{i}.patch_embed.{proj,norm}``, ``stages.2.prefix.cls``, ``stages.{i}.blocks.{j}...`` with
``attn.qkv.{conv_q,conv_k,conv_v}.{conv,norm}`` and ``attn.qkv.{q,k,v}``, then ``norm`` and ``head``;
:mod:`zoo.weights` converts transformers' and the official layouts.
"""
from __future__ import annotations

from functools import partial

import torch
from einops import rearrange
from torch import nn

from ..contract import Backbone, Taps
from ..core import Attention, Block, ConvQKV, Mlp, PatchEmbed, PrefixTokens, activation_layer, init_linear
from ..registry import register_variant
from .common import drop_path_rates, run_blocks, select_taps
from .inputs import check_images

# Conv token embedding of each stage: (kernel, stride, padding).
EMBED = ((7, 4, 2), (3, 2, 1), (3, 2, 1))


class CvTStage(nn.Module):
    """'b c H W -> b (p + h w) d': conv embedding + LayerNorm, optional CLS token, blocks."""

    def __init__(self, in_chans: int, dim: int, depth: int, num_heads: int, embed=(7, 4, 2), cls_token: bool = False,
                 mlp_ratio: float = 4.0, qkv_bias: bool = True, norm_layer=nn.LayerNorm, act_layer=nn.GELU,
                 drop: float = 0.0, attn_drop: float = 0.0, drop_path_rate: float = 0.0):
        super().__init__()
        kernel, stride, padding = embed
        self.stride = stride
        self.patch_embed = PatchEmbed(kernel, in_chans, dim, stride=stride, padding=padding, norm_layer=norm_layer)
        self.prefix = PrefixTokens(dim, cls=cls_token)
        self.pos_drop = nn.Dropout(drop) if drop else nn.Identity()
        self.blocks = nn.ModuleList(  # official: stochastic depth 0 .. rate in the stage
            Block(dim, Attention(dim, num_heads, qkv=ConvQKV(dim, bias=qkv_bias, num_prefix=len(self.prefix)),
                                 scale=dim ** -0.5, attn_drop=attn_drop, proj_drop=drop),
                  Mlp(dim, int(dim * mlp_ratio), act_layer=act_layer, drop=drop), norm_layer=norm_layer,
                  drop_path=rate)
            for rate in drop_path_rates(drop_path_rate, [depth])[0])

    def forward(self, x: torch.Tensor):
        """Returns the tokens 'b (p + h w) d' (prefix first) and the grid (h, w)."""
        x, grid = self.patch_embed(x)
        x = self.pos_drop(self.prefix(x))
        return run_blocks(self.blocks, x, grid), grid


class CvTEncoder(nn.Module):
    """The three stages; ``forward_stages`` yields each stage's map 'b d h w' and prefix tokens 'b p d'."""
    family = 'cvt'
    classifier_only = ('norm.', 'head.')

    def __init__(self, img_size: int | tuple[int, int] = 224, in_chans: int = 3, embed_dims=(64, 192, 384),
                 depths=(1, 2, 10), num_heads=(1, 3, 6), mlp_ratio: float = 4.0, qkv_bias: bool = True,
                 act: str = 'gelu', norm_eps: float = 1e-5, drop_rate: float = 0.0, attn_drop_rate: float = 0.0,
                 drop_path_rate: float = 0.1):
        super().__init__()
        self.embed_dims = list(embed_dims)
        norm_layer = partial(nn.LayerNorm, eps=norm_eps)
        stage_rates = [0.0] * (len(depths) - 1) + [drop_path_rate]  # official CvT: stochastic depth in the last stage
        chans = [in_chans] + self.embed_dims[:-1]
        self.stages = nn.ModuleList(
            CvTStage(chans[i], self.embed_dims[i], depths[i], num_heads[i], EMBED[i], cls_token=i == len(depths) - 1,
                     mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, norm_layer=norm_layer, act_layer=activation_layer(act),
                     drop=drop_rate, attn_drop=attn_drop_rate, drop_path_rate=stage_rates[i])
            for i in range(len(depths)))
        self.strides = [4 * 2 ** i for i in range(len(depths))]  # 4, 8, 16 (exact for sizes divisible by them)
        self.in_chans = in_chans
        self.apply(init_linear)

    @property
    def min_input_size(self) -> int:
        """The smallest input side: the last built stage's map is at least 1x1."""
        return self.strides[len(self.stages) - 1]

    def forward_stages(self, x: torch.Tensor):
        """Per stage: map 'b d h w' and prefix tokens 'b p d' (p = 0 but in the last stage)."""
        check_images(self, x)
        outputs = []
        for stage in self.stages:
            tokens, (h, w) = stage(x)
            p = len(stage.prefix)
            x = rearrange(tokens[:, p:], 'b (h w) d -> b d h w', h=h, w=w)  # a view, channels-last strides
            outputs.append((x, tokens[:, :p]))
        return outputs


class CvTClassifier(CvTEncoder):
    """CvT with the final LayerNorm on the CLS token and a Linear head (CvtForImageClassification)."""

    def __init__(self, num_classes: int = 1000, **kwargs):
        super().__init__(**kwargs)
        dim = self.embed_dims[-1]
        self.num_classes = num_classes
        self.norm = nn.LayerNorm(dim, eps=self.stages[-1].blocks[0].norm1.eps)
        self.head = nn.Linear(dim, num_classes) if num_classes else nn.Identity()
        init_linear(self.head)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """'b c H W -> b d': the normalised CLS token."""
        _, cls = self.forward_stages(x)[-1]
        return self.norm(cls[:, 0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.forward_features(x))


class CvTBackbone(CvTEncoder, Backbone):
    """CvT as a dense backbone (:mod:`zoo.contract`): maps of the stages in ``out_indices`` (default (0, 1, 2, 2)).

    Stage strides are 4, 8, 16. The default repeats the last stage as a fourth level of stride 16, which a DPT
    neck with target strides (4, 8, 16, 32) resamples x0.5. The CLS token is not read out (``prefix_names`` is
    empty): it exists in the last stage only, and a DPT readout applies to every level. Stages after the last
    tapped one are dropped.
    """
    prefix_names: list[str] = []

    def __init__(self, out_indices=None, **kwargs):
        super().__init__(**kwargs)
        select_taps(self, out_indices, (0, 1, 2, 2), self.stages, self.embed_dims, self.strides, 'stage')

    def forward_taps(self, x: torch.Tensor) -> Taps:
        maps = [m for m, _ in self.forward_stages(x)]
        return Taps([maps[i] for i in self.out_indices], None)


CVT = {'backbone': CvTBackbone, 'classifier': CvTClassifier}
CVT_SIZES = {
    '13': dict(embed_dims=(64, 192, 384), num_heads=(1, 3, 6), depths=(1, 2, 10)),
    '21': dict(embed_dims=(64, 192, 384), num_heads=(1, 3, 6), depths=(1, 4, 16)),
    'w24': dict(embed_dims=(192, 768, 1024), num_heads=(3, 12, 16), depths=(2, 2, 20)),
}
for _size, _res in [('13', 224), ('13', 384), ('21', 224), ('21', 384), ('w24', 384)]:
    register_variant(f'cvt_{_size}_{_res}', CVT, input_size=_res, **CVT_SIZES[_size])
