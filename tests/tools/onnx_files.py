"""ONNX files for the tests of opening exported task models: hand-written one-node graphs (no export: fast), a
random tiny DPT exported once (slow: use it from a module-scoped fixture), and their task metadata rewritten."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

import heads
from heads.export.metadata import KEY

from ..reference import tiny_dpt


def plain_onnx(path, output: str = 'seg_logits', channels: int = 3):
    """A one-node ONNX file without task metadata: 'image' 'b 3 h w' -> ``output`` 'b 3 h w' (Identity) or, with
    ``channels`` 1, 'b 1 h w' (the channels' mean)."""
    import onnx
    from onnx import TensorProto, helper
    image = helper.make_tensor_value_info('image', TensorProto.FLOAT, ['b', 3, 'h', 'w'])
    out = helper.make_tensor_value_info(output, TensorProto.FLOAT, ['b', channels, 'h', 'w'])
    node = helper.make_node('Identity', ['image'], [output]) if channels == 3 else \
        helper.make_node('ReduceMean', ['image'], [output], axes=[1], keepdims=1)
    graph = helper.make_graph([node], 'g', [image], [out])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)]), str(path))
    return path


def mask_onnx(path, queries: int = 4, num_classes: int = 11):
    """A small random mask-classification graph with a mask model's outputs: 'image' 'b 3 h w' -> class_logits
    'b q c+1' (a linear map of the image's mean colour) and mask_logits 'b q h/4 w/4' (a 1x1 convolution, average
    pooled by 4), without task metadata."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((3, queries * (num_classes + 1))).astype(np.float32), 'wc'),
               numpy_helper.from_array(np.array([0, queries, num_classes + 1], dtype=np.int64), 'shape'),
               numpy_helper.from_array(rng.standard_normal((queries, 3, 1, 1)).astype(np.float32), 'wm')]
    nodes = [helper.make_node('ReduceMean', ['image'], ['pooled'], axes=[2, 3], keepdims=0),
             helper.make_node('MatMul', ['pooled', 'wc'], ['flat']),
             helper.make_node('Reshape', ['flat', 'shape'], ['class_logits']),
             helper.make_node('Conv', ['image', 'wm'], ['full']),
             helper.make_node('AveragePool', ['full'], ['mask_logits'], kernel_shape=[4, 4], strides=[4, 4])]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, 'mask', [value('image', TensorProto.FLOAT, ['b', 3, 'h', 'w'])],
        [value('class_logits', TensorProto.FLOAT, ['b', queries, num_classes + 1]),
         value('mask_logits', TensorProto.FLOAT, ['b', queries, 'h4', 'w4'])], initializer=weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)]), str(path))
    return path


def export_tiny(task: str, path: Path) -> Path:
    """A random tiny DPT (:func:`tests.reference.tiny_dpt`: 'seg' 11 classes, 'metric' or 'relative' depth) exported
    to ``path`` with its task metadata and CamVid-sized ``predict_scale`` (about 15 s with one thread)."""
    from heads.export import export_onnx
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model = heads.MODELS.build(tiny_dpt(task)).eval()
        classes = [f'class{i}' for i in range(11)] if task == 'seg' else []
        palette = [[i * 20, 255 - i * 20, i] for i in range(11)] if task == 'seg' else []
        return export_onnx(model, path, (64, 96),
                           metadata={'predict_scale': [96, 64], 'classes': classes, 'palette': palette})
    finally:
        torch.set_num_threads(threads)


def stored(path) -> dict:
    """The task metadata stored in ``path``, unchecked."""
    from heads.export.metadata import stored_metadata
    return stored_metadata(path)


def with_metadata(source: Path, target: Path, metadata) -> Path:
    """A copy of ``source`` at ``target`` whose task metadata is ``metadata`` (any JSON value; a str is stored as
    it is, so that it may be invalid JSON)."""
    import onnx
    proto = onnx.load(str(source), load_external_data=False)
    del proto.metadata_props[:]
    proto.metadata_props.add(key=KEY, value=metadata if isinstance(metadata, str) else json.dumps(metadata))
    target.write_bytes(proto.SerializeToString())
    return target


def changed(metadata: dict, field: str, value) -> dict:
    """A copy of ``metadata`` with the dotted ``field`` ('preprocessor.std') set to ``value``."""
    copy = json.loads(json.dumps(metadata))
    *parents, last = field.split('.')
    inner = copy
    for key in parents:
        inner = inner[key]
    inner[last] = value
    return copy
