"""Importing this module registers every part of this project that a config can name by ``type`` (models,
backbones, necks, heads, losses, datasets, transforms, metrics, hooks, samplers, optimizer wrappers). It is the
import location of :mod:`heads.registry`'s registries, so the first look-up of any name imports it."""
from . import datasets, decode_heads, detection, engine, evaluation, losses, models, necks, transforms  # noqa: F401
from .models import backbone  # noqa: F401  (ZooBackbone)
from .visualization import hook  # noqa: F401  (PredictionVisualizationHook)
