"""heads: what predicts — DPT necks, segmentation and depth heads, losses, task models and mmengine glue.

Depends on :mod:`zoo`; nothing in :mod:`zoo` depends on it. ``import heads`` itself is cheap (it loads neither torch
nor mmengine): the names below and the subpackages load on first use, and the parts that configs name by ``type``
are registered the first time one of this project's registries looks a name up (their import location is
:mod:`heads.parts`). Command-line tools can therefore parse their arguments before anything heavy is imported.
"""
from importlib import import_module

#: Public names -> the module defining them.
_PUBLIC = {
    'Predictor': 'heads.models.predictor', 'from_pretrained_hf': 'heads.hf.folder',
    'DensePreprocessor': 'heads.models', 'DepthEstimator': 'heads.models', 'Segmentor': 'heads.models',
    'DATASETS': 'heads.registry', 'HOOKS': 'heads.registry', 'METRICS': 'heads.registry', 'MODELS': 'heads.registry',
    'TRANSFORMS': 'heads.registry',
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    """``heads.Predictor``, ``heads.MODELS``, ... and ``heads.<subpackage>``, imported when first used."""
    if name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name]), name)
    elif not name.startswith('_'):
        try:
            value = import_module(f'{__name__}.{name}')
        except ModuleNotFoundError as err:
            if err.name != f'{__name__}.{name}':
                raise
            raise AttributeError(f"module 'heads' has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module 'heads' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
