"""The fields of a Hugging Face DPT ``config.json`` this project reads, checked before any is used.

A ``config.json`` comes from outside (a downloaded folder) and its values end up in a model config that
``tools/convert_weights.py`` writes as Python source. So every field the converter uses is checked against its
type and range here (:func:`hf_dpt_fields`), fields it does not use are ignored, and the model config built from
them is checked to hold nothing but numbers, booleans, None and plain identifiers (:func:`check_literal`), so
that no string from outside can become code, escaped or not.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from zoo.weights import CheckpointError


class HFConfigError(CheckpointError):
    """A ``config.json`` field of the wrong type or range; the message names the file and the field."""


READOUTS = ('ignore', 'add', 'project')
ARCHITECTURES = ('DPTForSemanticSegmentation', 'DPTForDepthEstimation')
_IDENTIFIER = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def read_config_json(path: Path) -> dict:
    """The JSON object in ``path``, or an :class:`HFConfigError` saying why it is none."""
    try:
        value = json.loads(Path(path).read_bytes())
    except (ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise HFConfigError(f"{path} is not valid JSON: {err}") from err
    if not isinstance(value, dict):
        raise HFConfigError(f"{path} must hold a JSON object of config fields, got a {type(value).__name__}")
    return value


class _Fields:
    """Typed access to a config dict; every failure names the file and the field."""

    def __init__(self, config: dict, source, writer: str = 'DPTConfig'):
        self.config, self.source, self.writer = config, source, writer  # writer: the transformers config class

    def fail(self, name: str, wanted: str):
        value = self.config.get(name)
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + '...'
        raise HFConfigError(f"{self.source}: field {name!r} must be {wanted}, got {shown} "
                            f"({type(value).__name__}); fix or remove it (a transformers {self.writer} writes it so)")

    def get(self, name: str, default):
        return self.config.get(name, default) if self.config.get(name) is not None else default

    def integer(self, name: str, default=None, minimum: int = 1) -> int:
        value = self.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum or value > 1 << 20:
            self.fail(name, f"an integer from {minimum} to {1 << 20}" + ('' if default is None else ' (or absent)'))
        return value

    def number(self, name: str, default, low: float, high: float) -> float:
        value = self.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not low <= value <= high:
            self.fail(name, f"a number from {low:g} to {high:g}")
        return float(value)

    def flag(self, name: str, default, allow_none: bool = False):
        value = self.config.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(name, 'true or false' + (' or null' if allow_none else ''))
        return value

    def choice(self, name: str, default, choices) -> str:
        value = self.get(name, default)
        if value not in choices or not isinstance(value, str):
            self.fail(name, f"one of {', '.join(map(repr, choices))}")
        return value

    def integers(self, name: str, length: int | None, low: int, high: int) -> list[int]:
        value = self.config.get(name)
        if not isinstance(value, list) or not value or (length is not None and len(value) != length) or \
                not all(isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in value):
            count = f"{length} " if length is not None else ''
            self.fail(name, f"a list of {count}integers from {low} to {high}")
        return list(value)

    def numbers(self, name: str, default, length: int) -> list[float]:
        value = self.get(name, default)
        if not isinstance(value, list) or len(value) != length or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 1 / 64 <= v <= 64
                for v in value):
            self.fail(name, f"a list of {length} numbers from 1/64 to 64")
        return [float(v) for v in value]


def hf_dpt_fields(config: dict, source='config.json') -> dict:
    """The checked values of the DPT fields :func:`heads.hf.dpt.model_config_from_hf` uses, with transformers'
    defaults for absent ones; for DPT-Hybrid (``is_hybrid``) also its BiT backbone's (``bit``,
    :func:`hf_bit_fields`). Refuses configs of other models and of external backbones."""
    if config.get('model_type') != 'dpt':
        raise HFConfigError(f"{source}: not a DPT config (model_type={config.get('model_type')!r})")
    f = _Fields(config, source)
    hybrid = f.flag('is_hybrid', False)
    if config.get('backbone') or (config.get('backbone_config') and not hybrid):
        raise HFConfigError(f"{source}: only DPT with a ViT backbone (dpt-large, dpt-large-ade, base) or DPT-Hybrid "
                            f"(is_hybrid, a BiT backbone_config) is supported; external backbones are not")
    if f.get('hidden_act', 'gelu') != 'gelu':
        f.fail('hidden_act', "'gelu' (the activation of this project's ViT blocks)")
    hidden, layers = f.integer('hidden_size'), f.integer('num_hidden_layers', minimum=1)
    heads = f.integer('num_attention_heads')
    if hidden % heads:
        f.fail('num_attention_heads', f"a divisor of hidden_size {hidden}")
    taps = f.integers('backbone_out_indices', None, 0, layers - 1)
    blocks = taps[2:] if hybrid else taps  # DPT-Hybrid reads BiT stages 0 and 1 in place of the first two
    if blocks != sorted(set(blocks)):
        f.fail('backbone_out_indices', f"distinct increasing block indices below num_hidden_layers {layers}"
                                       + (" (from the third on, for DPT-Hybrid)" if hybrid else ''))
    architectures = config.get('architectures') or ['DPTForDepthEstimation']
    if not isinstance(architectures, list) or architectures[0] not in ARCHITECTURES:
        f.fail('architectures', f"a list starting with {' or '.join(ARCHITECTURES)}")
    id2label = config.get('id2label') or {}
    if not isinstance(id2label, dict):
        f.fail('id2label', 'an object mapping class ids to names')
    neck_hidden_sizes = f.integers('neck_hidden_sizes', len(taps), 1, 1 << 16)
    bit = hf_bit_fields(f, taps, neck_hidden_sizes) if hybrid else None
    return dict(
        is_hybrid=hybrid, bit=bit, architecture=architectures[0], hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=f.integer('intermediate_size'), image_size=f.integer('image_size', 384),
        patch_size=f.integer('patch_size', 16), qkv_bias=f.flag('qkv_bias', True),
        layer_norm_eps=f.number('layer_norm_eps', 1e-12, 0.0, 1.0), backbone_out_indices=taps,
        readout_type=f.choice('readout_type', 'project', READOUTS),
        neck_hidden_sizes=neck_hidden_sizes,
        fusion_hidden_size=f.integer('fusion_hidden_size'),
        use_batch_norm_in_fusion_residual=f.flag('use_batch_norm_in_fusion_residual', False),
        use_bias_in_fusion_residual=f.flag('use_bias_in_fusion_residual', None, allow_none=True),
        reassemble_factors=f.numbers('reassemble_factors', [4, 2, 1, 0.5], len(taps)),
        num_classes=len(id2label) or f.integer('num_labels', 150),
        semantic_classifier_dropout=f.number('semantic_classifier_dropout', 0.1, 0.0, 0.99),
        use_auxiliary_head=f.flag('use_auxiliary_head', True),
        auxiliary_loss_weight=f.number('auxiliary_loss_weight', 0.4, 0.0, 1e3),
        add_projection=f.flag('add_projection', False))


def hf_bit_fields(f: _Fields, taps: list[int], neck_hidden_sizes: list[int]) -> dict:
    """DPT-Hybrid's checked BiT fields (``backbone_config``, with transformers' DPT-Hybrid defaults: R50's three
    stages) as :class:`zoo.backbones.vit_hybrid.BiTResNet` arguments ``layers``, ``channels``, ``stem_chs`` and
    ``num_groups``; refuses what transformers' hybrid path does not run or this project does not build (another
    layer type or padding, dilation, more or fewer stages, a neck or projection that does not fit the stages)."""
    bit = f.config.get('backbone_config') or {}
    if not isinstance(bit, dict):
        f.fail('backbone_config', 'an object of BiT config fields (or absent)')
    b = _Fields(bit, f"{f.source}: backbone_config", 'BitConfig')
    if bit.get('model_type', 'bit') != 'bit':
        b.fail('model_type', "'bit' (DPT-Hybrid's backbone)")
    if b.choice('layer_type', 'bottleneck', ('bottleneck', 'preactivation')) != 'bottleneck':
        b.fail('layer_type', "'bottleneck' (the ViT-hybrid's post-activation ResNet)")
    padding = b.get('global_padding', 'same')
    if not isinstance(padding, str) or padding.lower() != 'same':
        b.fail('global_padding', "'same' (TensorFlow padding, as DPT-Hybrid uses)")
    if not b.flag('embedding_dynamic_padding', True):
        b.fail('embedding_dynamic_padding', "true ('SAME' max pooling in the stem)")
    if b.get('hidden_act', 'relu') != 'relu':
        b.fail('hidden_act', "'relu'")
    if b.integer('width_factor', 1) != 1:
        b.fail('width_factor', '1')
    if b.integer('output_stride', 32) < 16:
        b.fail('output_stride', 'at least 16 (no dilated stages)')
    if b.integer('num_channels', 3) != f.integer('num_channels', 3):
        b.fail('num_channels', f"the DPT config's num_channels {f.config.get('num_channels', 3)}")
    layers = b.integers('depths', 3, 1, 1 << 10) if 'depths' in bit else [3, 4, 9]
    channels = b.integers('hidden_sizes', 3, 4, 1 << 16) if 'hidden_sizes' in bit else [256, 512, 1024]
    stem, groups = b.integer('embedding_size', 64), b.integer('num_groups', 32)
    if bit.get('out_features') not in (None, ['stage1', 'stage2', 'stage3']):
        b.fail('out_features', "['stage1', 'stage2', 'stage3'] (DPT-Hybrid reads three stages)")
    if any(c % 4 for c in channels) or any(w % groups for w in [stem, *channels, *(c // 4 for c in channels)]):
        b.fail('num_groups', f"a divisor of embedding_size {stem}, hidden_sizes {channels} and their quarters")
    if f.integer('patch_size', 16) != 16:
        f.fail('patch_size', "16 (DPT-Hybrid's tokens are the BiT ResNet's stride-16 map)")
    if f.choice('readout_type', 'project', READOUTS) != 'project':
        f.fail('readout_type', "'project' (transformers' DPT-Hybrid supports no other)")
    if len(taps) < 3:
        f.fail('backbone_out_indices', "at least 3 indices (DPT-Hybrid: 2 ResNet stages, then tapped blocks)")
    if neck_hidden_sizes[:2] != channels[:2]:
        f.fail('neck_hidden_sizes', f"a list starting with the BiT stages' widths {channels[:2]} (DPT-Hybrid feeds "
                                    f"them to the fusion as they are)")
    shape = f.config.get('backbone_featmap_shape', [1, 1024, 24, 24])
    if not isinstance(shape, list) or len(shape) != 4 or shape[1] != channels[-1]:
        f.fail('backbone_featmap_shape', f"a list of 4 integers whose second is the last BiT width {channels[-1]}")
    return dict(layers=layers, channels=channels, stem_chs=stem, num_groups=groups)


def mask_loss_fields(f: _Fields) -> dict:
    """The mask-classification loss (:class:`heads.losses.mask_classification.MaskClassificationLoss`) from the fields
    transformers' Mask2Former and EoMT configs share: the three term weights, the no-object class weight and the
    point sampling."""
    return dict(class_weight=f.number('class_weight', 2.0, 0.0, 1e3),
                mask_weight=f.number('mask_weight', 5.0, 0.0, 1e3),
                dice_weight=f.number('dice_weight', 5.0, 0.0, 1e3),
                no_object_weight=f.number('no_object_weight', 0.1, 0.0, 1.0),
                num_points=f.integer('train_num_points', 12544),
                oversample_ratio=f.number('oversample_ratio', 3.0, 1.0, 1e3),
                importance_sample_ratio=f.number('importance_sample_ratio', 0.75, 0.0, 1.0))


def check_literal(value, where: str = 'model') -> None:
    """Raise :class:`HFConfigError` unless ``value`` is made only of dicts with identifier keys, lists/tuples,
    finite numbers, booleans, None and identifier-like strings: what can be written as Python source safely."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or not _IDENTIFIER.match(key):
                raise HFConfigError(f"model config key {key!r} at {where} is not a plain identifier")
            check_literal(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_literal(item, f"{where}.{index}")
    elif isinstance(value, float) and not math.isfinite(value):
        raise HFConfigError(f"model config value {where} is {value}, not a finite number")
    elif isinstance(value, str) and not _IDENTIFIER.match(value):
        raise HFConfigError(f"model config value {where} = {value!r} is not a plain identifier")
    elif not isinstance(value, (bool, int, float, str)) and value is not None:
        raise HFConfigError(f"model config value {where} is a {type(value).__name__}")
