"""This project's mmengine registries: one child of each of mmengine's root registries, in scope ``heads``.

Configs set ``default_scope = 'heads'``, so the Runner looks up every registry tree in that scope first; a tree
without a ``heads`` child makes mmengine warn ("Failed to search registry with scope ...") and fall back to its own.
Each child finds mmengine's parts through its parent, so ``type='AdamW'`` or ``type='IterBasedTrainLoop'`` still
builds, and the parts registered here (models, datasets, transforms, metrics, hooks, samplers, optimizer wrappers
and constructors) are found first. The first look-up in any of them imports :mod:`heads.parts`, which registers
every part.
"""
from mmengine import registry as mmengine_registry
from mmengine.registry import Registry


def _child(parent: Registry) -> Registry:
    """A registry in scope ``heads`` under ``parent`` (same name, same build function)."""
    return Registry(parent.name, parent=parent, scope='heads', locations=['heads.parts'])


RUNNERS = _child(mmengine_registry.RUNNERS)
RUNNER_CONSTRUCTORS = _child(mmengine_registry.RUNNER_CONSTRUCTORS)
LOOPS = _child(mmengine_registry.LOOPS)
HOOKS = _child(mmengine_registry.HOOKS)
STRATEGIES = _child(mmengine_registry.STRATEGIES)
DATASETS = _child(mmengine_registry.DATASETS)
DATA_SAMPLERS = _child(mmengine_registry.DATA_SAMPLERS)
TRANSFORMS = _child(mmengine_registry.TRANSFORMS)
MODELS = _child(mmengine_registry.MODELS)
MODEL_WRAPPERS = _child(mmengine_registry.MODEL_WRAPPERS)
WEIGHT_INITIALIZERS = _child(mmengine_registry.WEIGHT_INITIALIZERS)
OPTIMIZERS = _child(mmengine_registry.OPTIMIZERS)
OPTIM_WRAPPERS = _child(mmengine_registry.OPTIM_WRAPPERS)
OPTIM_WRAPPER_CONSTRUCTORS = _child(mmengine_registry.OPTIM_WRAPPER_CONSTRUCTORS)
PARAM_SCHEDULERS = _child(mmengine_registry.PARAM_SCHEDULERS)
METRICS = _child(mmengine_registry.METRICS)
EVALUATOR = _child(mmengine_registry.EVALUATOR)
TASK_UTILS = _child(mmengine_registry.TASK_UTILS)
VISUALIZERS = _child(mmengine_registry.VISUALIZERS)
VISBACKENDS = _child(mmengine_registry.VISBACKENDS)
LOG_PROCESSORS = _child(mmengine_registry.LOG_PROCESSORS)
INFERENCERS = _child(mmengine_registry.INFERENCERS)
FUNCTIONS = _child(mmengine_registry.FUNCTIONS)
