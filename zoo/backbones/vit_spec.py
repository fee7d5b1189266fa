"""What a ViT family is made of: a spec of parts that :class:`zoo.backbones.vit.ViTEncoder` assembles.

A family declares an :class:`EncoderSpec`: its patch embedding (:class:`PatchSpec`), prefix tokens
(:class:`PrefixSpec`), absolute positions (:class:`PositionSpec`), the kind of every norm, a norm before the blocks,
and its blocks' parts (:class:`BlockSpec`: the attention's q/k/v projection, rotary positions, ALiBi and output
projection, :class:`AttentionSpec`; the MLP, :class:`MlpSpec`; the norms' placement and LayerScale). The sizes (width,
depth, heads, MLP ratio, image and patch size) and the drop rates are the encoder's own arguments, not the spec's.
Each part spec builds its module; the parts are made in the order the seeded initialisations of every registered
name depend on (tests/backbones/test_encoder_snapshot.py). ``spec.replace(block=dict(mlp=dict(kind='swiglu')))``
gives a spec with some parts changed; :mod:`.timm_options` translates timm's option names into such changes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import partial

from torch import nn

from ..core import (
    Attention,
    Block,
    CroppedPosEmbed,
    LearnedPosEmbed,
    Mlp,
    PatchEmbed,
    PrefixTokens,
    PreNormLinear,
    SinCosPosEmbed,
)
from ..core.alibi import make_alibi
from ..core.block import NORM_PLACEMENTS
from ..core.layers import activation_layer
from ..core.qkv import FusedQKV, QVBiasQKV
from ..core.rope import make_rope

#: the norm kinds of :attr:`EncoderSpec.norm`
NORMS = {'layer': nn.LayerNorm, 'rms': nn.RMSNorm}


def _one_of(value, allowed, what: str) -> None:
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


class _Part:
    """Nested replacement: ``replace(field=value)``, where a dict value replaces fields of a nested part spec."""

    def replace(self, **changes):
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(getattr(self, key, None), _Part):
                changes[key] = getattr(self, key).replace(**value)
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class PatchSpec(_Part):
    """The patch embedding, a conv of kernel = stride = patch size: ``bias`` (without one, mmseg 1.x's ViT and CLIP, a
    checkpoint's ``patch_embed.proj.bias`` is dropped on loading); ``norm``: a norm on the patch tokens before the
    positions (timm's ``embed_norm_layer``; AIMv2); ``remainder``: an input's last rows / columns that the patches do
    not tile are 'refuse'd or 'drop'ped (what timm's strided conv does; SigLIP so400m/14 at 384 px)."""
    bias: bool = True
    norm: bool = False
    remainder: str = 'refuse'

    def __post_init__(self):
        _one_of(self.remainder, ('refuse', 'drop'), 'PatchSpec.remainder')

    def build(self, patch_size: int, in_chans: int, dim: int, norm_layer) -> PatchEmbed:
        return PatchEmbed(patch_size, in_chans, dim, bias=self.bias, norm_layer=norm_layer if self.norm else None)


@dataclass(frozen=True)
class PrefixSpec(_Part):
    """The tokens before the patches, in this order: a class token, a distillation token (DeiT), ``registers``."""
    cls: bool = True
    dist: bool = False
    registers: int = 0

    def build(self, dim: int) -> PrefixTokens:
        return PrefixTokens(dim, cls=self.cls, dist=self.dist, registers=self.registers)


@dataclass(frozen=True)
class PositionSpec(_Part):
    """Absolute positions: 'learned' (resampled to each input's grid by ``interp`` / ``antialias``), 'cropped' (a
    learned table on the patch tokens, resampled to the square of the grid's larger side and cropped top-left with the
    bilinear corner rule ``align_corners``; RADIO), 'sincos' (fixed 2-D) or 'none'. ``prefix``: the learned table
    also covers the prefix tokens (timm's ``no_embed_class=False``)."""
    kind: str = 'learned'
    prefix: bool = True
    interp: str = 'bicubic'
    antialias: bool = True
    align_corners: bool = False

    def __post_init__(self):
        _one_of(self.kind, ('learned', 'cropped', 'sincos', 'none'), 'PositionSpec.kind (pos_embed)')

    def build(self, grid, dim: int, num_prefix: int) -> nn.Module | None:
        if self.kind == 'learned':
            return LearnedPosEmbed(grid, dim, num_prefix if self.prefix else 0, mode=self.interp,
                                   antialias=self.antialias)
        if self.kind == 'cropped':
            return CroppedPosEmbed(grid, dim, align_corners=self.align_corners)
        return SinCosPosEmbed(dim) if self.kind == 'sincos' else None


@dataclass(frozen=True)
class AttentionSpec(_Part):
    """The parts of every block's :class:`zoo.core.Attention`: ``qkv`` 'fused' (one Linear with biases, timm's
    ``attn.qkv``), 'fused_no_bias', or 'qv_bias' (learned q and v biases, none on k: EVA, DINOv3 ``_qkvb``;
    :class:`zoo.core.QVBiasQKV`); ``rope``: 2-D rotary positions, ``dict(kind='axial' | 'mixed' | 'dinov3', ...)``
    (:func:`zoo.core.rope.make_rope`); ``alibi``: a 2-D ALiBi bias, True or ``dict(metric=...)``
    (:func:`zoo.core.alibi.make_alibi`); ``proj``: the output projection, 'linear', 'no_bias' (AIMv2) or 'norm_linear'
    (a norm on the heads' output first, :class:`zoo.core.PreNormLinear`; EVA-02 CLIP, timm's ``scale_attn_inner``)."""
    qkv: str = 'fused'
    rope: dict | None = None
    alibi: dict | bool | None = None
    proj: str = 'linear'

    def __post_init__(self):
        _one_of(self.qkv, ('fused', 'fused_no_bias', 'qv_bias'), 'AttentionSpec.qkv')
        _one_of(self.proj, ('linear', 'no_bias', 'norm_linear'), 'AttentionSpec.proj')

    def build(self, dim: int, num_heads: int, num_prefix: int, norm_layer, attn_drop: float,
              proj_drop: float) -> Attention:
        # made in this order (q/v-bias projection, rope, ALiBi, fused projection, output projection): the seeded
        # initialisations of the registered names depend on it
        qkv = QVBiasQKV(dim) if self.qkv == 'qv_bias' else None
        rope = make_rope(self.rope, dim // num_heads, num_heads)
        pos_bias = make_alibi(self.alibi, num_heads, num_prefix)
        qkv = FusedQKV(dim, bias=self.qkv == 'fused') if qkv is None else qkv
        proj = PreNormLinear(dim, dim, norm_layer(dim)) if self.proj == 'norm_linear' else \
            nn.Linear(dim, dim, bias=self.proj == 'linear')
        return Attention(dim, num_heads, qkv=qkv, rope=rope, pos_bias=pos_bias, proj=proj, attn_drop=attn_drop,
                         proj_drop=proj_drop)


@dataclass(frozen=True)
class MlpSpec(_Part):
    """Every block's :class:`zoo.core.Mlp`, hidden width ``int(dim * mlp_ratio)``: ``kind`` 'mlp' (activation ``act``,
    a name of :data:`zoo.core.ACTIVATIONS`; 'quick_gelu' for OpenAI's CLIP towers) or 'swiglu' (gated with SiLU, packed
    [gate | value] in fc1; DINOv2 giant, EVA-02, AIMv2); ``norm``: a norm on the hidden width before fc2 (EVA-02, timm's
    ``scale_mlp``); ``bias``: fc1 and fc2 have biases (AIMv2's have none)."""
    kind: str = 'mlp'
    act: str = 'gelu'
    norm: bool = False
    bias: bool = True

    def __post_init__(self):
        _one_of(self.kind, ('mlp', 'swiglu'), 'MlpSpec.kind')
        activation_layer(self.act)  # an unknown name is refused here, naming the known ones

    def build(self, dim: int, mlp_ratio: float, norm_layer, drop: float) -> Mlp:
        hidden = int(dim * mlp_ratio)
        swiglu = self.kind == 'swiglu'
        act = dict(act_layer=nn.SiLU, gated=True) if swiglu else dict(act_layer=activation_layer(self.act))
        return Mlp(dim, hidden, drop=drop, norm=norm_layer(hidden) if self.norm else None, bias=self.bias, **act)


@dataclass(frozen=True)
class BlockSpec(_Part):
    """Every block's parts: ``attn``, ``mlp``, the norms' ``placement`` (:data:`zoo.core.block.NORM_PLACEMENTS`:
    'pre', 'post', 'res_post' as EVA-02 CLIP enormous) and ``layer_scale``, LayerScale's initial value (None: none)."""
    attn: AttentionSpec = field(default_factory=AttentionSpec)
    mlp: MlpSpec = field(default_factory=MlpSpec)
    placement: str = 'pre'
    layer_scale: float | None = None

    def __post_init__(self):
        _one_of(self.placement, NORM_PLACEMENTS, 'BlockSpec.placement (norm_placement)')

    def build(self, dim: int, num_heads: int, mlp_ratio: float, num_prefix: int, norm_layer, drop: float,
              attn_drop: float, drop_path: float) -> Block:
        attn = self.attn.build(dim, num_heads, num_prefix, norm_layer, attn_drop, drop)
        return Block(dim, attn, self.mlp.build(dim, mlp_ratio, norm_layer, drop), norm_layer=norm_layer,
                     drop_path=drop_path, init_values=self.layer_scale, norm_placement=self.placement)


@dataclass(frozen=True)
class EncoderSpec(_Part):
    """A ViT family's parts (module docstring); ``norm`` and ``norm_eps``: every norm's kind (:data:`NORMS`:
    'layer', or 'rms' without centring and bias, AIMv2) and eps; ``pre_norm``: a norm on the tokens before the blocks
    (``norm_pre``, CLIP's ``ln_pre``)."""
    patch: PatchSpec = field(default_factory=PatchSpec)
    prefix: PrefixSpec = field(default_factory=PrefixSpec)
    positions: PositionSpec = field(default_factory=PositionSpec)
    block: BlockSpec = field(default_factory=BlockSpec)
    norm: str = 'layer'
    norm_eps: float = 1e-6
    pre_norm: bool = False

    def __post_init__(self):
        _one_of(self.norm, tuple(NORMS), 'EncoderSpec.norm')

    def norm_layer(self):
        """The class of every norm: ``norm_layer(dim)`` builds one."""
        return partial(NORMS[self.norm], eps=self.norm_eps)
