"""Importing this module registers every part of this project that a config can name by ``type`` (models,
backbones, necks, heads, losses, datasets, transforms, metrics, hooks, samplers, optimizer wrappers). It is the
import location of :mod:`heads.registry`'s registries, so the first look-up of any name imports it."""
from . import (backbone, coco_metric, datasets, decode_heads, detection, engine, hf_dpt, losses,  # noqa: F401
               metrics, models, necks, transforms)
