"""Layer-wise learning-rate decay (BEiT/MAE fine-tuning): the deeper a backbone layer, the larger its learning rate.

    optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
                         constructor='LayerDecayOptimWrapperConstructor',
                         paramwise_cfg=dict(layer_decay_rate=0.65, backbone='backbone'))

Works for every config: the backbone's blocks are found by name in their registration (= depth) order, ``blocks.i``
(ViT, DeiT, CrossViT's multi-scale blocks) or ``stages.s.blocks.j`` (CvT, CoAtNet). Layer 0 is everything before
the first block (patch embedding, stem, position and prefix tokens), layer i the i-th block together with what is
registered between it and the next (CoAtNet's stage downsampling), and layer L + 1 everything outside the backbone
and its classifier head (``head``, ``head_dist``, ``fc_norm``). Learning-rate scale: ``rate ** (L + 1 - layer)``.
Weight decay is 0 for biases, norms and other 1-D parameters, and for the parameters the model's own modules
declare (position tables, prefix tokens, relative-position tables: :func:`zoo.core.no_weight_decay_of`, the
backbone contract's ``no_weight_decay``), as the recipes do.

``layer_decay_style='eomt'`` (EoMT's ``configure_optimizers``, Kerssies et al. 2025): the last block at the base
rate and each block below it one factor less, ``rate ** (L - layer)``, what precedes the first block at the first
block's rate, and what is registered after the last block (the final norm) at the base rate, as everything outside
the backbone. ``decay_every_param=True``: weight decay on every parameter, norms, biases and tokens too (EoMT's one
AdamW ``weight_decay`` for all groups).
"""
from __future__ import annotations

import re

from mmengine.optim import DefaultOptimWrapperConstructor
from torch import nn

from zoo.core import no_weight_decay_of

from ...registry import OPTIM_WRAPPER_CONSTRUCTORS

BLOCK = re.compile(r'^((?:stages\.\d+\.)?blocks\.\d+)\.')
HEAD = re.compile(r'^(head|head_dist|fc_norm)(\.|$)')
STYLES = ('beit', 'eomt')


def layer_ids(backbone: nn.Module) -> tuple[dict[str, int], int]:
    """``({parameter name in the backbone: layer}, number of blocks L)`` (see the module docstring)."""
    names = [name for name, _ in backbone.named_parameters()]
    blocks = list(dict.fromkeys(m.group(1) for name in names if (m := BLOCK.match(name))))
    ids, current = {}, 0
    for name in names:
        match = BLOCK.match(name)
        if match:
            current = blocks.index(match.group(1)) + 1
        ids[name] = len(blocks) + 1 if HEAD.match(name) else current
    return ids, len(blocks)


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """An optimizer wrapper whose parameter groups carry layer-wise learning-rate scales (module docstring).

    ``paramwise_cfg``: ``layer_decay_rate`` (e.g. 0.65 for ViT-B MAE fine-tuning, 0.75 ViT-L) and ``backbone``,
    the attribute holding the backbone (``'backbone'`` for the dense models, ``'classifier'`` for
    ImageClassifier); ``layer_decay_style``: 'beit' (default) or 'eomt'; ``decay_every_param`` (default False).
    Each group records ``layer_id`` and ``lr_scale``."""

    def add_params(self, params: list, module: nn.Module, prefix: str = '', is_dcn_module=None) -> None:
        rate = self.paramwise_cfg.get('layer_decay_rate', 1.0)
        backbone_name = self.paramwise_cfg.get('backbone', 'backbone')
        style = self.paramwise_cfg.get('layer_decay_style', 'beit')
        if style not in STYLES:
            raise ValueError(f"optim_wrapper.paramwise_cfg.layer_decay_style must be one of {STYLES}, got {style!r}")
        decay_all = bool(self.paramwise_cfg.get('decay_every_param', False))
        backbone = getattr(module, backbone_name, None)
        if backbone is None:
            raise ValueError(f"layer decay: {type(module).__name__} has no attribute {backbone_name!r}; set "
                             f"paramwise_cfg.backbone to the attribute holding the backbone")
        ids, depth = layer_ids(backbone)
        declared = no_weight_decay_of(module)
        for name, param in module.named_parameters():
            if not param.requires_grad:
                continue
            inner = name[len(backbone_name) + 1:] if name.startswith(backbone_name + '.') else None
            layer = ids[inner] if inner is not None else depth + 1
            no_decay = not decay_all and (param.ndim == 1 or name in declared)
            if style == 'eomt':  # the last block at the base rate, the embeddings with the first block
                scale = rate ** (depth - max(layer, 1)) if layer <= depth else 1.0
            else:
                scale = rate ** (depth + 1 - layer)
            group = {'params': [param], 'name': name, 'layer_id': layer, 'lr_scale': scale, 'lr': self.base_lr * scale}
            if self.base_wd is not None:
                group['weight_decay'] = 0.0 if no_decay else self.base_wd
            params.append(group)
