"""CoAtNet (Dai et al. 2021): a conv stem, MBConv stages, then transformer stages on the shared core.

Stage layout 'C C T T' at strides 4, 8, 16, 32 after a stride-2 stem. Conv stages are MBConv blocks
(pre-norm BN, 1x1 expand, depthwise 3x3, squeeze-excite, 1x1 project) whose conv + BN pairs are
:class:`zoo.core.ConvBN` (folded into one conv in eval). Transformer stages are :class:`zoo.core.Block`
on tokens 'b (h w) c' with the shared :class:`zoo.core.Attention` and a relative position bias
(:class:`zoo.core.RelPosBias`, resized to the grid of each input, or :class:`zoo.core.RelPosMlp`), so
any input size works, non-square included; timm's model is fixed to its build size. Each stage's first
block halves the grid (pooling) and widens the channels, as timm's ``TransformerBlock2d`` with stride 2.
Pooling uses ceil mode, so odd sizes keep both branches aligned (identical to timm at even sizes).
Maps are kept channels-last, so tokens and maps are views of each other.

Numerically timm's ``MaxxVit`` CoAtNet models given the same weights: the ``*_rw_*`` variants (timm's
own, SiLU, early SE, pooled MBConv downsampling, ...) and the paper-style ``coatnet_{0..3}_224``.
:mod:`zoo.weights.timm` converts timm's keys (1x1 convs of the transformer become Linears, the
head-interleaved qkv rows are reordered, flat bias tables become 'heads (2h-1) (2w-1)').
"""
from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from ..contract import Backbone, Taps
from ..core import (
    Attention,
    Block,
    ConvBN,
    DropPath,
    FusedQKV,
    LayerNorm6,
    Mlp,
    RelPosBias,
    RelPosMlp,
    activate,
    activation_layer,
    grad_free,
    init_linear,
)
from ..registry import HALF_MEAN, HALF_STD, register_variant
from .common import drop_path_rates, pair, select_taps
from .inputs import check_images

HEAD_DIM = 32  # attention head width of every CoAtNet


def half(grid) -> tuple[int, int]:
    """The grid after a stride-2 step (3x3 conv pad 1, ceil-mode 2x2 pool, 3x3 max pool pad 1); sizes may be symbolic
    (torch.export of a dynamic input size)."""
    return (grid[0] + 1) // 2, (grid[1] + 1) // 2


class BatchNormAct(nn.BatchNorm2d):
    """BatchNorm2d followed by an optional activation (keys as BatchNorm2d)."""

    def __init__(self, channels: int, act_layer=None):
        super().__init__(channels)
        self.act = act_layer() if act_layer else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return activate(self.act, super().forward(x))


class Downsample(nn.Module):
    """'b c h w -> b d ceil(h/2) ceil(w/2)': 2x2 average ('avg2') or 3x3 max ('max') pooling, then a 1x1 conv
    (``expand``) when the width changes."""

    def __init__(self, in_chans: int, out_chans: int | None = None, pool: str = 'avg2', bias: bool = True):
        super().__init__()
        if pool not in ('avg2', 'max'):
            raise ValueError(f"pool must be 'avg2' or 'max', got {pool!r}")
        self.pool = nn.AvgPool2d(2, 2, ceil_mode=True) if pool == 'avg2' else nn.MaxPool2d(3, 2, 1)
        out_chans = out_chans or in_chans
        self.expand = nn.Conv2d(in_chans, out_chans, 1, bias=bias) if out_chans != in_chans else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.expand(self.pool(x))


class SqueezeExcite(nn.Module):
    """x * sigmoid(fc2(act(fc1(mean_hw(x))))) with 1x1 convs ``fc1`` (c -> r) and ``fc2`` (r -> c)."""

    def __init__(self, channels: int, reduced: int, act_layer=nn.ReLU):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, reduced, 1)
        self.act = act_layer()
        self.fc2 = nn.Conv2d(reduced, channels, 1)

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """Per-channel multipliers 'b c 1 1' in (0, 1)."""
        return self.fc2(self.act(self.fc1(x.mean((2, 3), keepdim=True)))).sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.weights(x)
        return x.mul_(gate) if grad_free(x) else x * gate  # in place on the (intermediate) conv output


