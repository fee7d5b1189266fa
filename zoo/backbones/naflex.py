"""NaFlex ViTs (timm's ``naflexvit_*``; NaViT's packing with FlexiViT's resampled positions, SigLIP 2's NaFlex
towers): the :mod:`.vit` blocks on images of any resolution and aspect ratio under a patch budget.

What is NaFlex's own, as parts around the shared blocks:
- the patch embedding is one Linear over each patch's values in (row, column, channel) order (``patch_embed.proj``,
  timm's linear ``embeds.proj``), also on a 'b c h w' batch (cut into patches first);
- positions are a table resampled per image to its own grid (:mod:`.naflex_pos`: a learned 2-D table, bicubic or
  bilinear, or factorized row and column tables, optionally aspect-preserving), on the patch tokens only;
- a batch of images of different sizes is a :class:`~.naflex_batch.NaFlexBatch` (patches padded to a budget,
  coordinates, a valid mask; :func:`~.naflex_batch.patchify` makes one from a list of images); the padding is no key
  of any attention (the core Attention's ``mask``, 'b 1 1 n'), average pooling and the MAP head skip it.

Inputs: every model takes a 'b c h w' tensor (one grid, exactly a plain ViT with the resampled table), a list of
'c h_i w_i' images, or a :class:`~.naflex_batch.NaFlexBatch`. The classifier's ``forward`` gives 'b k' for all three;
``forward_features`` gives the tokens 'b (p + n) d' (for a list or a NaFlexBatch, a :class:`NaFlexTokens` with the
valid mask and grids). The backbone's ``forward_taps`` gives :class:`zoo.contract.Taps` for a tensor and, for a list
or a NaFlexBatch, one :class:`~zoo.contract.Taps` per image, its maps '1 d h_i w_i' on that image's own grid.
:mod:`zoo.weights.naflex` reads timm's files.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from einops import rearrange
from torch import nn

from ..contract import Backbone, Taps
from ..core import init_linear
from ..registry import HALF_MEAN, HALF_STD, register_variant
from .common import select_taps
from .inputs import check_images
from .naflex_batch import NaFlexBatch, patchify
from .naflex_pos import FactorizedPosEmbed, GridPosEmbed
from .vit import ViTBackbone, ViTClassifier, ViTEncoder, default_taps
from .vit_spec import BlockSpec, EncoderSpec, MlpSpec, PrefixSpec


class NaFlexTokens(NamedTuple):
    """Tokens 'b (p + n) d' of a NaFlex batch, its valid mask 'b n' (patch tokens only) and each image's grid."""
    tokens: torch.Tensor
    valid: torch.Tensor
    grids: tuple[tuple[int, int], ...]


