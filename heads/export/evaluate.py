"""A config's test set through any task model, PyTorch or ONNX, with the config's own evaluator.

``evaluate(model, cfg)``: every batch of ``cfg.test_dataloader`` goes through ``model.data_preprocessor`` and
``model(inputs, data_samples, mode='predict')`` (a :class:`heads.models.dense_model.DenseModel` or an
:class:`heads.export.OnnxTaskModel`), then into the metrics of ``cfg.test_evaluator`` (IoUMetric, DepthMetric, ...):
the figures tools/test.py prints for the checkpoint, for an exported or a quantized file.
"""
from __future__ import annotations

import torch


def evaluate(model, cfg, limit: int | None = None) -> dict:
    """The metrics of ``cfg.test_evaluator`` for ``model`` on ``cfg.test_dataloader`` (its first ``limit``
    batches if given)."""
    from mmengine.evaluator import Evaluator
    from mmengine.registry import init_default_scope
    from mmengine.runner import Runner
    init_default_scope('heads')
    loader_cfg = dict(cfg.test_dataloader)
    loader_cfg.update(num_workers=0, persistent_workers=False)
    loader = Runner.build_dataloader(loader_cfg)
    metrics = cfg.test_evaluator if isinstance(cfg.test_evaluator, (list, tuple)) else [cfg.test_evaluator]
    evaluator = Evaluator([dict(m) for m in metrics])
    evaluator.dataset_meta = loader.dataset.metainfo
    count = 0
    with torch.no_grad():
        for data in loader:
            if limit is not None and count >= limit:
                break
            data = model.data_preprocessor(data, False)
            samples = model(data['inputs'], data['data_samples'], mode='predict')
            evaluator.process(samples, data)
            count += len(samples)
    return evaluator.evaluate(count)
