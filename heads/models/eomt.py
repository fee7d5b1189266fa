"""EoMT (Kerssies et al., CVPR 2025, "Your ViT is Secretly an Image Segmentation Model"): mask classification with
no decoder. Learned queries join the tokens of a plain ViT before its last L blocks and run through those blocks,
the backbone's own (the same :class:`zoo.core.Block` and :class:`zoo.core.Attention` as the patches); before each of
them and after the last, masks and classes are predicted from the normed tokens:

- class logits 'b q c+1' = ``class_head(queries)``;
- mask logits 'b q (s h) (s w)' = ``einsum('b q d, b d H W -> b q H W', mask_mlp(queries), upscale(patches))``, the
  patch tokens 'b d h w' upscaled by s = 2 ** n (:class:`~.eomt_parts.UpscaleBlock`; n = log2(patch) - 2, at least
  1: stride 4 for 16-pixel patches, as the paper);
- masked attention: in the block after a prediction, each query attends to the patches inside its mask (the mask
  logits resized bilinearly to the patch grid, > 0) and to every query and prefix token; the patch and prefix tokens
  attend everywhere. Block i applies it with probability ``attn_mask_probs[i]`` per query (in training and, as
  transformers' EoMT does, in evaluation: a query draws ``rand > p`` to go unmasked); the probabilities anneal from
  1 to 0 during training (:class:`~.eomt_parts.MaskAnnealingHook`), so that the trained model runs without masks.
  A block whose probability is 0 is run without prediction and mask in evaluation (transformers' reuses the previous
  block's mask there; the schedule, which anneals earlier blocks first, never reaches that state).

Token order: [queries, prefix tokens (CLS, registers), patches], as transformers' ``EomtForUniversalSegmentation``
(:mod:`heads.hf.eomt` loads its folders, and EoMT-DINOv3's, with identical outputs). Backbone: any plain ViT of the zoo
(:class:`zoo.backbones.vit.ViTEncoder`: ViT, DeiT, DINOv2, DINOv3, EVA-02, SigLIP, CLIP, ...) built with all its
blocks; rotary positions leave the queries unturned, as they do the prefix tokens. A position *bias* (ALiBi) has no
rows for the queries and is refused.
"""
from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from einops import rearrange
from torch import nn

from zoo.backbones.dinov2 import DINOv2Backbone
from zoo.backbones.vit import ViTEncoder
from zoo.core.layers import activation_layer
from zoo.core.resize import interpolate

from ..registry import MODELS
from .dense_model import build
from .eomt_parts import MaskMLP, UpscaleBlock
from .mask_classifier import MaskClassificationModel


def eomt_backbone(backbone) -> ViTEncoder:
    """The backbone built with every block (a config's ``out_indices`` is replaced by the last block), checked to be
    a plain ViT that EoMT's queries can join."""
    if isinstance(backbone, dict):
        backbone = MODELS.build({**backbone, 'out_indices': (-1,)})
    if not isinstance(backbone, ViTEncoder):
        raise TypeError(f"EoMT needs a plain ViT backbone (zoo.backbones.vit.ViTEncoder: ViT, DeiT, DINOv2, DINOv3, "
                        f"EVA-02, SigLIP, ...), got {type(backbone).__name__}")
    if len(backbone.blocks) != backbone.depth:
        raise ValueError(f"EoMT runs the backbone's last blocks, but this one keeps {len(backbone.blocks)} of its "
                         f"{backbone.depth} blocks: build it with out_indices=(-1,)")
    if any(block.attn.pos_bias is not None for block in backbone.blocks):
        raise ValueError("EoMT's queries have no rows in an attention position bias (ALiBi, relative tables): use a "
                         "backbone with learned, sin-cos or rotary positions")
    return backbone