class PatchLinear(nn.Module):
    """'b n (ph pw c) -> b n d' by one Linear ``proj`` over each patch's values (row, column, channel order); images
    'b c (h ph) (w pw)' are cut into such patches first: 'b (h w) d' and the grid (h, w)."""

    def __init__(self, patch_size: int, in_chans: int, embed_dim: int, bias: bool = True):
        super().__init__()
        self.patch_size, self.in_chans = patch_size, in_chans
        self.proj = nn.Linear(patch_size * patch_size * in_chans, embed_dim, bias=bias)

    def forward(self, x: torch.Tensor):
        p = self.patch_size
        h, w = x.shape[-2:]
        if h % p or w % p:
            raise ValueError(f"input size {h}x{w} cannot be tiled by {p}x{p} patches; resize or pad it to a multiple "
                             f"of {p}, or pass a list of images (zoo.backbones.naflex_batch.patchify pads each)")
        # one GEMM over the patch vectors (faster on CPU than the equal strided conv)
        patches = rearrange(x, 'b c (h ph) (w pw) -> b (h w) (ph pw c)', ph=p, pw=p)
        return self.proj(patches), (h // p, w // p)

    def tokens(self, patches: torch.Tensor) -> torch.Tensor:
        if patches.shape[-1] != self.proj.in_features:
            raise ValueError(f"NaFlex patches have {patches.shape[-1]} values each, this model's {self.patch_size} px "
                             f"patches of {self.in_chans} channels have {self.proj.in_features}")
        return self.proj(patches)


class NaFlexEncoder(ViTEncoder):
    """:class:`.vit.ViTEncoder` with NaFlex's patch Linear and per-image position tables (module docstring).

    pos_embed: 'learned' (a 2-D table, :class:`~.naflex_pos.GridPosEmbed`) or 'factorized' (row and column tables);
    pos_grid: the table's grid (timm's ``pos_embed_grid_size``, 16 x 16); pos_interp: 'bicubic' or 'bilinear';
    pos_antialias, pos_align_corners: the resampling's; pos_ar_preserving: resample to the square of the grid's larger
    side and keep its top-left (timm's ``pos_embed_ar_preserving``). Other options are the ViT's.
    """
    family = 'naflex'

    def __init__(self, pos_embed: str = 'learned', pos_grid=(16, 16), pos_interp: str = 'bicubic',
                 pos_antialias: bool = True, pos_align_corners: bool = False, pos_ar_preserving: bool = False,
                 spec: EncoderSpec | None = None, **kwargs):
        super().__init__(spec=(spec or EncoderSpec()).replace(positions=dict(kind='none')), **kwargs)
        bias = self.patch_embed.proj.bias is not None
        self.patch_embed = PatchLinear(self.patch_size, self.in_chans, self.embed_dim, bias=bias)
        init_linear(self.patch_embed.proj)
        if pos_embed == 'learned':
            self.pos_embed = GridPosEmbed(pos_grid, self.embed_dim, pos_interp, pos_antialias, pos_align_corners,
                                          pos_ar_preserving)
        elif pos_embed == 'factorized':
            self.pos_embed = FactorizedPosEmbed(pos_grid, self.embed_dim, pos_ar_preserving)
        else:
            raise ValueError(f"a NaFlex ViT's pos_embed is 'learned' or 'factorized', got {pos_embed!r}")

    def as_batch(self, x) -> NaFlexBatch | None:
        """None for a 'b c h w' tensor; a :class:`NaFlexBatch` for a list of images or a NaFlexBatch."""
        if isinstance(x, NaFlexBatch):
            return x
        if isinstance(x, torch.Tensor):
            return None
        images = list(x)
        for image in images:
            check_images(self, image[None])
        return patchify(images, self.patch_size)

    def embed_batch(self, batch: NaFlexBatch):
        """'b n (ph pw c)' patches -> tokens 'b (p + n) d' with positions, and the attention mask 'b 1 1 (p + n)'
        (True: a key; the prefix tokens and each image's patches, not its padding)."""
        x = self.patch_embed.tokens(batch.patches)
        x = self.patch_embed_norm(x) + self.pos_embed.gather(batch, x.dtype)
        x = self.norm_pre(self.pos_drop(self.prefix(x)))
        p = self.num_prefix_tokens
        keys = torch.cat([batch.valid.new_ones(len(batch), p), batch.valid], dim=1)
        return x, keys[:, None, None, :]

    def patch_embed_norm(self, x: torch.Tensor) -> torch.Tensor:
        return x  # NaFlex's towers here have no norm on the patch tokens

    def run_masked(self, x: torch.Tensor, mask: torch.Tensor, taps=(), stop: int | None = None):
        """Blocks 0..stop-1 with the padding masked; the last tokens and those after each tap index."""
        tapped = []
        for i, block in enumerate(self.blocks[:stop]):
            x = block(x, None, mask=mask)
            if i in taps:
                tapped.append(x)
        return x, tapped


class NaFlexClassifier(NaFlexEncoder, ViTClassifier):
    """Final norm, pooling over each image's own patches ('token', 'avg', 'map'; the padding skipped) and head."""

    def forward_features(self, x):
        """'b c H W' -> tokens 'b (p + h w) d' after the final norm; a list of images or a NaFlexBatch ->
        :class:`NaFlexTokens`."""
        batch = self.as_batch(x)
        if batch is None:
            return super().forward_features(x)
        tokens, mask = self.embed_batch(batch)
        return NaFlexTokens(self.norm(self.run_masked(tokens, mask)[0]), batch.valid, batch.grids)

    def pool(self, x, valid: torch.Tensor | None = None) -> torch.Tensor:
        if isinstance(x, NaFlexTokens):
            x, valid = x.tokens, x.valid
        if valid is None or self.global_pool == 'token':
            return super().pool(x)
        if self.pool_prefix:
            raise NotImplementedError("pooling the prefix tokens of a NaFlex batch is not built")
        tokens = x[:, self.num_prefix_tokens:]
        if self.global_pool == 'avg':
            weight = valid.to(tokens.dtype)[..., None]  # 'b n 1'
            return (tokens * weight).sum(1) / weight.sum(1).clamp(min=1)
        if self.global_pool == 'map':
            return self.attn_pool(tokens, mask=valid[:, None, None, :])
        raise NotImplementedError(f"global_pool={self.global_pool!r} over a NaFlex batch is not built")

    def forward_head(self, x, pre_logits: bool = False):
        x = self.head_drop(self.fc_norm(self.pool(x)))
        return x if pre_logits else self.head(x)


class NaFlexBackbone(NaFlexEncoder, Backbone):
    """Taps before the final norm, as :class:`.vit.ViTBackbone`; for a list of images or a NaFlexBatch one
    :class:`~zoo.contract.Taps` per image, its maps '1 d h_i w_i' on its own grid."""

    def __init__(self, out_indices=None, **kwargs):
        super().__init__(**kwargs)
        select_taps(self, out_indices, default_taps(self.depth), self.blocks, [self.embed_dim] * self.depth,
                    [self.patch_size] * self.depth, 'block', distinct=True)

    def forward_taps(self, x):
        batch = self.as_batch(x)
        if batch is None:
            return ViTBackbone.forward_taps(self, x)
        tokens, mask = self.embed_batch(batch)
        _, tapped = self.run_masked(tokens, mask, taps=self.out_indices, stop=max(self.out_indices) + 1)
        p = self.num_prefix_tokens
        per_image = []
        for i, (h, w) in enumerate(batch.grids):
            maps = [rearrange(t[i:i + 1, p:p + h * w], '1 (h w) d -> 1 d h w', h=h) for t in tapped]
            per_image.append(Taps(maps, [t[i:i + 1, :p] for t in tapped] if p else None))
        return per_image

    def forward(self, x):
        """The maps of :meth:`forward_taps`: a list per tap, or for a list / NaFlexBatch a list per image."""
        taps = self.forward_taps(x)
        return taps.maps if isinstance(taps, Taps) else [t.maps for t in taps]


NAFLEX = {'backbone': NaFlexBackbone, 'classifier': NaFlexClassifier}
_BASE = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12)
_SO150M2 = dict(patch_size=16, embed_dim=832, depth=21, num_heads=13, mlp_ratio=34 / 13)
_SO400M = dict(patch_size=16, embed_dim=1152, depth=27, num_heads=16, mlp_ratio=3.7362)
_GAP = dict(global_pool='avg', fc_norm=True)
_MAP = dict(global_pool='map')


