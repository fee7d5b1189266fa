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

    def __init__(self, config: dict, source):
        self.config, self.source = config, source

    def fail(self, name: str, wanted: str):
        value = self.config.get(name)
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + '...'
        raise HFConfigError(f"{self.source}: field {name!r} must be {wanted}, got {shown} "
                            f"({type(value).__name__}); fix or remove it (a transformers DPTConfig writes it so)")

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
    defaults for absent ones. Refuses configs of other models and of hybrid or external backbones."""
    if config.get('model_type') != 'dpt':
        raise HFConfigError(f"{source}: not a DPT config (model_type={config.get('model_type')!r})")
    if config.get('is_hybrid') or config.get('backbone_config') or config.get('backbone'):
        raise HFConfigError(f"{source}: only DPT with a plain ViT backbone is supported (dpt-large, dpt-large-ade, "
                            f"base); hybrid and external backbones are not")
    f = _Fields(config, source)
    if f.get('hidden_act', 'gelu') != 'gelu':
        f.fail('hidden_act', "'gelu' (the activation of this project's ViT blocks)")
    hidden, layers = f.integer('hidden_size'), f.integer('num_hidden_layers', minimum=1)
    heads = f.integer('num_attention_heads')
    if hidden % heads:
        f.fail('num_attention_heads', f"a divisor of hidden_size {hidden}")
    taps = f.integers('backbone_out_indices', None, 0, layers - 1)
    if taps != sorted(set(taps)):
        f.fail('backbone_out_indices', f"distinct increasing block indices below num_hidden_layers {layers}")
    architectures = config.get('architectures') or ['DPTForDepthEstimation']
    if not isinstance(architectures, list) or architectures[0] not in ARCHITECTURES:
        f.fail('architectures', f"a list starting with {' or '.join(ARCHITECTURES)}")
    id2label = config.get('id2label') or {}
    if not isinstance(id2label, dict):
        f.fail('id2label', 'an object mapping class ids to names')
    return dict(
        architecture=architectures[0], hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=f.integer('intermediate_size'), image_size=f.integer('image_size', 384),
        patch_size=f.integer('patch_size', 16), qkv_bias=f.flag('qkv_bias', True),
        layer_norm_eps=f.number('layer_norm_eps', 1e-12, 0.0, 1.0), backbone_out_indices=taps,
        readout_type=f.choice('readout_type', 'project', READOUTS),
        neck_hidden_sizes=f.integers('neck_hidden_sizes', len(taps), 1, 1 << 16),
        fusion_hidden_size=f.integer('fusion_hidden_size'),
        use_batch_norm_in_fusion_residual=f.flag('use_batch_norm_in_fusion_residual', False),
        use_bias_in_fusion_residual=f.flag('use_bias_in_fusion_residual', None, allow_none=True),
        reassemble_factors=f.numbers('reassemble_factors', [4, 2, 1, 0.5], len(taps)),
        num_classes=len(id2label) or f.integer('num_labels', 150),
        semantic_classifier_dropout=f.number('semantic_classifier_dropout', 0.1, 0.0, 0.99),
        use_auxiliary_head=f.flag('use_auxiliary_head', True),
        auxiliary_loss_weight=f.number('auxiliary_loss_weight', 0.4, 0.0, 1e3),
        add_projection=f.flag('add_projection', False))


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
