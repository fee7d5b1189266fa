"""Masked-autoencoder pre-training (He et al. 2022) of a zoo ViT, whose encoder then loads into the DPT configs.

Per image, ``mask_ratio`` of the patches (75%) are hidden at random; the encoder (the backbone's patch embedding,
position table, prefix tokens and blocks) runs on the visible patches only; a light decoder (a Linear to its
width, a shared mask token at every hidden position, fixed 2-D sin-cos positions, ``decoder_depth`` core
Blocks) predicts every patch's pixels, and the loss is the mean squared error on the hidden patches only, against
pixels normalised per patch (``norm_pix_loss``: each patch's mean and variance removed), as MAE does.
The checkpoint's ``backbone.*`` weights load with ``model.backbone.pretrained=<checkpoint>`` in any ViT config.
"""
from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

import zoo
from zoo.backbones.vit import ViTEncoder
from zoo.core import Block, NoWeightDecay, init_linear, sincos_2d, vit_parts

from ..registry import MODELS
from .task_model import TaskModel


def random_masking(num_images: int, num_patches: int, mask_ratio: float, device=None) -> tuple[torch.Tensor, ...]:
    """Per image, a random subset of ``round(num_patches * (1 - mask_ratio))`` patches stays visible.

    Returns ``keep`` 'b v' (visible patch indices, in the random order), ``restore`` 'b n' (where each patch sits in
    [visible..., hidden...], to undo the shuffle) and ``mask`` 'b n' (1 = hidden)."""
    visible = round(num_patches * (1 - mask_ratio))
    if not 0 < visible <= num_patches:
        raise ValueError(f"mask_ratio {mask_ratio} leaves {visible} of {num_patches} patches visible")
    order = torch.rand(num_images, num_patches, device=device).argsort(dim=1)  # a random permutation per image
    restore = order.argsort(dim=1)
    mask = torch.ones(num_images, num_patches, device=device)
    mask[:, :visible] = 0
    return order[:, :visible], restore, mask.gather(1, restore)


def patchify(images: torch.Tensor, patch: int) -> torch.Tensor:
    """'b c (h p) (w q)' -> 'b (h w) (p q c)'."""
    return rearrange(images, 'b c (h p) (w q) -> b (h w) (p q c)', p=patch, q=patch)


def masked_patch_loss(pred: torch.Tensor, images: torch.Tensor, mask: torch.Tensor, patch: int,
                      norm_pix: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """Mean over hidden patches of the per-patch mean squared error between ``pred`` 'b n (p p c)' and the
    (per-patch normalised) pixels of ``images``."""
    target = patchify(images.float(), patch)
    if norm_pix:
        mean, var = target.mean(dim=-1, keepdim=True), target.var(dim=-1, keepdim=True)
        target = (target - mean) / (var + eps).sqrt()
    per_patch = ((pred.float() - target) ** 2).mean(dim=-1)  # b n
    return (per_patch * mask).sum() / mask.sum()


@MODELS.register_module()
class MAEPretrainer(NoWeightDecay, TaskModel):
    """MAE on a zoo ViT ``backbone`` (``dict(name='vit_base_patch16_224', ...)``); see the module docstring. The mask
    token takes no weight decay (as MAE's own recipe)."""
    no_weight_decay_names = ('mask_token',)

    def __init__(self, backbone: dict, mask_ratio: float = 0.75, decoder_dim: int = 512, decoder_depth: int = 8,
                 decoder_heads: int = 16, norm_pix_loss: bool = True, data_preprocessor=None, init_cfg=None):
        super().__init__(data_preprocessor=MODELS.build(data_preprocessor or dict(type='DensePreprocessor')),
                         init_cfg=init_cfg)
        options = dict(backbone)
        self.backbone = zoo.create_backbone(options.pop('name'), **options)
        if not isinstance(self.backbone, ViTEncoder):
            raise ValueError(f"MAE needs a plain ViT backbone (patch embedding + blocks: a vit_* or deit_* name), not "
                             f"{type(self.backbone).__name__}")
        dim, self.patch = self.backbone.embed_dim, self.backbone.patch_size
        self.mask_ratio, self.norm_pix_loss = mask_ratio, norm_pix_loss
        self.encoder_norm = nn.LayerNorm(dim, eps=1e-6)
        self.decoder_embed = nn.Linear(dim, decoder_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_dim))
        self.decoder_blocks = nn.ModuleList(Block(decoder_dim, **vit_parts(decoder_dim, decoder_heads))
                                            for _ in range(decoder_depth))
        self.decoder_norm = nn.LayerNorm(decoder_dim, eps=1e-6)
        self.decoder_pred = nn.Linear(decoder_dim, self.patch * self.patch * 3)
        for part in (self.decoder_embed, self.decoder_blocks, self.decoder_pred):
            part.apply(init_linear)
        nn.init.normal_(self.mask_token, std=0.02)

    def encode(self, images: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """The encoder on the visible patches 'b v' (plus the prefix tokens): 'b (p + v) d'."""
        tokens, grid = self.backbone.embed(images)  # b (p + n) d, positions added
        prefix = self.backbone.num_prefix_tokens
        visible = tokens[:, prefix:].gather(1, keep[..., None].expand(-1, -1, tokens.shape[-1]))  # b v d
        x, _ = self.backbone.run_blocks(torch.cat([tokens[:, :prefix], visible], dim=1), grid=None)
        return self.encoder_norm(x)

    def decode(self, latent: torch.Tensor, restore: torch.Tensor, grid) -> torch.Tensor:
        """Pixels of every patch, 'b n (p p c)', from the encoded visible tokens and mask tokens."""
        prefix = self.backbone.num_prefix_tokens
        x = self.decoder_embed(latent)  # b (p + v) e
        hidden = restore.shape[1] - (x.shape[1] - prefix)
        shuffled = torch.cat([x[:, prefix:], self.mask_token.expand(x.shape[0], hidden, -1)], dim=1)  # b n e
        patches = shuffled.gather(1, restore[..., None].expand(-1, -1, x.shape[-1]))  # back to grid order
        x = torch.cat([x[:, :prefix], patches + sincos_2d(grid, x.shape[-1]).to(x)], dim=1)
        for block in self.decoder_blocks:
            x = block(x)
        return self.decoder_pred(self.decoder_norm(x))[:, prefix:]

    def forward(self, inputs: torch.Tensor, data_samples=None, mode: str = 'tensor'):
        b, _, height, width = inputs.shape
        grid = (height // self.patch, width // self.patch)
        keep, restore, mask = random_masking(b, grid[0] * grid[1], self.mask_ratio, inputs.device)
        pred = self.decode(self.encode(inputs, keep), restore, grid)
        if mode == 'loss':
            return {'loss_mae': masked_patch_loss(pred, inputs, mask, self.patch, self.norm_pix_loss)}
        if mode == 'tensor':
            return pred, mask
        raise ValueError(f"MAEPretrainer has modes 'loss' and 'tensor', got {mode!r}")