def _registers(count: int) -> EncoderSpec:
    """timm's NaFlex ViTs: ``count`` registers and no class token, LayerScale 1e-5."""
    return EncoderSpec(prefix=PrefixSpec(cls=False, registers=count), block=BlockSpec(layer_scale=1e-5))


_REG4, _REG1 = _registers(4), _registers(1)
_SO150M2_REG1 = _REG1.replace(block=dict(attn=dict(qkv='fused_no_bias')))
_SIGLIP = EncoderSpec(prefix=PrefixSpec(cls=False), block=BlockSpec(mlp=MlpSpec(act='gelu_tanh')))
# name -> (size options, spec, NaFlex options, head); every name: no class token, LayerNorm eps 1e-6, a 16 x 16 table,
# timm's pretrained_cfg (384 px, mean = std = 0.5; SigLIP 2's towers headless)
_NAFLEX_VITS = {
    'naflexvit_base_patch16_gap': (_BASE, _REG4, {}, _GAP),
    'naflexvit_base_patch16_par_gap': (_BASE, _REG4, dict(pos_ar_preserving=True), _GAP),
    'naflexvit_base_patch16_parfac_gap': (_BASE, _REG4, dict(pos_ar_preserving=True, pos_embed='factorized'), _GAP),
    'naflexvit_base_patch16_map': (_BASE, _REG1, {}, _MAP),
    'naflexvit_so150m2_patch16_reg1_gap': (_SO150M2, _SO150M2_REG1, {}, _GAP),
    'naflexvit_so150m2_patch16_reg1_map': (_SO150M2, _SO150M2_REG1, {}, _MAP),
    'naflexvit_base_patch16_siglip': (_BASE, _SIGLIP, dict(pos_interp='bilinear'), _MAP),
    'naflexvit_so400m_patch16_siglip': (_SO400M, _SIGLIP, dict(pos_interp='bilinear'), _MAP),
}
_SIGLIP_NAMES = ('naflexvit_base_patch16_siglip', 'naflexvit_so400m_patch16_siglip')
for _name, (_size, _spec, _options, _head) in _NAFLEX_VITS.items():
    register_variant(_name, NAFLEX, mean=HALF_MEAN, std=HALF_STD, input_size=384,
                     num_classes=0 if _name in _SIGLIP_NAMES else 1000, head=_head, spec=_spec, **_size, **_options)