@MODELS.register_module()
class EoMT(MaskClassificationModel):
    """Encoder-only Mask Transformer (module docstring). ``backbone``: a ZooBackbone config of a plain ViT (or the
    built module, with all its blocks); ``num_classes``: classes without the no-object class; ``num_queries``;
    ``num_blocks``: L, the last blocks the queries run through; ``num_upscale``: upscaling blocks (default
    max(1, log2(patch) - 2)); ``act``: the activation of the mask MLP and upscaling blocks; ``norm_eps``: the final
    norm's (default: the backbone's); ``backbone_norm``: the final norm is the backbone's own, pretrained with it (a
    DINOv2 / DINOv3 backbone built with ``tap_norm=True``, which keeps its final norm), as the original EoMT uses its
    encoder's norm; otherwise EoMT has a new one. ``data_preprocessor``, ``loss``, ``test_cfg``:
    :class:`~heads.models.mask_classifier.MaskClassificationModel`'s (the preprocessor pads to the patch size
    unless given).

    ``forward_logits(x 'b 3 H W')`` -> (class logits 'b q c+1', mask logits 'b q H/s W/s', aux: the predictions
    before each masked block, [(class, mask), ...], every block in training, in evaluation those of the blocks whose
    probability is above 0).
    """

    def __init__(self, backbone, num_classes: int, num_queries: int = 100, num_blocks: int = 4,
                 num_upscale: int | None = None, act: str = 'gelu', norm_eps: float | None = None,
                 backbone_norm: bool = False,
                 data_preprocessor=None, loss=None, test_cfg=None, init_cfg=None):
        backbone = eomt_backbone(backbone)
        patch = backbone.patch_size
        super().__init__(num_classes, data_preprocessor=build(data_preprocessor or dict(
            type='DensePreprocessor', size_divisor=patch)), loss=loss, test_cfg=test_cfg, init_cfg=init_cfg)
        if not 1 <= num_blocks <= backbone.depth:
            raise ValueError(f"num_blocks must be from 1 to the backbone's {backbone.depth} blocks, got {num_blocks}")
        dim, act_layer = backbone.embed_dim, activation_layer(act)
        self.backbone, self.num_queries, self.num_blocks = backbone, num_queries, num_blocks
        self.query = nn.Embedding(num_queries, dim)
        if backbone_norm and not (isinstance(backbone, DINOv2Backbone) and backbone.tap_norm):
            raise ValueError(f"backbone_norm=True takes the final norm of a DINOv2 / DINOv3 backbone built with "
                             f"tap_norm=True, got {type(backbone).__name__}"
                             f"{' without tap_norm' if isinstance(backbone, DINOv2Backbone) else ''}")
        self.norm = None if backbone_norm else nn.LayerNorm(
            dim, eps=backbone.blocks[-1].norm1.eps if norm_eps is None else norm_eps)
        num_upscale = max(1, int(math.log2(patch)) - 2) if num_upscale is None else num_upscale
        self.upscale = nn.Sequential(*(UpscaleBlock(dim, act_layer) for _ in range(num_upscale)))
        self.mask_mlp = MaskMLP(dim, act_layer)
        self.class_head = nn.Linear(dim, num_classes + 1)
        self.register_buffer('attn_mask_probs', torch.ones(num_blocks))
        self.traced_probs = None  # the probabilities as numbers while traced (:meth:`constant_probabilities`)
        self.check_windows()

    @property
    def input_multiple(self) -> int:
        """What input height and width must be multiples of: the patch size."""
        return self.backbone.patch_size

    @property
    def coarsest_stride(self) -> int:
        """The largest stride of any map the model computes: the patch grid's."""
        return self.backbone.patch_size

    def set_mask_probabilities(self, probs) -> None:
        """Each masked block's probability of masked attention (:class:`~.eomt_parts.MaskAnnealingHook`)."""
        if len(probs) != self.num_blocks or any(not 0 <= p <= 1 for p in probs):
            raise ValueError(f"attn_mask_probs needs {self.num_blocks} probabilities in [0, 1], got {list(probs)}")
        self.attn_mask_probs.copy_(torch.as_tensor(probs, dtype=self.attn_mask_probs.dtype))

    @contextmanager
    def constant_probabilities(self):
        """The masked-attention probabilities read once, as Python numbers, while the block runs: a trace
        (torch.export) sees the buffer's values as constants of the graph (which blocks mask) instead of data it
        cannot branch on. A probability strictly between 0 and 1 draws random numbers per query, which no export
        reproduces (:func:`heads.export.limits.inexact_parts` refuses it)."""
        self.traced_probs = self.attn_mask_probs.tolist()
        try:
            yield self
        finally:
            self.traced_probs = None

    def forward_logits(self, inputs: torch.Tensor):
        backbone = self.backbone
        x, grid = backbone.embed(inputs)  # b (p + h w) d
        start = backbone.depth - self.num_blocks
        x = backbone.run_blocks(x, grid, stop=start)[0]
        x = torch.cat([self.query.weight.expand(x.shape[0], -1, -1).to(x.dtype), x], dim=1)  # b (q + p + h w) d
        aux = []
        probs = self.attn_mask_probs.tolist() if self.traced_probs is None else self.traced_probs
        for prob, block in zip(probs, backbone.blocks[start:]):
            mask = None
            if self.training or prob > 0:
                class_logits, mask_logits = self.predictions(x, grid)
                aux.append((class_logits, mask_logits))
                mask = self.attention_mask(mask_logits, grid, prob, x.shape[1])
            x = block(x, grid, mask=mask)
        return (*self.predictions(x, grid), aux)

    def predictions(self, x: torch.Tensor, grid) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens 'b (q + p + h w) d' -> class logits 'b q c+1' and mask logits 'b q H W' (H = s h)."""
        x = (self.backbone.norm if self.norm is None else self.norm)(x)
        queries, patches = x[:, :self.num_queries], x[:, self.num_queries + self.backbone.num_prefix_tokens:]
        pixels = self.upscale(rearrange(patches, 'b (h w) d -> b d h w', h=grid[0], w=grid[1]))
        masks = torch.einsum('bqd,bdhw->bqhw', self.mask_mlp(queries), pixels)
        return self.class_head(queries), masks

    def attention_mask(self, mask_logits: torch.Tensor, grid, prob: float, tokens: int) -> torch.Tensor | None:
        """The next block's mask 'b 1 n n' (True = may attend): query rows see the patches where their mask logits,
        resized bilinearly to ``grid``, are above 0, each query unmasked with probability 1 - ``prob``; None when
        every query goes unmasked (``prob`` 0)."""
        if prob <= 0:
            return None
        b, q = mask_logits.shape[:2]
        inside = interpolate(mask_logits, size=tuple(grid), mode='bilinear', align_corners=False).flatten(2) > 0
        if prob < 1:  # each query drops its mask with probability 1 - prob
            inside |= (torch.rand(b, q, device=inside.device) > prob)[..., None]
        mask = inside.new_ones(b, 1, tokens, tokens)
        mask[:, 0, :q, tokens - inside.shape[-1]:] = inside
        return mask

    def loss_layers(self, class_logits, mask_logits, aux) -> list:
        """The blocks' predictions in the order they were made (transformers' EoMT): before each masked block, then
        the final one (suffix '')."""
        return [(f'_{i}', c, m) for i, (c, m) in enumerate(aux)] + [('', class_logits, mask_logits)]
