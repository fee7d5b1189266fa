"""A model that predicts more classes than its training set has: said once, when training starts.

Fewer classes than the labels is an error of the loss (a label beyond the model's range); more is legal but
almost always a config slip (``num_classes`` left at another dataset's value): the extra classes never occur,
the model learns never to predict them and their IoU is undefined.
"""
from __future__ import annotations

from mmengine.model import is_model_wrapper


def predicted_classes(model) -> tuple[int, str] | None:
    """(class count, its config key) of a segmentation or classification model; None for other tasks
    (depth, detection, where torchvision counts the background as a class)."""
    from ...models import ImageClassifier, Segmentor
    model = model.module if is_model_wrapper(model) else model
    if isinstance(model, Segmentor):
        return model.decode_head.num_classes, 'model.decode_head.num_classes'
    if isinstance(model, ImageClassifier):
        return model.num_classes, 'model.num_classes'
    return None


def more_classes_message(model, dataset) -> str | None:
    """The warning for a model with more classes than ``dataset``'s metainfo lists; None when they agree or
    either count is unknown."""
    predicted = predicted_classes(model)
    classes = (getattr(dataset, 'metainfo', None) or {}).get('classes')
    if predicted is None or not classes or predicted[0] <= len(classes):
        return None
    count, key = predicted
    return (f"the model predicts {count} classes ({key}) but the training set {type(dataset).__name__} has "
            f"{len(classes)} ({', '.join(map(str, classes[:8]))}{', ...' if len(classes) > 8 else ''}): classes "
            f"{len(classes)}..{count - 1} never occur in its labels, so the model learns never to predict them "
            f"and their IoU/accuracy is undefined. Set {key}={len(classes)} unless the extra classes are meant "
            f"for later data")