class MBConv(nn.Module):
    """Pre-norm inverted bottleneck: shortcut(x) + conv3(se(conv2(conv1(down(pre_norm(x)))))).

    conv1: 1x1 expand to ``4 * (in if expand_from_input else out)`` + BN + act; conv2: depthwise 3x3 + BN
    + act (squeeze-excite between conv and BN with ``se_early``, after otherwise); conv3: 1x1 project.
    With stride 2 the shortcut is pool + 1x1 conv and the main branch strides in the depthwise conv
    (``stride_mode='dw'``) or average-pools after the pre-norm (``'pool'``).
    """

    def __init__(self, in_chans: int, out_chans: int, stride: int = 1, *, act: str = 'gelu',
                 expand_from_input: bool = False, pre_act: bool = False, stride_mode: str = 'dw', bias: bool = True,
                 se_early: bool = False, se_act: str = 'silu', pool: str = 'avg2', drop_path: float = 0.0):
        super().__init__()
        if stride_mode not in ('dw', 'pool'):
            raise ValueError(f"stride_mode must be 'dw' or 'pool', got {stride_mode!r}")
        act_layer = activation_layer(act)
        mid = 4 * (in_chans if expand_from_input else out_chans)
        se = SqueezeExcite(mid, mid // 4 if expand_from_input else out_chans // 4, activation_layer(se_act))
        pooled = stride == 2 and stride_mode == 'pool'
        self.shortcut = Downsample(in_chans, out_chans, pool, bias=bias) if stride == 2 else nn.Identity()
        self.pre_norm = BatchNormAct(in_chans, act_layer if pre_act else None)
        self.down = Downsample(in_chans) if pooled else nn.Identity()
        self.conv1 = ConvBN(in_chans, mid, 1, act_layer=act_layer)
        self.conv2 = ConvBN(mid, mid, 3, stride=1 if pooled else stride, depthwise=True, act_layer=act_layer,
                            gate=se if se_early else None)
        self.se = nn.Identity() if se_early else se
        self.conv3 = nn.Conv2d(mid, out_chans, 1, bias=bias)
        self.drop_path = DropPath(drop_path) if drop_path else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch = self.drop_path(self.conv3(self.se(self.conv2(self.conv1(self.down(self.pre_norm(x)))))))
        return branch.add_(self.shortcut(x)) if grad_free(branch) else branch + self.shortcut(x)


class ConvStage(nn.Module):
    """'b c h w -> b d h/2 w/2': MBConv blocks, the first with stride 2."""

    def __init__(self, *blocks: MBConv):
        super().__init__()
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


class PooledBlock(Block):
    """A stage's first transformer block: halves the grid and widens ``in_dim -> dim``.

    x = shortcut(x) + attn(pool(norm1(x))), shortcut = pool + 1x1 conv; then x = x + mlp(norm2(x)).
    Tokens in 'b (h w) c' on ``grid``, out 'b (h' w') d' on ``half(grid)``.
    """

    def __init__(self, in_dim: int, dim: int, attn: Attention, pool: str, shortcut_bias: bool,
                 drop_path: float = 0.0):
        super().__init__(dim, attn, Mlp(dim, 4 * dim), drop_path=drop_path)
        self.norm1 = LayerNorm6(in_dim)
        self.shortcut = Downsample(in_dim, dim, pool, bias=shortcut_bias)
        self.pool = Downsample(in_dim, pool=pool)

    def _attention_residual(self, x, grid, return_attn, mask=None):
        h, w = grid
        shortcut = rearrange(self.shortcut(rearrange(x, 'b (h w) c -> b c h w', h=h, w=w)), 'b d h w -> b (h w) d')
        pooled = self.pool(rearrange(self.norm1(x), 'b (h w) c -> b c h w', h=h, w=w))
        out = self.attn(rearrange(pooled, 'b c h w -> b (h w) c'), grid=tuple(pooled.shape[-2:]),
                        mask=mask, return_attn=return_attn)
        out, attn = out if return_attn else (out, None)
        return shortcut + self.drop_path1(out), attn


class TransformerStage(nn.Module):
    """'b c h w -> b d h/2 w/2': a :class:`PooledBlock` then ``depth - 1`` :class:`zoo.core.Block`."""

    def __init__(self, in_dim: int, dim: int, depth: int, window, *, expand_first: bool = True,
                 shortcut_bias: bool = True, pool: str = 'avg2', rel_pos: str = 'bias', rel_pos_dim: int = 512,
                 attn_drop: float = 0.0, drop_paths=()):
        super().__init__()

        def attention(width_in: int) -> Attention:
            width = dim if expand_first else width_in
            heads = width // HEAD_DIM
            bias = RelPosBias(window, heads) if rel_pos == 'bias' else RelPosMlp(heads, rel_pos_dim)
            return Attention(width, heads, qkv=FusedQKV(width, in_dim=width_in), pos_bias=bias,
                             proj=nn.Linear(width, dim), attn_drop=attn_drop)

        if rel_pos not in ('bias', 'mlp'):
            raise ValueError(f"rel_pos must be 'bias' or 'mlp', got {rel_pos!r}")
        first = PooledBlock(in_dim, dim, attention(in_dim), pool, shortcut_bias, drop_paths[0])
        rest = [Block(dim, attention(dim), Mlp(dim, 4 * dim), norm_layer=LayerNorm6, drop_path=rate)
                for rate in drop_paths[1:depth]]
        self.blocks = nn.ModuleList([first, *rest])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        grid = tuple(x.shape[-2:])
        tokens = rearrange(x, 'b c h w -> b (h w) c')  # a view of a channels-last map
        for i, block in enumerate(self.blocks):
            tokens = block(tokens, grid)
            grid = half(grid) if i == 0 else grid
        return rearrange(tokens, 'b (h w) d -> b d h w', h=grid[0], w=grid[1])


class Stem(nn.Module):
    """'b 3 H W -> b c H/2 W/2': 3x3 stride-2 conv + BN + act (``conv1``), 3x3 conv (``conv2``)."""

    def __init__(self, in_chans: int, widths, act_layer):
        super().__init__()
        self.conv1 = ConvBN(in_chans, widths[0], 3, stride=2, act_layer=act_layer)
        self.conv2 = nn.Conv2d(widths[0], widths[1], 3, 1, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.conv1(x))


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Conv2d):  # EfficientNet's fan-out normal
        fan_out = module.kernel_size[0] * module.kernel_size[1] * module.out_channels // module.groups
        nn.init.normal_(module.weight, 0.0, (2.0 / fan_out) ** 0.5)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    init_linear(module)


