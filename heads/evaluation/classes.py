"""The classes a metric counts, from its arguments or else the dataset's metainfo: how many, and which are things
(the countable classes of a panoptic set, whose segments are instances). Shared by :class:`.MaskAPMetric` and
:class:`.PanopticQualityMetric`."""
from __future__ import annotations


def metric_num_classes(num_classes: int | None, dataset_meta: dict | None, metric: str) -> int:
    """``num_classes`` when given, else the number of the dataset's classes (metainfo 'classes'); a ValueError
    naming ``metric`` when neither is known."""
    if num_classes is not None:
        return int(num_classes)
    classes = (dataset_meta or {}).get('classes')
    if not classes:
        raise ValueError(f"{metric} needs num_classes=... or a dataset whose metainfo has 'classes'")
    return len(classes)


def thing_indices(thing_classes, dataset_meta: dict | None) -> list[int] | None:
    """The things' class indices (from 0): ``thing_classes`` when given, else the metainfo's 'thing_classes', each an
    index or a name among the metainfo's 'classes'; None when neither names any. A ValueError lists the names that
    are not classes of the dataset."""
    meta = dataset_meta or {}
    things = thing_classes if thing_classes is not None else meta.get('thing_classes')
    if things is None:
        return None
    classes = list(meta.get('classes') or ())
    unknown = [t for t in things if not isinstance(t, int) and t not in classes]
    if unknown:
        raise ValueError(f"thing classes {unknown} are not among the dataset's classes {classes}")
    return [t if isinstance(t, int) else classes.index(t) for t in things]
