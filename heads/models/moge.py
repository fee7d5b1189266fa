"""MoGe-2 (Wang et al. 2025, "MoGe-2: Accurate Monocular Geometry with Metric Scale and Sharp Details";
microsoft/MoGe ``moge.model.v2.MoGeModel``): a metric point map, normals and a validity mask from one image.

Parts: this project's DINOv2 (:class:`ZooBackbone`, four taps through its final norm), ``projections`` (a 1x1 conv per
tap, summed: 'b c h w'), the normalised view-plane UV concatenated at each of five levels (the token grid 'h w' and
its 2x, 4x, 8x, 16x), the :class:`~heads.necks.ConvStack` neck and :class:`~heads.decode_heads.MoGeHead` (points,
normal, mask, metric scale; their meaning there). ``model(image, num_tokens)`` takes images 'b 3 H W' in [0, 1] (it
normalises them with ImageNet's mean and std) resized to a token grid of about ``num_tokens`` patches at the image's
aspect, and returns the authors' ``forward`` outputs at 'H W'.

``moge2_config(encoder, normal)`` is the model config of the released sizes ('vitl' from the authors'
``configs/train/v2.json``; 'vitb' and 'vits' derived, not confirmed: :data:`MOGE2`); their checkpoints
(``encoder.*``, ``neck.*``, ``*_head.*`` keys) load through the ``'MoGe-2'`` row of
:data:`heads.layouts.table.LAYOUTS` (:mod:`heads.layouts.moge`). ``model.infer(image)`` is their ``infer`` in float32
(:mod:`.moge_infer`: focal and shift recovery, intrinsics, depth, metric points). Not here yet: training, export.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.registry import IMAGENET_MEAN, IMAGENET_STD

from ..necks.conv_stack import ConvStack
from ..registry import MODELS
from .dense_model import build
from .moge_infer import moge2_infer
from .moge_uv import token_grid, view_plane_uv

#: encoder -> (backbone name, tapped blocks, width of the projections and the first level). 'vitl' is the authors'
#: configs/train/v2.json; 'vitb' and 'vits' are derived (the model cards were not reachable): their taps the quarters
#: of 12 blocks and their first-level width the backbone's (key/shape-checked against the authors' code at these
#: widths only; the parameter counts, 107.5M and 36.9M, are above the README's 104M and 35M).
MOGE2 = {
    'vits': ('vit_small_patch14_dinov2', (2, 5, 8, 11), 384),
    'vitb': ('vit_base_patch14_dinov2', (2, 5, 8, 11), 768),
    'vitl': ('vit_large_patch14_dinov2', (5, 11, 17, 23), 1024),
}
LEVEL_WIDTHS = (256, 128, 64, 32)  # the levels after the first (all sizes)
RESAMPLERS = ('conv_transpose', 'conv_transpose', 'conv_transpose', 'bilinear')


def _stack(dim_in, dim_out, widths, blocks) -> dict:
    return dict(dim_in=dim_in, dim_out=dim_out, dim_res_blocks=list(widths), num_res_blocks=list(blocks),
                res_block_in_norm='none', res_block_hidden_norm='none', resamplers=list(RESAMPLERS))


def moge2_config(encoder: str = 'vitl', normal: bool = True, **backbone_overrides) -> dict:
    """The model config of MoGe-2 ``encoder`` ('vits', 'vitb', 'vitl'), with a normal head or not (the released
    models: moge-2-vitl without, moge-2-vit{s,b,l}-normal with)."""
    if encoder not in MOGE2:
        raise ValueError(f"unknown MoGe-2 encoder {encoder!r}; choose one of {', '.join(MOGE2)}")
    name, taps, width = MOGE2[encoder]
    widths = (width, *LEVEL_WIDTHS)
    head = _stack(list(widths), None, widths, (0, 1, 1, 1, 0))
    backbone = dict(type='ZooBackbone', name=name, out_indices=taps, tap_norm=True, pos_interp='dinov2',
                    pos_antialias=False, **backbone_overrides)
    return dict(type='MoGe2', backbone=backbone, dim_proj=width,
                neck=_stack([width + 2, 2, 2, 2, 2], None, widths, (0, 2, 2, 2, 0)),
                head=dict(type='MoGeHead', points={**head, 'dim_out': [None] * 4 + [3]},
                          normal={**head, 'dim_out': [None] * 4 + [3]} if normal else None,
                          mask={**head, 'dim_out': [None] * 4 + [1]}, scale_dims=[None, width, width, 1],
                          remap_output='exp'))


#: the authors' hub names of DINOv2 -> ours
BACKBONES = {'dinov2_vits14': 'vit_small_patch14_dinov2', 'dinov2_vitb14': 'vit_base_patch14_dinov2',
             'dinov2_vitl14': 'vit_large_patch14_dinov2', 'dinov2_vitg14': 'vit_giant_patch14_dinov2'}


def moge2_config_from_authors(model_config: dict, **backbone_overrides) -> dict:
    """Our model config from the authors' ``model_config`` (saved beside ``model`` in their ``model.pt``; the kwargs
    of their ``MoGeModel``): with it a released checkpoint builds exactly, whatever its sizes."""
    encoder = model_config['encoder']
    taps = encoder['intermediate_layers']
    if isinstance(taps, int):
        raise ValueError(f"encoder.intermediate_layers={taps} (the last {taps} blocks): give the block indices")
    name = backbone_overrides.pop('name', None) or BACKBONES.get(encoder['backbone'])
    if name is None:
        raise ValueError(f"unknown DINOv2 {encoder['backbone']!r} in the MoGe-2 config; known: {', '.join(BACKBONES)}")
    backbone = dict(type='ZooBackbone', name=name, out_indices=tuple(taps), tap_norm=True, pos_interp='dinov2',
                    pos_antialias=False, **backbone_overrides)
    heads = {k: model_config.get(f'{k}_head') for k in ('points', 'normal', 'mask')}
    scale = model_config.get('scale_head')
    return dict(type='MoGe2', backbone=backbone, dim_proj=encoder['dim_out'], neck=dict(model_config['neck']),
                head=dict(type='MoGeHead', **heads, scale_dims=scale['dims'] if scale else None,
                          remap_output=model_config.get('remap_output', 'linear')),
                num_tokens_range=tuple(model_config.get('num_tokens_range', (1200, 3600))))


@MODELS.register_module()
class MoGe2(nn.Module):
    """MoGe-2 (module docstring). ``neck``: ConvStack kwargs; ``head``: a MoGeHead config (``scale_dims[0]`` None:
    the backbone's width); ``num_tokens_range``: the authors' token counts of resolution levels 0 and 9."""

    def __init__(self, backbone: dict, dim_proj: int, neck: dict, head: dict,
                 num_tokens_range: tuple[int, int] = (1200, 3600)):
        super().__init__()
        self.backbone = build(backbone)
        self.projections = nn.ModuleList(nn.Conv2d(c, dim_proj, 1) for c in self.backbone.out_channels)
        self.neck = ConvStack(**neck)
        head = dict(head)
        if head.get('scale_dims') and head['scale_dims'][0] is None:
            head['scale_dims'] = [self.backbone.out_channels[-1], *head['scale_dims'][1:]]
        self.head = build(head)
        self.num_tokens_range = tuple(num_tokens_range)
        self.register_buffer('mean', torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer('std', torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def num_tokens(self, resolution_level: int = 9) -> int:
        """The authors' token count of ``resolution_level`` 0 .. 9."""
        low, high = self.num_tokens_range
        return int(low + resolution_level / 9 * (high - low))

    def forward(self, image: torch.Tensor, num_tokens: int) -> dict:
        """'b 3 H W' in [0, 1] -> ``points``, ``normal``, ``mask``, ``metric_scale`` (:mod:`..decode_heads.moge`)."""
        b, _, height, width = image.shape
        rows, cols = token_grid(num_tokens, height, width)
        patch = self.backbone.out_strides[-1]
        x = F.interpolate(image, (rows * patch, cols * patch), mode='bilinear', align_corners=False, antialias=True)
        taps = self.backbone.forward_taps((x - self.mean) / self.std)
        features = sum(project(m) for project, m in zip(self.projections, taps.maps))
        cls_token = taps.prefix[-1][:, 0]
        aspect = width / height
        uv = [view_plane_uv(rows * 2 ** i, cols * 2 ** i, aspect, image.dtype, image.device).expand(b, -1, -1, -1)
              for i in range(len(self.neck.res_blocks))]
        levels = self.neck([torch.cat([features, uv[0]], dim=1), *uv[1:]])
        return self.head(levels, cls_token, (height, width))

    def infer(self, image: torch.Tensor, **kwargs) -> dict:
        """The authors' ``infer``: metric points, depth, intrinsics, mask, normal (:func:`.moge_infer.moge2_infer`)."""
        return moge2_infer(self, image, **kwargs)