class CoAtNetEncoder(nn.Module):
    """Stem and stages; ``forward_stages`` returns the stem map then each stage's map 'b c h w'."""
    family = 'coatnet'
    classifier_only = ('norm.', 'pre_logits.', 'head.')

    def __init__(self, img_size: int | tuple[int, int] = 224, in_chans: int = 3, embed_dims=(96, 192, 384, 768),
                 depths=(2, 3, 5, 2), stem_widths=(64, 64), block_types: str = 'CCTT', act: str = 'gelu',
                 expand_from_input: bool = False, pre_act: bool = False, stride_mode: str = 'dw',
                 conv_bias: bool = True, se_early: bool = False, se_act: str = 'silu', pool: str = 'avg2',
                 expand_first: bool = True, shortcut_bias: bool = True, rel_pos: str = 'bias', rel_pos_dim: int = 512,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.0):
        super().__init__()
        size = pair(img_size)
        self.embed_dims = list(embed_dims)
        self.stem = Stem(in_chans, stem_widths, activation_layer(act))
        rates = drop_path_rates(drop_path_rate, list(depths))
        grid, in_dim = half(size), stem_widths[-1]
        self.stages = nn.ModuleList()
        for i in range(len(depths)):
            grid, rate = half(grid), rates[i]
            if block_types[i] == 'C':
                stage = ConvStage(*(
                    MBConv(in_dim if j == 0 else embed_dims[i], embed_dims[i], 2 if j == 0 else 1, act=act,
                           expand_from_input=expand_from_input, pre_act=pre_act, stride_mode=stride_mode,
                           bias=conv_bias, se_early=se_early, se_act=se_act, pool=pool, drop_path=rate[j])
                    for j in range(depths[i])))
            elif block_types[i] == 'T':
                stage = TransformerStage(in_dim, embed_dims[i], depths[i], grid, expand_first=expand_first,
                                         shortcut_bias=shortcut_bias, pool=pool, rel_pos=rel_pos,
                                         rel_pos_dim=rel_pos_dim, attn_drop=attn_drop_rate, drop_paths=rate)
            else:
                raise ValueError(f"block_types must be made of 'C' and 'T', got {block_types!r}")
            self.stages.append(stage)
            in_dim = embed_dims[i]
        self.widths = [stem_widths[-1], *self.embed_dims]
        self.strides = [2 ** (i + 1) for i in range(len(self.widths))]  # 2, 4, 8, 16, 32
        self.in_chans = in_chans
        self.apply(_init_weights)

    @property
    def min_input_size(self) -> int:
        """The smallest input side: the last built stage's map is at least 1x1."""
        return self.strides[len(self.stages)]

    def forward_stages(self, x: torch.Tensor) -> list[torch.Tensor]:
        """'b c H W' -> [stem 'b c0 H/2 W/2', stage maps 'b ci H/2^(i+1) W/2^(i+1)' ...] (channels-last)."""
        check_images(self, x)
        x = self.stem(x.contiguous(memory_format=torch.channels_last))
        maps = [x]
        for stage in self.stages:
            x = stage(x)
            maps.append(x)
        return maps


