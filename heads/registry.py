"""This project's mmengine registries (children of mmengine's, so mmengine's own parts stay reachable)."""
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import METRICS as MMENGINE_METRICS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import OPTIM_WRAPPERS as MMENGINE_OPTIM_WRAPPERS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import Registry

MODELS = Registry('model', parent=MMENGINE_MODELS, scope='heads', locations=['heads'])
DATASETS = Registry('dataset', parent=MMENGINE_DATASETS, scope='heads', locations=['heads'])
TRANSFORMS = Registry('transform', parent=MMENGINE_TRANSFORMS, scope='heads', locations=['heads'])
METRICS = Registry('metric', parent=MMENGINE_METRICS, scope='heads', locations=['heads'])
HOOKS = Registry('hook', parent=MMENGINE_HOOKS, scope='heads', locations=['heads'])
OPTIM_WRAPPERS = Registry('optim_wrapper', parent=MMENGINE_OPTIM_WRAPPERS, scope='heads', locations=['heads'])
