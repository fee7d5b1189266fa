"""What an exported task model needs around its graph, stored in the ONNX file's ``metadata_props``.

A DPT task model's ONNX graph maps a normalised, padded 'b 3 H W' image to its output at the input size; to
predict a picture as the checkpoint does (``heads.Predictor``, ``tools/infer.py``) one also needs the resize, the
normalisation and padding, the inference strategy and the class names. :func:`export_onnx` writes them under the key
:data:`KEY` as one JSON object:

- ``task``: 'Segmentor' or 'DepthEstimator' (what the outputs are and how a prediction is stored), ``relative``
  (a relative depth head: inverse depth up to scale and shift), ``output``: the graph's output name;
- ``preprocessor``: the data preprocessor's ``mean``, ``std`` (0-255 scale, RGB), ``size_divisor``, ``pad_val``,
  ``bgr_to_rgb``; ``input_multiple``: what the graph's height and width must be multiples of;
- ``test_cfg``: the model's inference strategy (mode, crop_size, stride, overlap, flip, padding);
- from the config (:func:`config_metadata`): ``predict_scale`` (the keep-ratio resize before inference, or null),
  ``classes`` and ``palette`` of its test dataset.

:func:`read_metadata` refuses a file without them, naming the file and how to write one that has them, and checks
every field (:mod:`heads.export.metadata_check`).
"""
from __future__ import annotations

import json
from pathlib import Path

from torch import nn

from .metadata_check import KEY, VERSION, check_metadata
from .onnx_file import EXPORT_AGAIN, OnnxFileError, check_external_data, check_image_input, graph_outputs, load_proto


def task_metadata(model: nn.Module) -> dict:
    """The model part of the metadata of a task model: a dense one (:class:`heads.models.dense_model.DenseModel`)
    or a mask-classification one (Mask2Former, EoMT: ``task`` 'MaskClassifier', ``outputs`` its two output names,
    ``output`` the first; ``model`` the class name); a video model's also ``clip``: ``{'max_frames': n}``."""
    from ..models.depth_estimator import DepthEstimator
    from ..models.mask_classifier import MaskClassificationModel
    pre = model.data_preprocessor
    depth = isinstance(model, DepthEstimator)
    if isinstance(model, MaskClassificationModel):
        task = {'task': 'MaskClassifier', 'model': type(model).__name__, 'num_classes': int(model.num_classes),
                'output': 'class_logits', 'outputs': ['class_logits', 'mask_logits']}
    else:
        task = {'task': 'DepthEstimator' if depth else 'Segmentor', 'output': 'depth' if depth else 'seg_logits'}
    if hasattr(model, 'predict_sequence'):  # a video model: the graph is one clip of at most max_frames frames
        task['clip'] = {'max_frames': int(model.neck.max_frames)}
    return {'version': VERSION, **task, 'relative': bool(getattr(model, 'relative', False)),
            'preprocessor': {'mean': pre.mean.flatten().tolist(), 'std': pre.std.flatten().tolist(),
                             'size_divisor': int(pre.size_divisor), 'pad_val': float(pre.pad_val),
                             'bgr_to_rgb': bool(pre.bgr_to_rgb)},
            'input_multiple': int(model.input_multiple), 'test_cfg': _plain(dict(model.test_cfg))}


def config_predict_scale(cfg):
    """The config's ``predict_scale``, or the scale of its test pipeline's keep-ratio Resize (as evaluation sees
    images); None when it has neither."""
    if cfg.get('predict_scale'):
        return tuple(cfg.predict_scale)
    pipeline = cfg.get('test_dataloader', {}).get('dataset', {}).get('pipeline', [])
    return next((tuple(t['scale']) for t in pipeline if t.get('type') == 'Resize' and t.get('keep_ratio')), None)


def config_classes(cfg) -> tuple[list[str], list]:
    """Class names and palette of the config's test dataset (built lazily: no file is read); names fall back to
    an empty list and the palette to :func:`heads.io.palettes.default_palette`."""
    from ..io.palettes import default_palette
    from ..registry import DATASETS
    dataset_cfg = dict(cfg.get('test_dataloader', cfg.get('val_dataloader', {})).get('dataset', {}))
    try:
        meta = DATASETS.build({**dataset_cfg, 'lazy_init': True}).metainfo if dataset_cfg else {}
    except Exception:  # a dataset that reads its files even lazily: names fall back to numbers
        meta = {}
    classes = list(meta.get('classes') or [])
    palette = meta.get('palette') or default_palette(max(len(classes), 256))
    return classes, [list(map(int, colour)) for colour in palette]


def config_metadata(cfg) -> dict:
    """The config part of the metadata: ``predict_scale``, ``classes``, ``palette``."""
    scale = config_predict_scale(cfg)
    classes, palette = config_classes(cfg)
    return {'predict_scale': list(scale) if scale else None, 'classes': classes, 'palette': palette}


def write_metadata(path, metadata: dict) -> None:
    """Store ``metadata`` (JSON-serialisable) under :data:`KEY` in the ONNX file ``path`` (its graph rewritten in
    place; external weight data, if any, is left where it is)."""
    import onnx
    proto = onnx.load(str(path), load_external_data=False)
    kept = [p for p in proto.metadata_props if p.key != KEY]
    del proto.metadata_props[:]
    proto.metadata_props.extend(kept)
    proto.metadata_props.add(key=KEY, value=json.dumps(_plain(metadata)))
    onnx.save(proto, str(path))


def stored_metadata(path, proto=None) -> dict | None:
    """Whatever the ONNX file ``path`` (``proto``: the file already parsed) stores under :data:`KEY` (None if
    nothing), its fields unchecked; a file that is not ONNX or whose entry is not JSON is an
    :class:`~heads.export.onnx_file.OnnxFileError` naming it."""
    path = Path(path)
    proto = load_proto(path) if proto is None else proto
    props = {p.key: p.value for p in proto.metadata_props}
    if KEY not in props:
        return None
    try:
        return json.loads(props[KEY])
    except (ValueError, RecursionError) as err:  # JSONDecodeError; an integer beyond Python's digit limit
        raise OnnxFileError(f"{path}: its task metadata (metadata_props key '{KEY}') is not valid JSON ({err}); "
                            f"the file was damaged or edited by hand: {EXPORT_AGAIN}") from err


def read_metadata(path) -> dict:
    """The task metadata of the ONNX file ``path``, every field checked against its type, its range and the
    file's graph (:mod:`heads.export.metadata_check`), the file's external data kept inside its folder; an
    :class:`~heads.export.onnx_file.OnnxFileError` names the file and what is missing or wrong."""
    path = Path(path)
    proto = load_proto(path)
    metadata = stored_metadata(path, proto)
    if metadata is None:
        raise OnnxFileError(f"{path} carries no task metadata (metadata_props key '{KEY}': preprocessing, task, "
                            f"classes), so it cannot be run as its checkpoint is; export it again with "
                            f"tools/export_model.py --config CONFIG --checkpoint CKPT --out {path.name}, which writes "
                            f"it")
    multiples = check_image_input(path, proto)
    check_metadata(path, metadata, graph_outputs(proto), multiples)
    check_external_data(path, proto)
    return metadata


def _plain(value):
    """Tuples as lists, recursively (JSON's and the config's view agree)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
