"""The transform protocol: a callable ``results -> results`` on mmseg-style result dicts.

mmcv's ``BaseTransform`` is not a dependency, so this is its small equivalent: subclasses implement
``transform(results)``; ``__call__`` delegates to it and ``__repr__`` shows the constructor arguments.
"""
from __future__ import annotations

import numpy as np

#: The dense annotation fields: geometric transforms move them together with 'img' (always with nearest
#: resampling, so label ids and invalid-depth zeros are never mixed). 'gt_segment_map': panoptic segments
#: (:mod:`heads.transforms.panoptic`).
DENSE_FIELDS = ('gt_seg_map', 'gt_depth', 'gt_segment_map')


class DenseTransform:
    """Base class: ``transform(results: dict) -> dict``, called by ``__call__``."""

    def __call__(self, results: dict) -> dict:
        return self.transform(results)

    def transform(self, results: dict) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ', '.join(f'{k}={v!r}' for k, v in vars(self).items() if not k.startswith('_'))
        return f'{type(self).__name__}({args})'


def present_fields(results: dict) -> list[str]:
    """The dense fields that geometric transforms must move along with 'img'.

    As in mmseg, these are the fields listed in ``results['seg_fields']`` (LoadAnnotations adds to it), so an
    in-memory 'gt_seg_map' in the data info stays untouched until it is loaded: a test pipeline with Resize
    before LoadAnnotations keeps the ground truth at its original size. Hand-built results without
    'seg_fields' use the :data:`DENSE_FIELDS` they contain.
    """
    keys = results['seg_fields'] if 'seg_fields' in results else DENSE_FIELDS
    return [key for key in keys if isinstance(results.get(key), np.ndarray)]


def require_image(results: dict, transform: str) -> np.ndarray:
    """``results['img']`` ('h w 3'), or an error telling to put ``LoadImage`` first."""
    if 'img' not in results:
        raise KeyError(f"{transform} needs results['img']: put LoadImage() before it in the pipeline")
    return results['img']
