"""A task model's inference mode (its ``test_cfg``) as one object, checked once when the model is built.

``test_cfg`` says how a task model predicts at test time: the strategy, ``mode`` 'whole' (the padded batch in one
pass), 'slide' (``crop_size`` windows every ``stride`` pixels, averaged) or 'tile' (dense models: ``crop_size`` tiles
overlapping by ``overlap`` pixels, blended with the ``ramp`` weights, :mod:`.tiling`); for dense models ``flip``
(test-time mirroring) and ``padding`` ('crop' or 'resize', :class:`~heads.models.dense_model.DenseModel`); for
mask-classification models what they return, ``tasks`` (some of 'semantic', 'instance', 'panoptic', 'slide' giving
semantic results only), ``top_k``, ``score_threshold``, ``object_threshold``, ``mask_threshold``,
``overlap_threshold`` and ``stuff_classes`` (:class:`~heads.models.mask_classifier.MaskClassificationModel`).

:meth:`InferenceMode.from_cfg` turns a ``test_cfg`` into an :class:`InferenceMode` and refuses, with an
:class:`InferenceModeError` naming the key, what was wrong and how to fix it, an unknown key or mode, a mode
without the sizes it needs, sizes that are not (height, width) pairs of whole numbers or not multiples of the
model's input multiple, an overlap outside [0, crop_size), windows further apart than they are wide, and values of
the wrong kind. Every task model and its ONNX twin (:mod:`heads.export.onnx_model`) build theirs with it, so a
mode that would run wrong (an unknown one as 'whole') or fail at prediction is refused when the model is built.
:func:`tiled_cfg` is the one place a tile option (``Predictor(tile=...)``, ``tools/infer.py --tile``) becomes
``test_cfg`` entries.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from .inference_mode_checks import (
    DENSE,
    KEYS,
    MASK,
    MODES,
    TASKS,
    InferenceModeError,
    checked_entries,
)

__all__ = ['DENSE', 'MASK', 'MODES', 'TASKS', 'InferenceMode', 'InferenceModeError', 'tiled_cfg']


@dataclass(frozen=True)
class InferenceMode:
    """A checked ``test_cfg`` (module docstring); build it with :meth:`from_cfg`. ``family``: 'dense' or 'mask',
    whose keys and modes it takes; ``crop_size``, ``stride`` and ``overlap``: (height, width) pairs or None."""
    family: str = DENSE
    mode: str = 'whole'
    crop_size: tuple[int, int] | None = None
    stride: tuple[int, int] | None = None
    overlap: tuple[int, int] | None = None
    ramp: str = 'linear'
    flip: bool = False
    padding: str = 'crop'
    tasks: tuple[str, ...] = ('semantic',)
    top_k: int | None = None
    score_threshold: float = 0.0
    object_threshold: float = 0.8
    mask_threshold: float = 0.5
    overlap_threshold: float = 0.8
    stuff_classes: tuple[int, ...] = ()

    @classmethod
    def from_cfg(cls, test_cfg: Mapping | None, family: str = DENSE, input_multiple: int | None = None,
                 num_classes: int | None = None, where: str = '') -> InferenceMode:
        """``test_cfg`` (None: the defaults) of a model of ``family`` checked (module docstring): ``crop_size`` a
        multiple of ``input_multiple`` where given, ``stuff_classes`` below ``num_classes`` where given. ``where``
        (the model or file) starts each error message."""
        return cls(family=family, **checked_entries(test_cfg, family, input_multiple, num_classes, where))

    @property
    def resizes_padding(self) -> bool:
        """Whether whole-image predictions resize the padded input's head output to the image (padding='resize')."""
        return self.mode == 'whole' and self.padding == 'resize'

    def as_cfg(self) -> dict:
        """The plain ``test_cfg`` (this family's keys, defaults filled in, sizes unset left out): what an export
        stores (:mod:`heads.export.metadata`) and :meth:`from_cfg` reads back to an equal mode."""
        cfg = {f.name: getattr(self, f.name) for f in fields(self) if f.name in KEYS[self.family]}
        if self.family == DENSE and self.mode != 'tile':
            del cfg['ramp']
        return {key: value for key, value in cfg.items()
                if value is not None or key not in ('crop_size', 'stride', 'overlap')}


def tiled_cfg(test_cfg: Mapping | None, tile, overlap) -> dict:
    """``test_cfg`` with mode 'tile' in ``tile`` (height, width) tiles overlapping by ``overlap`` pixels: what a
    tile option asks for, checked with the rest when the model is built (:meth:`InferenceMode.from_cfg`)."""
    tile = tuple(tile) if isinstance(tile, (list, tuple)) else tile
    return {**(test_cfg or {}), 'mode': 'tile', 'crop_size': tile, 'overlap': overlap}
