"""The checks of :meth:`heads.models.inference_mode.InferenceMode.from_cfg`: a ``test_cfg`` entry by entry, each
refusal an :class:`InferenceModeError` naming the key, what was wrong and how to fix it; the keys and modes of each
model family.
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from numbers import Integral, Real

from ..io.labels import INSTANCE_OFFSET
from .tiling import RAMPS

DENSE, MASK = 'dense', 'mask'
MODES = {DENSE: ('whole', 'slide', 'tile'), MASK: ('whole', 'slide')}
TASKS = ('semantic', 'instance', 'panoptic')
PADDINGS = ('crop', 'resize')
THRESHOLDS = ('score_threshold', 'object_threshold', 'mask_threshold', 'overlap_threshold')
KEYS = {DENSE: ('mode', 'crop_size', 'stride', 'overlap', 'ramp', 'flip', 'padding'),
        MASK: ('mode', 'crop_size', 'stride', 'tasks', 'top_k', *THRESHOLDS, 'stuff_classes')}
NEEDS = {'slide': ('crop_size', 'stride'), 'tile': ('crop_size', 'overlap')}
FAMILY_NAMES = {DENSE: 'dense task models (Segmentor, DepthEstimator)',
                MASK: 'mask-classification models (Mask2Former, EoMT)'}


class InferenceModeError(ValueError):
    """A ``test_cfg`` refused; ``key``: the entry at fault."""

    def __init__(self, message: str, key: str):
        super().__init__(message)
        self.key = key


EXAMPLE_SIDE = 128  # the unit of the examples in messages when the model's input multiple is not known


def whole(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def number(value) -> bool:
    """A finite number (not a bool; any whole number, however large)."""
    return isinstance(value, Real) and not isinstance(value, bool) and (whole(value) or math.isfinite(value))


def choices(values) -> str:
    """'a', 'b' or 'c'."""
    quoted = [repr(v) for v in values]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def suggestion(word, known) -> str:
    """' (did you mean 'x'?)' for a close match of ``word`` among ``known``, else ''."""
    close = difflib.get_close_matches(str(word), list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ''


class Entries:
    """The checks of one ``test_cfg`` for a model of ``family``; :meth:`refuse` raises naming ``where``."""

    def __init__(self, cfg: Mapping, family: str, input_multiple: int | None, num_classes: int | None, where: str):
        self.cfg, self.family, self.where = cfg, family, where
        self.multiple, self.num_classes = input_multiple, num_classes

    def refuse(self, key: str, message: str):
        raise InferenceModeError(f"{self.where}: {message}" if self.where else message, key)

    def example(self, mode: str) -> str:
        """A test_cfg of ``mode`` with sizes that fit this model."""
        unit = self.multiple or EXAMPLE_SIDE
        sizes = {'slide': f"crop_size=({4 * unit}, {4 * unit}), stride=({3 * unit}, {3 * unit})",
                 'tile': f"crop_size=({4 * unit}, {4 * unit}), overlap={unit}"}[mode]
        tasks = "tasks=('semantic',), " if self.family == MASK else ''
        return f"test_cfg=dict(mode={mode!r}, {tasks}{sizes})"

    def known_keys(self) -> None:
        other = MASK if self.family == DENSE else DENSE
        for key in self.cfg:
            if key in KEYS[self.family]:
                continue
            if key in KEYS[other]:
                self.refuse(key, f"test_cfg {key!r} is a setting of {FAMILY_NAMES[other]}, not of "
                                 f"{FAMILY_NAMES[self.family]}: remove it from test_cfg")
            self.refuse(key, f"test_cfg has an unknown key {key!r}{suggestion(key, KEYS[self.family])}; the "
                             f"test_cfg of {FAMILY_NAMES[self.family]} takes {', '.join(KEYS[self.family])}")

    def mode(self) -> str:
        mode = self.cfg.get('mode', 'whole')
        if not isinstance(mode, str) or mode not in MODES[self.family]:
            hint = suggestion(mode, MODES[self.family]) if isinstance(mode, str) else ''
            if mode == 'tile':
                hint = " (a mask-classification model does not tile: mode='slide' gives semantic results)"
            self.refuse('mode', f"test_cfg mode must be {choices(MODES[self.family])}, got {mode!r}{hint}")
        return mode

    def sizes_needed(self, mode: str) -> None:
        missing = [key for key in NEEDS.get(mode, ()) if self.cfg.get(key) is None]
        if missing:
            self.refuse(missing[0], f"test_cfg mode={mode!r} needs {' and '.join(missing)}, e.g. "
                                    f"{self.example(mode)}")

    def pair(self, key: str, mode: str) -> tuple[int, int] | None:
        """crop_size or stride: (height, width) whole numbers above 0; a crop the mode uses a multiple of the
        model's input multiple."""
        value = self.cfg.get(key)
        if value is None:
            return None
        if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(whole(v) and v > 0 for v in value)):
            self.refuse(key, f"test_cfg {key} must be (height, width), two whole numbers above 0, got {value!r}; "
                             f"e.g. {self.example(mode if mode in NEEDS else 'slide')}")
        value = (int(value[0]), int(value[1]))
        used = key in NEEDS.get(mode, ())
        if key == 'crop_size' and used and self.multiple and any(side % self.multiple for side in value):
            fit = tuple(-(-side // self.multiple) * self.multiple for side in value)
            self.refuse(key, f"test_cfg crop_size must be (height, width), multiples of this model's input "
                             f"multiple {self.multiple}, got {value}: use e.g. crop_size={fit}")
        return value

    def overlap(self, crop: tuple[int, int] | None) -> tuple[int, int] | None:
        value = self.cfg.get('overlap')
        if value is None:
            return None
        pair = (value, value) if whole(value) else value
        sides = crop or (float('inf'), float('inf'))
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2
                and all(whole(v) and 0 <= v < side for v, side in zip(pair, sides))):
            bound = f"the crop_size {crop}" if crop else 'the tile'
            self.refuse('overlap', f"test_cfg overlap must be a whole number of pixels (or a (height, width) pair) "
                                   f"in [0, {bound}), got {value!r}: neighbouring tiles share overlap pixels, so it "
                                   f"must be smaller than a tile; use a smaller overlap or larger tiles")
        return int(pair[0]), int(pair[1])

    def choice(self, key: str, allowed, default):
        value = self.cfg.get(key, default)
        if not isinstance(value, str) or value not in allowed:
            self.refuse(key, f"test_cfg {key} must be {choices(allowed)}, got {value!r}"
                             f"{suggestion(value, allowed) if isinstance(value, str) else ''}")
        return value

    def flag(self, key: str) -> bool:
        value = self.cfg.get(key, False)
        if not isinstance(value, bool):
            self.refuse(key, f"test_cfg {key} must be True or False, got {value!r} ({type(value).__name__})")
        return value

    def tasks(self, mode: str) -> tuple[str, ...]:
        value = self.cfg.get('tasks', ('semantic',))
        tasks = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else ()
        if not tasks or any(task not in TASKS for task in tasks):
            self.refuse('tasks', f"test_cfg tasks must name some of {TASKS}, got {value!r}")
        if 'panoptic' in tasks and self.num_classes is not None and not 0 < self.num_classes < INSTANCE_OFFSET:
            self.refuse('tasks', f"panoptic maps pack label + instance * {INSTANCE_OFFSET}, so num_classes must be "
                                 f"below {INSTANCE_OFFSET}, got {self.num_classes}: leave 'panoptic' out of tasks")
        if mode == 'slide' and tasks != ('semantic',):
            self.refuse('tasks', f"test_cfg mode='slide' gives semantic results only, got tasks={tasks}; use "
                                 f"{self.example('slide')} or mode='whole' for instance and panoptic results")
        return tasks

    def mask_results(self) -> dict:
        """top_k, the thresholds and stuff_classes of instance and panoptic results."""
        out = {}
        top_k = self.cfg.get('top_k')
        if top_k is not None and not (whole(top_k) and top_k >= 1):
            self.refuse('top_k', f"test_cfg top_k must be a whole number from 1 (instances kept per image) or None "
                                 f"(the number of queries), got {top_k!r}")
        out['top_k'] = None if top_k is None else int(top_k)
        for key in THRESHOLDS:
            if key in self.cfg:
                value = self.cfg[key]
                if not (number(value) and 0 <= value <= 1):
                    self.refuse(key, f"test_cfg {key} must be a number in [0, 1], got {value!r}")
                out[key] = float(value)
        stuff = self.cfg.get('stuff_classes', ())
        limit = self.num_classes if self.num_classes is not None else float('inf')
        if not (isinstance(stuff, (list, tuple)) and all(whole(c) and 0 <= c < limit for c in stuff)):
            self.refuse('stuff_classes', f"test_cfg stuff_classes must be a list of class indices in "
                                         f"[0, num_classes {self.num_classes}), got {stuff!r}")
        out['stuff_classes'] = tuple(int(c) for c in stuff)
        return out


def checked_entries(test_cfg: Mapping | None, family: str, input_multiple: int | None, num_classes: int | None,
                    where: str) -> dict:
    """The :class:`~heads.models.inference_mode.InferenceMode` fields of ``test_cfg``, checked."""
    if family not in KEYS:
        raise ValueError(f"an inference mode's family is {choices(KEYS)}, got {family!r}")
    cfg = {} if test_cfg is None else test_cfg
    entries = Entries(cfg, family, input_multiple, num_classes, where)
    if not isinstance(cfg, Mapping):
        entries.refuse('test_cfg', f"test_cfg must be a dict, e.g. dict(mode='whole'), got {type(cfg).__name__} "
                                   f"{cfg!r}")
    mode = entries.mode()
    entries.known_keys()
    entries.sizes_needed(mode)
    out = {'mode': mode, 'crop_size': entries.pair('crop_size', mode), 'stride': entries.pair('stride', mode)}
    crop, stride = out['crop_size'], out['stride']
    if mode == 'slide' and any(s > c for s, c in zip(stride, crop)):
        entries.refuse('stride', f"test_cfg stride {stride} must not exceed crop_size {crop} in either direction "
                                 f"(pixels between windows would get no prediction): use a stride at most the crop "
                                 f"size, e.g. {entries.example('slide')}")
    if family == DENSE:
        out.update(overlap=entries.overlap(crop), ramp=entries.choice('ramp', RAMPS, 'linear'),
                   flip=entries.flag('flip'), padding=entries.choice('padding', PADDINGS, 'crop'))
    else:
        out.update(tasks=entries.tasks(mode), **entries.mask_results())
    return out
