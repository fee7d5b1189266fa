"""transformers' ``UperNetForSemanticSegmentation`` with a Swin backbone -> this project's :class:`Segmentor`.

``upernet_config_from_hf(config)`` turns an UperNet ``config.json`` (``model_type`` 'upernet', ``backbone_config``
a transformers ``SwinConfig``) into our model config: ``ZooBackbone`` Swin tapping the ``out_features`` stages with
their per-stage norms, the :class:`heads.necks.PyramidLevels` neck (the stage maps as they are), :class:`UPerHead`
(``hidden_size`` channels, ``pool_scales``; no dropout: transformers' head has none) and :class:`FCNHead` on level 2
(``auxiliary_*`` fields). The weights' layout is :mod:`heads.layouts.upernet`'s.
:func:`heads.hf.folder.from_pretrained_hf` dispatches here by ``model_type``.

Every field used is checked (:class:`heads.hf.config.HFConfigError` names the file and field). The Swin is built
with ``window_layout='mmseg'``: transformers' ``SwinBackbone`` pads each stage map to window multiples before its
cyclic shift and keeps the built window on any map, as mmseg does, so the two agree at every input size.
"""
from __future__ import annotations

from ..models.preprocessor import IMAGENET_MEAN_255, IMAGENET_STD_255  # UperNet's image processor's
from .config import HFConfigError, _Fields, check_literal
from .model_size import check_blocks, check_model_size

_STAGES = ('stage1', 'stage2', 'stage3', 'stage4')


def swin_fields(config: dict, source) -> dict:
    """The checked Swin ``backbone_config`` of an UperNet config, as ``ZooBackbone`` arguments."""
    swin = config.get('backbone_config')
    if config.get('backbone') or not isinstance(swin, dict) or swin.get('model_type') != 'swin':
        raise HFConfigError(f"{source}: only UperNet with a transformers Swin backbone_config (model_type 'swin') is "
                            f"supported, got backbone={config.get('backbone')!r}, backbone_config model_type="
                            f"{swin.get('model_type') if isinstance(swin, dict) else swin!r}")
    b = _Fields(swin, f"{source}: backbone_config", 'SwinConfig')
    if b.get('hidden_act', 'gelu') != 'gelu':
        b.fail('hidden_act', "'gelu'")
    if b.flag('use_absolute_embeddings', False):
        b.fail('use_absolute_embeddings', 'false (this project\'s Swin has no absolute position table)')
    if b.number('layer_norm_eps', 1e-5, 0.0, 1.0) != 1e-5:
        b.fail('layer_norm_eps', '1e-05 (LayerNorm\'s default, as the Swin here)')
    depths = b.integers('depths', None, 1, 64)
    heads = b.integers('num_heads', len(depths), 1, 1 << 10)
    embed_dim = b.integer('embed_dim')
    if any(embed_dim * 2 ** i % h for i, h in enumerate(heads)):
        b.fail('num_heads', f"divisors of each stage's width {[embed_dim * 2 ** i for i in range(len(depths))]}")
    out_features = swin.get('out_features') or list(_STAGES[:len(depths)])
    if not isinstance(out_features, list) or out_features != sorted(set(out_features), key=out_features.index) or \
            not all(f in _STAGES[:len(depths)] for f in out_features) or out_features != sorted(out_features):
        b.fail('out_features', f"increasing stage names among {list(_STAGES[:len(depths)])}")
    return dict(img_size=b.integer('image_size', 224), patch_size=b.integer('patch_size', 4),
                in_chans=b.integer('num_channels', 3), embed_dim=embed_dim, depths=depths, num_heads=heads,
                window=b.integer('window_size', 7), mlp_ratio=b.number('mlp_ratio', 4.0, 0.0625, 64),
                qkv_bias=b.flag('qkv_bias', True), drop_path_rate=b.number('drop_path_rate', 0.1, 0.0, 1.0),
                out_indices=[_STAGES.index(f) for f in out_features], window_layout='mmseg')


def upernet_config_from_hf(config: dict, source='config.json') -> dict:
    """Our Segmentor config equivalent to a transformers UperNet (Swin) config dict (see the module docstring)."""
    if config.get('model_type') != 'upernet':
        raise HFConfigError(f"{source}: not an UperNet config (model_type={config.get('model_type')!r})")
    f = _Fields(config, source, 'UperNetConfig')
    backbone = dict(type='ZooBackbone', name='swin_tiny_patch4_window7_224', **swin_fields(config, source))
    check_blocks(source, {'backbone_config.depths': sum(backbone['depths'])})
    widths = [backbone['embed_dim'] * 2 ** i for i in backbone['out_indices']]
    id2label = config.get('id2label') or {}
    if not isinstance(id2label, dict):
        f.fail('id2label', 'an object mapping class ids to names')
    classes = len(id2label) or f.integer('num_labels', 150)
    channels = f.integer('hidden_size', 512)
    pool_scales = f.integers('pool_scales', None, 1, 1 << 10) if 'pool_scales' in config else [1, 2, 3, 6]
    head = dict(type='UPerHead', in_channels=widths, num_classes=classes, channels=channels, pool_scales=pool_scales,
                dropout=0.0)
    aux = None
    if f.flag('use_auxiliary_head', True):
        if len(widths) < 3:
            f.fail('use_auxiliary_head', 'false for fewer than 3 backbone stages (the FCN head reads the third)')
        aux = dict(type='FCNHead', in_channels=f.integer('auxiliary_in_channels', widths[2]), num_classes=classes,
                   channels=f.integer('auxiliary_channels', 256), num_convs=f.integer('auxiliary_num_convs', 1, 0),
                   concat_input=f.flag('auxiliary_concat_input', False), in_index=2, dropout=0.0)
    model = dict(type='Segmentor', backbone=backbone, neck=dict(type='PyramidLevels'), decode_head=head,
                 auxiliary_head=aux, aux_weight=f.number('auxiliary_loss_weight', 0.4, 0.0, 1e3),
                 data_preprocessor=dict(type='DensePreprocessor', mean=IMAGENET_MEAN_255, std=IMAGENET_STD_255,
                                        size_divisor=32))
    check_literal(model)
    check_model_size(model, source, {'backbone_config.embed_dim': backbone['embed_dim'],
                                     'backbone_config.depths': backbone['depths'], 'hidden_size': channels,
                                     'num_labels': classes})
    return model
