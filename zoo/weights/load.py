"""``load_pretrained``: any supported checkpoint into a zoo model, adapted to its sizes, or a clear error."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from torch import nn

from .formats import to_zoo_layout
from .io import CheckpointError, read_state_dict
from .layout_error import CheckpointLayoutError

log = logging.getLogger(__name__)
HEAD_KEYS = ('head.', 'head_dist.')
ADAPTER_KEYS = ('.lora_a', '.lora_b')  # zoo.lora's adapters: absent from a checkpoint of the base model
MERGED_KEYS = '.lora_merged'  # zoo.lora: merged adapters, checked by the LoRA Linear itself as it loads
# keys a module takes as it loads when a checkpoint has them, absent from a model that has not loaded one: merged
# adapters, and DINOv3 RoPE periods an official file stored (zoo.core.rope.DINOv3Rope)
OPTIONAL_KEYS = (MERGED_KEYS, '.rope.stored_periods')


class CheckpointMismatchError(CheckpointError):
    """The checkpoint's keys or shapes do not fit the model (the message lists them)."""


@dataclass
class LoadReport:
    format: str
    dropped: list[str] = field(default_factory=list)        # classifier parts the model does not have
    resized: list[str] = field(default_factory=list)        # position tables / patch kernels resampled
    reinitialized: list[str] = field(default_factory=list)  # heads of another class count, left at init
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)     # same key, another shape: left at init (strict=False)
    fresh: list[str] = field(default_factory=list)          # backbone-only parts a checkpoint lacks, left at init


def _resize_position_tables(model: nn.Module, state: dict, target: dict, source) -> list[str]:
    """Position tables (modules with ``checkpoint_key`` and ``resample_checkpoint``: learned absolute
    embeddings, relative bias tables) of another grid, and patch kernels of another patch size, resampled to the
    model's; the keys that now fit."""
    resized = []
    for name, module in model.named_modules():
        if not hasattr(module, 'resample_checkpoint'):
            continue
        key = f'{name}.{module.checkpoint_key}' if name else module.checkpoint_key
        if key in state and key in target and state[key].shape != target[key].shape:
            try:
                state[key] = module.resample_checkpoint(state[key])
            except ValueError as err:
                raise CheckpointMismatchError(f"checkpoint {source}: {key}: its shape {tuple(state[key].shape)} cannot "
                                              f"be resized to {tuple(target[key].shape)}: {err}") from err
            if state[key].shape == target[key].shape:
                resized.append(key)
    return resized


def _listing(title: str, items: list[str], limit: int = 12) -> str:
    more = f" ... and {len(items) - limit} more" if len(items) > limit else ""
    return f"\n  {title} ({len(items)}): " + ", ".join(items[:limit]) + more


def load_pretrained(model: nn.Module, source, *, format: str = 'auto', strict: bool = True,
                    name: str | None = None, layout: str | None = None) -> LoadReport:
    """Load ``source`` (path, HF folder or state dict in zoo/timm layout) into ``model``.

    Converts keys, resamples position tables to the model's grid, drops classifier-only keys a backbone
    lacks and re-initialises heads whose class count differs. Anything else that does not fit raises
    :class:`CheckpointMismatchError` naming the keys. ``strict=False`` loads what fits (same key, same shape),
    leaves the rest at its initialisation, and reports and logs it (``missing``, ``unexpected``,
    ``mismatched``). ``name``: what messages call ``source`` when it is an already-read state dict. ``layout``: what
    the report and messages call the layout of a ``source`` the caller has converted (a task model's checkpoint,
    :mod:`heads.layouts`), loaded with ``format='zoo'``.
    """
    state = read_state_dict(source)
    if name is None:
        name = source if isinstance(source, (str, bytes)) or hasattr(source, '__fspath__') else 'state dict'
    try:
        state, fmt = to_zoo_layout(state, model, format)
        fmt = layout or fmt
    except CheckpointLayoutError as err:
        raise err.in_file(name) from err
    except CheckpointError as err:  # a format= that this model's family has no converter for
        raise type(err)(f"checkpoint {name}: {err}") from err
    target = model.state_dict()
    report = LoadReport(fmt)
    classifier_only = getattr(model, 'classifier_only', ())
    # plus keys a model was built to do without (e.g. a ViT without patch-embedding bias)
    droppable = tuple(classifier_only) + tuple(getattr(model, 'ignored_checkpoint_keys', ()))
    report.dropped = [k for k in state if k not in target and k.startswith(droppable)]
    report.reinitialized = [k for k in state if k in target and k.startswith(HEAD_KEYS)
                            and state[k].shape != target[k].shape]
    for key in report.dropped + report.reinitialized:
        del state[key]
    report.resized = _resize_position_tables(model, state, target, name)
    backbone_only = getattr(model, 'backbone_only', ())  # e.g. a backbone's output norms: no classifier has them
    report.fresh = [k for k in target if k not in state and backbone_only and k.startswith(backbone_only)]
    report.missing = [k for k in target if k not in state and k not in report.reinitialized
                      and k not in report.fresh]
    if not any(k.endswith(ADAPTER_KEYS) for k in state):  # a base checkpoint into a LoRA model: adapters at start
        report.missing = [k for k in report.missing if not k.endswith(ADAPTER_KEYS)]
    report.missing = [k for k in report.missing if not k.endswith(OPTIONAL_KEYS)]
    report.unexpected = [k for k in state if k not in target and not k.endswith(OPTIONAL_KEYS)]
    report.mismatched = [k for k, v in state.items() if k in target and v.shape != target[k].shape]
    mismatched = [f"{k} {tuple(state[k].shape)} vs model {tuple(target[k].shape)}" for k in report.mismatched]
    problems = (_listing('missing in checkpoint', report.missing) if report.missing else '') + \
               (_listing('not in model', report.unexpected) if report.unexpected else '') + \
               (_listing('shape mismatch', mismatched) if mismatched else '')
    if problems and strict:
        raise CheckpointMismatchError(f"checkpoint {name} ({fmt} layout) does not fit "
                                      f"{type(model).__name__}:{problems}")
    if problems:
        log.warning("partial load of %s:%s", name, problems)
    skipped = set(report.mismatched)
    try:
        model.load_state_dict({k: v for k, v in state.items() if (k in target or k.endswith(OPTIONAL_KEYS))
                               and k not in skipped}, strict=False)
    except CheckpointMismatchError as err:  # merged adapters loaded into unmerged ones, or the reverse
        raise CheckpointMismatchError(f"checkpoint {name} does not fit {type(model).__name__}: {err}") from err
    if report.dropped or report.reinitialized or report.resized:
        log.info("loaded %s (%s layout): dropped %s, re-initialised %s, resized %s", name, fmt,
                 report.dropped, report.reinitialized, report.resized)
    return report
