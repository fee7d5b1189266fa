"""Every field of an ONNX file's task metadata (:mod:`heads.export.metadata`) checked when the file is opened:
its type, its range, and that it fits the file's graph. The metadata is outside input (a file may be edited,
damaged or written elsewhere): a wrong field would otherwise run silently wrong ("false" read as true, an unknown
``test_cfg.mode`` run as 'whole', a depth task on a segmentation graph) or exhaust memory (a ``predict_scale`` of
100000). :func:`check_metadata` raises :class:`heads.export.onnx_file.OnnxFileError` naming the file and the field.
"""
from __future__ import annotations

import math

from .onnx_file import EXPORT_AGAIN, OnnxFileError

KEY = 'heads.task_model'  # the metadata entry of an exported task model (heads.export.metadata writes it)
VERSION = 1  # its format's version
TASK_OUTPUTS = {'Segmentor': ['seg_logits'], 'DepthEstimator': ['depth'],
                'MaskClassifier': ['class_logits', 'mask_logits']}
OUTPUT_RANKS = {'seg_logits': 4, 'depth': 4, 'class_logits': 3, 'mask_logits': 4}
REQUIRED = ('task', 'preprocessor', 'input_multiple', 'test_cfg', 'output')
MAX_MULTIPLE = 2048  # input_multiple, size_divisor and their lcm: what images are padded to multiples of
MAX_SIDE = 8192  # predict_scale, crop_size, stride: pixels
MAX_CLASSES = 100_000
PREPROCESSOR_KEYS = ('mean', 'std', 'size_divisor', 'pad_val', 'bgr_to_rgb')


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    return (is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


class Fields:
    """The checks, each naming the file ``path`` and the field."""

    def __init__(self, path):
        self.path = path

    def fail(self, field: str, problem: str):
        raise OnnxFileError(f"{self.path}: task metadata field '{field}' {problem}; the file's metadata was "
                            f"changed or damaged: {EXPORT_AGAIN}")

    def expect(self, field: str, value, ok: bool, what: str) -> None:
        if not ok:
            self.fail(field, f"must be {what}, got {_shown(value)} ({type(value).__name__})")

    def whole(self, field: str, value, low: int, high: int) -> None:
        self.expect(field, value, is_int(value) and low <= value <= high, f"a whole number in [{low}, {high}]")

    def pair(self, field: str, value, low: int, high: int) -> None:
        ok = isinstance(value, list) and len(value) == 2 and all(is_int(v) and low <= v <= high for v in value)
        self.expect(field, value, ok, f"a pair of whole numbers in [{low}, {high}]")

    def flag(self, field: str, value) -> None:
        self.expect(field, value, isinstance(value, bool), 'true or false (a JSON boolean)')

    def choice(self, field: str, value, choices) -> None:
        self.expect(field, value, isinstance(value, str) and value in choices, f"one of {list(choices)}")


def check_metadata(path, meta, outputs: dict[str, list], multiples=(1, 1)) -> None:
    """Check the task metadata ``meta`` of the ONNX file ``path``, whose graph has ``outputs`` ({name: dims}) and
    takes heights and widths that are ``multiples`` (h, w) of what its input names."""
    check = Fields(path)
    if not isinstance(meta, dict):
        raise OnnxFileError(f"{path}: the task metadata under '{KEY}' must be a JSON object, got "
                            f"{type(meta).__name__} {_shown(meta)}; {EXPORT_AGAIN}")
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise OnnxFileError(f"{path}: the task metadata under '{KEY}' lacks {', '.join(missing)}; {EXPORT_AGAIN}")
    if 'version' in meta:
        check.whole('version', meta['version'], 1, VERSION)
    check.choice('task', meta['task'], TASK_OUTPUTS)
    task = meta['task']
    if meta.get('relative') is not None:
        check.flag('relative', meta['relative'])
        if meta['relative'] and task != 'DepthEstimator':
            check.fail('relative', f"is true (a relative depth head) but the task is {task!r}")
    classes = _check_outputs(check, meta, outputs)
    _check_preprocessor(check, meta['preprocessor'])
    check.whole('input_multiple', meta['input_multiple'], 1, MAX_MULTIPLE)
    if any(meta['input_multiple'] % m for m in multiples):
        check.fail('input_multiple', f"is {meta['input_multiple']}, but the graph takes heights and widths that are "
                                     f"multiples of {'x'.join(map(str, multiples))}")
    divisor = meta['preprocessor'].get('size_divisor', 1)
    if math.lcm(divisor, meta['input_multiple']) > MAX_MULTIPLE:
        check.fail('preprocessor.size_divisor', f"{divisor} with input_multiple {meta['input_multiple']} pads "
                                                f"images to multiples of {math.lcm(divisor, meta['input_multiple'])}, "
                                                f"above {MAX_MULTIPLE}")
    if task == 'MaskClassifier':
        _check_test_cfg(check, meta['test_cfg'], 'mask', meta['input_multiple'], meta['num_classes'])
    else:
        _check_test_cfg(check, meta['test_cfg'], 'dense', meta['input_multiple'])
    if meta.get('predict_scale') is not None:
        check.pair('predict_scale', meta['predict_scale'], 1, MAX_SIDE)
    names = meta.get('classes')
    if names is not None:
        check.expect('classes', names, isinstance(names, list) and all(isinstance(n, str) for n in names),
                     'a list of class names (strings)')
        classes = max(classes or 0, len(names))
    _check_palette(check, meta.get('palette'), classes)


def _check_outputs(check: Fields, meta: dict, outputs: dict[str, list]) -> int | None:
    """The task's output names must be the graph's, of the task's rank and channels; returns the number of classes
    when the graph fixes it."""
    task = meta['task']
    expected = TASK_OUTPUTS[task]
    check.expect('output', meta['output'], meta['output'] == expected[0], f"{expected[0]!r} for a {task}")
    if task == 'MaskClassifier':
        check.expect('outputs', meta.get('outputs'), meta.get('outputs') == expected, f"{expected} for a {task}")
        check.whole('num_classes', meta.get('num_classes'), 1, MAX_CLASSES)
    for name in expected:
        if name not in outputs:
            raise OnnxFileError(f"{check.path}: its task metadata says {task}, whose output is {name!r}, but the "
                                f"graph's outputs are {list(outputs)}: the metadata does not belong to this graph; "
                                f"{EXPORT_AGAIN}")
        dims = outputs[name]
        if len(dims) != OUTPUT_RANKS[name]:
            raise OnnxFileError(f"{check.path}: graph output {name!r} has {len(dims)} dimensions, a {task}'s has "
                                f"{OUTPUT_RANKS[name]}: the metadata does not belong to this graph; {EXPORT_AGAIN}")
    if task == 'DepthEstimator' and outputs['depth'][1] not in (None, 1):
        raise OnnxFileError(f"{check.path}: its task metadata says DepthEstimator (one depth channel) but graph "
                            f"output 'depth' has {outputs['depth'][1]} channels; {EXPORT_AGAIN}")
    if task == 'Segmentor':
        return outputs['seg_logits'][1]
    if task == 'MaskClassifier':
        found = outputs['class_logits'][2]
        if found is not None and found != meta['num_classes'] + 1:
            check.fail('num_classes', f"is {meta['num_classes']}, but graph output 'class_logits' scores "
                                      f"{found} classes (num_classes + 1 with 'no object')")
        return meta['num_classes']
    return None


def _check_preprocessor(check: Fields, pre) -> None:
    check.expect('preprocessor', pre, isinstance(pre, dict), 'a JSON object')
    unknown = sorted(set(pre) - set(PREPROCESSOR_KEYS))
    if unknown:
        check.fail('preprocessor', f"has unknown keys {unknown} (known: {list(PREPROCESSOR_KEYS)})")
    for key in ('mean', 'std'):
        if key not in pre:
            check.fail(f'preprocessor.{key}', 'is missing')
    mean, std = pre['mean'], pre['std']
    check.expect('preprocessor.mean', mean,
                 isinstance(mean, list) and len(mean) == 3 and all(is_number(v) and abs(v) <= 1e4 for v in mean),
                 'three numbers (R, G, B on the 0-255 scale) in [-10000, 10000]')
    check.expect('preprocessor.std', std,
                 isinstance(std, list) and len(std) == 3 and all(is_number(v) and 1e-3 <= v <= 1e4 for v in std),
                 'three numbers (R, G, B on the 0-255 scale) in [0.001, 10000]')
    if 'size_divisor' in pre:
        check.whole('preprocessor.size_divisor', pre['size_divisor'], 1, MAX_MULTIPLE)
    if 'pad_val' in pre:
        check.expect('preprocessor.pad_val', pre['pad_val'], is_number(pre['pad_val']), 'a finite number')
    if 'bgr_to_rgb' in pre:
        check.flag('preprocessor.bgr_to_rgb', pre['bgr_to_rgb'])


def _check_test_cfg(check: Fields, cfg, family: str, multiple: int, num_classes: int | None = None) -> None:
    """A JSON object whose sizes are within this module's bounds, then the model's own check of an inference mode
    (:meth:`heads.models.inference_mode.InferenceMode.from_cfg`), its refusal naming the field."""
    from ..models.inference_mode import InferenceMode, InferenceModeError
    check.expect('test_cfg', cfg, isinstance(cfg, dict), 'a JSON object')
    for key in ('crop_size', 'stride'):
        if cfg.get(key) is not None:
            check.pair(f'test_cfg.{key}', cfg[key], 1, MAX_SIDE)
    if cfg.get('top_k') is not None:
        check.whole('test_cfg.top_k', cfg['top_k'], 1, MAX_CLASSES)
    try:
        InferenceMode.from_cfg(cfg, family, multiple, num_classes)
    except InferenceModeError as err:
        check.fail('test_cfg' if err.key == 'test_cfg' else f'test_cfg.{err.key}', f"is refused: {err}")


def _check_palette(check: Fields, palette, classes: int | None) -> None:
    """None or empty (a default palette is drawn), or one [R, G, B] (0-255) per class."""
    if palette is None or palette == []:
        return
    ok = isinstance(palette, list) and all(
        isinstance(c, list) and len(c) == 3 and all(is_int(v) and 0 <= v <= 255 for v in c) for c in palette)
    check.expect('palette', palette, ok, 'a list of [R, G, B] colours, whole numbers in [0, 255]')
    if classes and len(palette) < classes:
        check.fail('palette', f"has {len(palette)} colours for {classes} classes (one per class)")
