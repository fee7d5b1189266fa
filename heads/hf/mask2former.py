"""transformers' ``Mask2FormerForUniversalSegmentation`` folders (a Swin backbone) as this project's
:class:`heads.models.mask2former.Mask2Former`, with identical class and mask logits at any input size (the Swin built
with transformers' window layout, ``window_layout='mmseg'``: :func:`heads.hf.upernet.swin_fields`).

:func:`mask2former_config_from_hf` checks every ``config.json`` field it reads (:class:`heads.hf.config.HFConfigError`
names the field) and builds our model config; the weights' layout is :mod:`heads.layouts.hf_mask2former`'s;
:func:`heads.from_pretrained_hf` builds and loads ``model_type`` 'mask2former' with them.
"""
from __future__ import annotations

from .config import HFConfigError, _Fields, check_literal, mask_loss_fields
from .model_size import check_blocks, check_model_size
from .upernet import swin_fields


def _swin_fields(config: dict, source) -> dict:
    """The Swin backbone's checked fields (:func:`heads.hf.upernet.swin_fields`, built with transformers' window
    layout), as a ``ZooBackbone`` config; all four stages tapped."""
    inner = config.get('backbone_config')
    if not isinstance(inner, dict) or inner.get('model_type') != 'swin' or config.get('backbone'):
        raise HFConfigError(f"{source}: only a Swin backbone (backbone_config with model_type 'swin') is supported, "
                            f"got {inner.get('model_type') if isinstance(inner, dict) else inner!r}")
    fields = swin_fields(config, source)
    if fields['out_indices'] != [0, 1, 2, 3]:
        raise HFConfigError(f"{source}: backbone_config field 'out_features' must name all four stages "
                            f"['stage1', 'stage2', 'stage3', 'stage4'] (Mask2Former reads all four)")
    return dict(type='ZooBackbone', name='swin_tiny_patch4_window7_224', **fields)


def mask2former_config_from_hf(config: dict, source='config.json') -> dict:
    """Our Mask2Former model config equivalent to a transformers ``Mask2FormerConfig`` dict (fields checked)."""
    if config.get('model_type') != 'mask2former':
        raise HFConfigError(f"{source}: not a Mask2Former config (model_type={config.get('model_type')!r})")
    f = _Fields(config, source)
    backbone = _swin_fields(config, source)
    for name, wanted in (('activation_function', 'relu'), ('pre_norm', False)):
        if config.get(name, wanted) != wanted:
            f.fail(name, repr(wanted) + " (the post-norm ReLU decoder Mask2Former trains)")
    if f.get('feature_strides', [4, 8, 16, 32]) != [4, 8, 16, 32]:
        f.fail('feature_strides', '[4, 8, 16, 32] (the Swin stages)')
    id2label = config.get('id2label') or {}
    if not isinstance(id2label, dict):
        f.fail('id2label', 'an object mapping class ids to names')
    channels, hidden, mask = f.integer('feature_size', 256), f.integer('hidden_dim', 256), \
        f.integer('mask_feature_size', 256)
    if channels % 32:
        f.fail('feature_size', 'a multiple of 32 (GroupNorm(32))')
    heads = f.integer('num_attention_heads', 8)
    for name, width in (('feature_size', channels), ('hidden_dim', hidden)):
        if width % heads or width % 4:
            f.fail(name, f"a multiple of 4 and of num_attention_heads {heads}")
    layers = f.integer('decoder_layers', 10)
    dropout = f.number('dropout', 0.0, 0.0, 0.99)
    check_blocks(source, {'encoder_layers': f.integer('encoder_layers', 6), 'decoder_layers': layers,
                          'backbone_config.depths': sum(backbone['depths'])})
    pixel_decoder = dict(type='Mask2FormerPixelDecoder', channels=channels, mask_channels=mask,
                         num_layers=f.integer('encoder_layers', 6, minimum=0), num_heads=heads,
                         ffn_channels=f.integer('encoder_feedforward_dim', 1024),
                         common_stride=f.integer('common_stride', 4), dropout=dropout)
    decoder = dict(type='Mask2FormerTransformerDecoder', num_classes=len(id2label) or f.integer('num_labels', 150),
                   in_channels=channels, channels=hidden, mask_channels=mask,
                   num_queries=f.integer('num_queries', 100), num_layers=layers - 1, num_heads=heads,
                   ffn_channels=f.integer('dim_feedforward', 2048),
                   input_proj=f.flag('enforce_input_projection', False), dropout=dropout)
    loss = mask_loss_fields(f)
    model = dict(type='Mask2Former', backbone=backbone, pixel_decoder=pixel_decoder, decoder=decoder, loss=loss)
    check_literal(model)
    check_model_size(model, source, {k: config.get(k) for k in ('feature_size', 'hidden_dim', 'num_queries',
                                                                'decoder_layers', 'encoder_layers')})
    return model
