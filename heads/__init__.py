"""heads: what predicts — DPT necks, segmentation and depth heads, losses, task models and mmengine glue.

Depends on :mod:`zoo`; nothing in :mod:`zoo` depends on it. Importing it registers every part in this
project's mmengine registries (:mod:`heads.registry`).
"""
from . import backbone, coco_metric, datasets, decode_heads, detection, engine, losses, metrics, necks, transforms  # noqa: F401,E501 (registration)
from .hf_dpt import from_pretrained_hf
from .models import DensePreprocessor, DepthEstimator, Segmentor
from .predictor import Predictor
from .registry import DATASETS, HOOKS, METRICS, MODELS, TRANSFORMS

__all__ = ['DATASETS', 'DensePreprocessor', 'DepthEstimator', 'HOOKS', 'METRICS', 'MODELS', 'Predictor',
           'Segmentor', 'TRANSFORMS', 'from_pretrained_hf']