class CoAtNetClassifier(CoAtNetEncoder):
    """Pooled last map, LayerNorm, then the classifier.

    ``pre_logits`` False (timm's ``*_rw``): LayerNorm on the map, average pool, Linear.
    ``pre_logits`` True (paper style): average pool, LayerNorm, Linear to the same width + tanh, Linear.
    """

    def __init__(self, num_classes: int = 1000, pre_logits: bool = False, **kwargs):
        super().__init__(**kwargs)
        dim = self.embed_dims[-1]
        self.num_classes = num_classes
        self.norm = LayerNorm6(dim)
        self.pre_logits = nn.Linear(dim, dim) if pre_logits else None
        self.head = nn.Linear(dim, num_classes) if num_classes else nn.Identity()
        init_linear(self.head)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """'b c H W -> b d' pooled features before the classifier."""
        tokens = rearrange(self.forward_stages(x)[-1], 'b d h w -> b (h w) d')
        if self.pre_logits is None:
            return self.norm(tokens).mean(1)
        return torch.tanh(self.pre_logits(self.norm(tokens.mean(1))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.forward_features(x))


class CoAtNetBackbone(CoAtNetEncoder, Backbone):
    """CoAtNet as a dense backbone (:mod:`zoo.contract`): the maps in ``out_indices`` (0 = stem at stride 2, 1..4 =
    stages at 4..32).

    Default (1, 2, 3, 4): strides 4, 8, 16, 32, what a DPT neck or an FPN takes. No prefix tokens
    (``prefix_names`` is empty). Stages after the last tapped one are dropped.
    """
    prefix_names: list[str] = []

    def __init__(self, out_indices=None, **kwargs):
        super().__init__(**kwargs)
        select_taps(self, out_indices, (1, 2, 3, 4), self.stages, self.widths, self.strides, 'stem (0) or stage',
                    first_level=1)

    def forward_taps(self, x: torch.Tensor) -> Taps:
        maps = self.forward_stages(x)
        return Taps([maps[i] for i in self.out_indices], None)


COATNET = {'backbone': CoAtNetBackbone, 'classifier': CoAtNetClassifier}
# timm's own configurations (trained before the paper's code was public)
RW = dict(stem_widths=(32, 64), act='silu', expand_from_input=True, pre_act=True, stride_mode='pool',
          conv_bias=False, se_early=True, se_act='relu', expand_first=False, shortcut_bias=False)
COATNET_VARIANTS = {
    'coatnet_0_rw_224': dict(RW, depths=(2, 3, 7, 2)),
    'coatnet_1_rw_224': dict(RW, depths=(2, 6, 14, 2), stride_mode='dw'),
    'coatnet_rmlp_1_rw_224': dict(RW, depths=(2, 6, 14, 2), pool='max', rel_pos='mlp', rel_pos_dim=384),
    # the paper's sizes (timm's coatnet_N configs)
    'coatnet_0_224': dict(depths=(2, 3, 5, 2), stem_widths=(64, 64)),
    'coatnet_1_224': dict(depths=(2, 6, 14, 2), stem_widths=(64, 64)),
    'coatnet_2_224': dict(embed_dims=(128, 256, 512, 1024), depths=(2, 6, 14, 2), stem_widths=(128, 128)),
    'coatnet_3_224': dict(embed_dims=(192, 384, 768, 1536), depths=(2, 6, 14, 2), stem_widths=(192, 192)),
}
for _name, _kwargs in COATNET_VARIANTS.items():  # timm's MaxxVit models are normalised with mean = std = 0.5
    register_variant(_name, COATNET, mean=HALF_MEAN, std=HALF_STD, head={'pre_logits': '_rw_' not in _name},
                     **_kwargs)
