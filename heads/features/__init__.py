"""Multi-scale backbone features written to disk for other frameworks, and read back.

- :func:`export_features` (``writer.py``): resumable export into safetensors shards with an ``index.json``;
- :class:`FeatureStore` (``store.py``): ``store[image_id] -> {level name: 'c h w' tensor}``, shards read lazily;
- :func:`input_size` / :func:`preprocess` (``preprocess.py``): the size rule and normalisation of an export;
- :func:`weights_hash` (``hashing.py``): sha256 of a module's state dict, recorded to detect changed weights;
- :func:`coco_images` / :func:`folder_images` (``sources.py``): the image lists the tool exports.
"""
from .hashing import weights_hash
from .preprocess import input_size, preprocess, size_multiple
from .sources import ImageEntry, coco_images, folder_images
from .store import FeatureStore, FeatureStoreError
from .writer import ExportSettingsError, ExportSummary, export_features, level_names

__all__ = ['ExportSettingsError', 'ExportSummary', 'FeatureStore', 'FeatureStoreError', 'ImageEntry', 'coco_images',
           'export_features', 'folder_images', 'input_size', 'level_names', 'preprocess', 'size_multiple',
           'weights_hash']
