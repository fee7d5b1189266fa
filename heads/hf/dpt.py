"""Hugging Face transformers DPT checkpoints (ViT or DPT-Hybrid backbone) as this project's Segmentor / DepthEstimator.

:func:`heads.hf.folder.from_pretrained_hf` reads ``config.json`` and ``model.safetensors`` (or
``pytorch_model.bin``) as written by ``DPTForSemanticSegmentation`` / ``DPTForDepthEstimation.save_pretrained``,
builds our model from that config (:func:`model_config_from_hf`) and loads the weights converted by
:mod:`heads.layouts.hf` (the ``'transformers dpt'`` row of :data:`heads.layouts.table.LAYOUTS`). The conversion is
exact: HF's separate query/key/value Linears become one fused qkv Linear, and the position table is resampled
bilinearly as HF does. ``config.json`` is untrusted input: its fields are type-checked before use
(:mod:`heads.hf.config`, :class:`HFConfigError`).

DPT-Hybrid (``is_hybrid``): the BiT ResNet becomes :mod:`zoo.backbones.vit_hybrid`'s, tapped at stages 0 and 1 and at
the blocks ``backbone_out_indices[2:]`` (transformers ignores the first two indices); the neck takes the two stage
maps as they are (``plain_levels``), as transformers' Identity reassemble layers do.
"""
from __future__ import annotations

from zoo.weights import CheckpointError  # noqa: F401  (API)

from .config import HFConfigError, check_literal, hf_dpt_fields, read_config_json  # noqa: F401  (re-exported)
from .model_size import check_blocks, check_grid, check_model_size

HF_MEAN, HF_STD = (127.5, 127.5, 127.5), (127.5, 127.5, 127.5)  # DPTImageProcessor: 0.5 / 0.5 on 0-1

def model_config_from_hf(config: dict, source='config.json') -> dict:
    """Our model config (a dict for the MODELS registry) equivalent to an HF DPTConfig dict; every field used is
    checked first (:func:`heads.hf.config.hf_dpt_fields`, errors name ``source``), and the result holds only
    numbers, booleans, None and identifiers (:func:`heads.hf.config.check_literal`); the model it describes is
    refused above :mod:`heads.hf.model_size`'s bounds before anything is allocated."""
    f = hf_dpt_fields(config, source)
    check_grid(source, f['image_size'], 16 if f['is_hybrid'] else f['patch_size'])
    check_blocks(source, {'num_hidden_layers': f['num_hidden_layers'],
                          **({'backbone_config.depths': sum(f['bit']['layers'])} if f['is_hybrid'] else {})})
    hidden, fusion = f['hidden_size'], f['fusion_hidden_size']
    backbone = dict(type='ZooBackbone', name='vit_base_patch16_224', img_size=f['image_size'],
                    patch_size=f['patch_size'], embed_dim=hidden, depth=f['num_hidden_layers'],
                    num_heads=f['num_attention_heads'], mlp_ratio=f['intermediate_size'] / hidden,
                    qkv_bias=f['qkv_bias'], norm_eps=f['layer_norm_eps'], pos_interp='bilinear',
                    pos_antialias=False, out_indices=f['backbone_out_indices'])
    out_strides = [int(f['patch_size'] / factor) for factor in f['reassemble_factors']]
    neck = dict(type='DPTNeck', readout=f['readout_type'], hidden_channels=f['neck_hidden_sizes'],
                fusion_channels=fusion, fusion_batch_norm=f['use_batch_norm_in_fusion_residual'],
                fusion_bias=f['use_bias_in_fusion_residual'], out_strides=out_strides)
    if f['is_hybrid']:  # levels: BiT stages 0 and 1 (strides 4, 8), then the blocks backbone_out_indices[2:]
        bit = f['bit']
        del backbone['patch_size']
        backbone.update(name='vit_base_r50_s16_384', **bit,
                        out_indices=[0, 1, *(len(bit['layers']) + i for i in f['backbone_out_indices'][2:])])
        neck.update(plain_levels=[0, 1], out_strides=[4, 8, *out_strides[2:]])
    preprocessor = dict(type='DensePreprocessor', mean=HF_MEAN, std=HF_STD, size_divisor=32)
    if f['architecture'] == 'DPTForSemanticSegmentation':
        head = dict(type='DPTSegHead', num_classes=f['num_classes'], in_channels=fusion,
                    dropout=f['semantic_classifier_dropout'])
        aux = dict(type='DPTSegHead', num_classes=f['num_classes'], in_channels=fusion, upsample=False) \
            if f['use_auxiliary_head'] else None
        model = dict(type='Segmentor', backbone=backbone, neck=neck, decode_head=head, auxiliary_head=aux,
                     aux_weight=f['auxiliary_loss_weight'], data_preprocessor=preprocessor)
    else:
        head = dict(type='DPTDepthHead', in_channels=fusion, mode='relative', projection=f['add_projection'])
        model = dict(type='DepthEstimator', backbone=backbone, neck=neck, decode_head=head,
                     data_preprocessor=preprocessor)
    check_literal(model)
    check_model_size(model, source, {k: f[k] for k in SIZE_FIELDS})
    return model


#: The fields that set a DPT's size, named when it is too big.
SIZE_FIELDS = ('image_size', 'patch_size', 'hidden_size', 'num_hidden_layers', 'intermediate_size',
               'neck_hidden_sizes', 'fusion_hidden_size', 'num_classes')
