"""LoRA (Hu et al. 2022): low-rank adapters on chosen Linears of any model, everything else frozen.

A LoRA Linear computes ``W x + b + (alpha / rank) * B A dropout(x)`` with A 'rank in' (Kaiming-uniform) and B
'out rank' (zeros, so training starts from the base model). The Linears are chosen by shell-style patterns on
their module names (``'*.attn.qkv'``, ``'blocks.*.mlp.fc*'``, ...) and each is replaced, in its parent, by its
LoRA form holding the same parameters: it keeps its class's behaviour (a fused q/k/v projection still returns
q, k, v) and its ``weight``/``bias`` keys, and gains ``lora_a``/``lora_b``, so base checkpoints load into it
unchanged.

- :func:`apply_lora` adapts the Linears and freezes every other parameter (``trainable`` patterns keep some);
- :func:`merge_lora` folds ``(alpha / rank) B A`` into the base weights for inference, :func:`unmerge_lora`
  takes it out again (outputs equal within float rounding either way);
- :func:`save_adapters` / :func:`load_adapters`: the adapters alone as a small safetensors file (rank, alpha and
  targets in its metadata, :mod:`zoo.lora_file`); loading applies the file's alpha and refuses files that do not
  fit, hold non-finite values or are damaged;
- a merged LoRA Linear's state dict says so (``<name>.lora_merged``): a merged state does not load into an
  unmerged model, nor an unmerged state into a merged one (the adapters would count twice, or not at all);
- :func:`lora_summary`: the parameters trained, of how many, and the adapter file's size.

In configs: ``model.backbone.lora = dict(rank=8, alpha=16, dropout=0.0, targets=('*.attn.qkv', ...))``
(:func:`zoo.create_backbone`'s ``lora`` option).
"""
from __future__ import annotations

import fnmatch
import logging
import math
from pathlib import Path

import torch
from torch import nn

from . import lora_file
from .core.linear import Linear
from .weights import CheckpointError, CheckpointMismatchError
from .weights.checksum import sidecar
from .weights.durable import replace_durably

log = logging.getLogger(__name__)

DEFAULT_TARGETS = ('*.attn.qkv', '*.attn.qkv.*')  # the attention's q/k/v projection, fused or separate
MERGED_KEY = 'lora_merged'  # in the state dict of a merged LoRA Linear only


class LoRALinear(Linear):
    """A Linear with an adapter: ``lora_a`` 'rank in', ``lora_b`` 'out rank', ``lora_dropout``, ``lora_scale``.

    :func:`apply_lora` replaces a Linear by one. A Linear subclass with its own forward (the fused q/k/v
    projection) becomes a class deriving from it and then from this one, so that its ``super().forward`` (the
    plain linear map) is this forward and the adapter acts inside it: its outputs keep their form. The linear map
    itself is :class:`zoo.core.Linear`'s (the kernel policy's GEMM).
    """
    lora_a: nn.Parameter
    lora_b: nn.Parameter
    lora_merged: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        return out if self.lora_merged else out + self.lora_delta(x)

    def lora_delta(self, x: torch.Tensor) -> torch.Tensor:
        """'... in -> ... out': (alpha / rank) B A dropout(x)."""
        return (self.lora_dropout(x) @ self.lora_a.T @ self.lora_b.T) * self.lora_scale

    def lora_weight(self) -> torch.Tensor:
        """'out in': the weight the adapter adds, (alpha / rank) B A."""
        return (self.lora_b @ self.lora_a) * self.lora_scale

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self.lora_merged:  # the weight holds W + (alpha / rank) B A: say so, for whoever loads it
            destination[prefix + MERGED_KEY] = torch.ones((), dtype=torch.bool)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        if prefix + 'weight' in state_dict:
            saved = prefix + MERGED_KEY in state_dict and bool(torch.as_tensor(state_dict[prefix + MERGED_KEY]).any())
            if saved != self.lora_merged:
                raise CheckpointMismatchError(merged_message(prefix, saved))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        if prefix + MERGED_KEY in unexpected_keys:
            unexpected_keys.remove(prefix + MERGED_KEY)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, lora_rank={self.lora_a.shape[0]}, lora_scale={self.lora_scale:g}, " \
               f"merged={self.lora_merged}"


def merged_message(prefix: str, saved: bool) -> str:
    """Why a state of a merged model does not load into an unmerged one (or the reverse), and what to do."""
    module = prefix.rstrip('.') or 'the LoRA Linear'
    if saved:
        return (f"{module}: the state was saved from a model with merged adapters (its weight holds them, "
                f"{prefix}{MERGED_KEY}), and this model's are not merged: loaded, the adapters would count twice. "
                f"Call zoo.lora.merge_lora(model) before loading it (unmerge_lora after, to train)")
    return (f"{module}: this model's adapters are merged (zoo.lora.merge_lora) and the state's are not: its weight "
            f"would stand without the adapters. Call zoo.lora.unmerge_lora(model) before loading it (merge_lora "
            f"after, for inference)")


_CLASSES: dict[type, type] = {}


def _lora_class(cls: type) -> type:
    """The LoRA form of a Linear class (see :class:`LoRALinear`)."""
    if cls in (nn.Linear, Linear):
        return LoRALinear
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f'LoRA{cls.__name__}', (cls, LoRALinear), {'__module__': __name__})
        globals().setdefault(_CLASSES[cls].__name__, _CLASSES[cls])  # so that pickle finds it by name
    return _CLASSES[cls]


def is_lora(module: nn.Module) -> bool:
    return isinstance(module, LoRALinear)


def lora_modules(model: nn.Module) -> dict[str, nn.Module]:
    return {name: m for name, m in model.named_modules() if is_lora(m)}


def _match(name: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def apply_lora(model: nn.Module, targets=DEFAULT_TARGETS, rank: int = 8, alpha: float | None = None,
               dropout: float = 0.0, trainable=()) -> nn.Module:
    """Adapt every ``nn.Linear`` whose module name matches one of ``targets`` (each replaced in its parent by its
    LoRA form; returns ``model``, or the adapted Linear where ``model`` is the Linear itself); freeze every other
    parameter except those whose names match ``trainable``. ``alpha`` defaults to ``rank`` (scale 1)."""
    if isinstance(targets, str):
        targets = (targets,)
    if not isinstance(rank, int) or rank < 1:
        raise ValueError(f"LoRA rank must be a positive int, got {rank!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"LoRA dropout must be in [0, 1), got {dropout!r}")
    linears = {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear) and not is_lora(m)}
    chosen = {n: m for n, m in linears.items() if _match(n, targets)}
    if not chosen:
        shown = ', '.join(list(linears)[:8]) + (' ...' if len(linears) > 8 else '')
        raise ValueError(f"LoRA targets {list(targets)} match no nn.Linear of {type(model).__name__}; its Linears "
                         f"are named like: {shown or '(none)'}")
    adapted = {id(m): _adapted(m, rank, float(rank if alpha is None else alpha), dropout) for m in chosen.values()}
    if '' in chosen:  # the model is itself the Linear
        model = adapted[id(model)]
    for parent in model.modules():
        for child, module in parent.named_children():
            if id(module) in adapted:
                setattr(parent, child, adapted[id(module)])
    model.lora_config = {'targets': list(targets), 'rank': rank, 'alpha': float(rank if alpha is None else alpha),
                         'dropout': dropout}
    for name, param in model.named_parameters():
        param.requires_grad_(name.rsplit('.', 1)[-1] in ('lora_a', 'lora_b') or _match(name, trainable))
    return model


def _adapted(module: nn.Linear, rank: int, alpha: float, dropout: float) -> nn.Linear:
    """The LoRA form of ``module``: its class's LoRA class, the same parameters, buffers, submodules and hooks, and
    new adapters. An instance ``forward`` the kernel policy set is left behind (the LoRA class computes through the
    policy's GEMM itself)."""
    cls = _lora_class(type(module))
    new = cls.__new__(cls)
    state = {k: v for k, v in vars(module).items() if k != 'forward'}
    new.__dict__.update(state, _parameters=dict(module._parameters), _buffers=dict(module._buffers),
                        _modules=dict(module._modules))
    weight = new.weight
    new.lora_a = nn.Parameter(torch.empty(rank, new.in_features, device=weight.device, dtype=weight.dtype))
    new.lora_b = nn.Parameter(torch.zeros(new.out_features, rank, device=weight.device, dtype=weight.dtype))
    nn.init.kaiming_uniform_(new.lora_a, a=math.sqrt(5))
    new.lora_dropout = nn.Dropout(dropout) if dropout else nn.Identity()
    new.lora_scale = alpha / rank
    new.lora_merged = False
    return new


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every adapter into its base weight (the adapters are kept, and skipped, until :func:`unmerge_lora`)."""
    with torch.no_grad():
        for module in lora_modules(model).values():
            if not module.lora_merged:
                module.weight += module.lora_weight().to(module.weight.dtype)
                module.lora_merged = True
    return model


def unmerge_lora(model: nn.Module) -> nn.Module:
    """Take merged adapters back out of the base weights."""
    with torch.no_grad():
        for module in lora_modules(model).values():
            if module.lora_merged:
                module.weight -= module.lora_weight().to(module.weight.dtype)
                module.lora_merged = False
    return model


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapters' tensors, named as in ``model.state_dict()``."""
    return {f'{name}.{part}': getattr(m, part).detach() for name, m in lora_modules(model).items()
            for part in ('lora_a', 'lora_b')}


def _holder_config(model: nn.Module) -> dict:
    """The apply_lora options recorded on ``model`` or, for a task model, on the part that was adapted."""
    return next((dict(m.lora_config) for m in model.modules() if getattr(m, 'lora_config', None)), {})


def _uniform(values: dict):
    """The one value of ``values``, or the mapping itself where they differ."""
    return next(iter(values.values())) if len(set(values.values())) == 1 else values


def adapter_file_bytes(model: nn.Module) -> bytes:
    """The adapter file's content (:mod:`zoo.lora_file`): the adapters and the options they were trained with,
    the rank and alpha read from the adapted Linears themselves."""
    modules = lora_modules(model)
    ranks = {name: m.lora_a.shape[0] for name, m in modules.items()}
    config = {**_holder_config(model), 'rank': _uniform(ranks),
              'alpha': _uniform({name: m.lora_scale * ranks[name] for name, m in modules.items()})}
    return lora_file.adapter_file_bytes(adapter_state_dict(model), config)


def save_adapters(model: nn.Module, path) -> int:
    """Write the adapters alone to ``path`` (safetensors, :mod:`zoo.lora_file`); returns the file's size in bytes.
    Written as checkpoints are: to ``<path>.partial``, flushed, renamed over the previous file and its SHA-256
    written beside it (:func:`zoo.weights.durable.replace_durably`); a failed write removes the partial and leaves
    the previous file whole."""
    if not lora_modules(model):
        raise ValueError(f"{type(model).__name__} has no LoRA adapters to save; call zoo.lora.apply_lora first")
    path = Path(path)
    partial = path.with_name(path.name + '.partial')
    data = adapter_file_bytes(model)
    try:
        with open(partial, 'wb') as f:
            f.write(data)
        replace_durably(partial, path, checksum=True)
    except BaseException:
        partial.unlink(missing_ok=True)
        sidecar(partial).unlink(missing_ok=True)
        raise
    return len(data)


def _module_names(own: dict, saved: dict) -> dict[str, str]:
    """The saved module name for each of the model's, matching 'backbone.'-prefixed names with bare ones (adapters
    saved from a task model load into its backbone and the other way round)."""
    for outer, inner in (('', ''), ('backbone.', ''), ('', 'backbone.')):
        if all(k.startswith(inner) for k in own) and {outer + k[len(inner):] for k in own} == set(saved):
            return {k: outer + k[len(inner):] for k in own}
    return {k: k for k in own}


def _fit_message(model: nn.Module, adapters: lora_file.AdapterFile, problems: str) -> str:
    config = adapters.config
    options = ', '.join(f'{k}={config[k]!r}' for k in ('targets', 'rank', 'alpha') if k in config)
    return (f"adapters in {adapters.path} do not fit the LoRA layers of {type(model).__name__}: {problems}. Adapt "
            f"the model as they were trained: zoo.lora.apply_lora(model, {options or 'targets=..., rank=...'})")


def load_adapters(model: nn.Module, path, alpha: float | None = None) -> nn.Module:
    """Load adapters saved by :func:`save_adapters` into a model adapted with the same targets and rank, with the
    alpha they were trained with (as peft applies its saved config): where the model was adapted with another
    alpha, the file's replaces it and a warning says so. ``alpha`` is for files that record none (written by a
    LoRA run's hook before it recorded the alpha); a file's own alpha that differs from it is refused.

    Everything is checked before the model changes (:func:`zoo.lora_file.read_adapter_file`): a refused file
    leaves it as it was. A merged model stays merged, with the loaded adapters."""
    adapters = lora_file.read_adapter_file(path)
    own = lora_modules(model)
    if not own:
        raise CheckpointMismatchError(_fit_message(model, adapters, 'the model has no LoRA layers'))
    names = _module_names(own, adapters.ranks)
    missing = sorted(k for k, saved in names.items() if saved not in adapters.ranks)
    unexpected = sorted(set(adapters.ranks) - set(names.values()))
    wrong = [f"{names[k]}.{part} {tuple(adapters.tensors[f'{names[k]}.{part}'].shape)} vs model "
             f"{tuple(getattr(m, part).shape)}" for k, m in own.items() if k not in missing for part in lora_file.PARTS
             if adapters.tensors[f'{names[k]}.{part}'].shape != getattr(m, part).shape]
    if missing or unexpected or wrong:
        raise CheckpointMismatchError(_fit_message(model, adapters, f"missing {missing[:6]}, not in model "
                                                                    f"{unexpected[:6]}, shape mismatch {wrong[:6]}"))
    alphas = _alphas(adapters, alpha)
    scales = {k: alphas[names[k]] / adapters.ranks[names[k]] for k in own}
    changed = {k: m.lora_scale * adapters.ranks[names[k]] for k, m in own.items() if m.lora_scale != scales[k]}
    merged = any(m.lora_merged for m in own.values())
    unmerge_lora(model)
    with torch.no_grad():
        for name, module in own.items():
            for part in lora_file.PARTS:
                getattr(module, part).copy_(adapters.tensors[f'{names[name]}.{part}'])
            module.lora_scale = scales[name]
    for holder in model.modules():
        if getattr(holder, 'lora_config', None):
            holder.lora_config['alpha'] = _uniform(alphas)
    if changed:
        log.warning("adapters in %s: their alpha %s applied to %d LoRA Linears adapted with alpha %s", path,
                    _uniform(alphas), len(changed), _uniform(changed))
    return merge_lora(model) if merged else model


def _alphas(adapters: lora_file.AdapterFile, alpha: float | None) -> dict[str, float]:
    recorded = adapters.alphas()
    if recorded is None and alpha is None:
        raise CheckpointError(f"adapter file {adapters.path} records no alpha (written by an older LoRA run's hook); "
                              f"pass the alpha of the run's model.backbone.lora: "
                              f"zoo.lora.load_adapters(model, path, alpha=...) (apply_lora's default is the rank)")
    if recorded is None:
        return {name: float(alpha) for name in adapters.ranks}
    if alpha is not None and set(recorded.values()) != {float(alpha)}:
        raise CheckpointMismatchError(f"adapter file {adapters.path} was trained with alpha {_uniform(recorded)}, "
                                      f"not the alpha={alpha} asked for; leave alpha out to use the file's")
    return recorded


def lora_summary(model: nn.Module) -> str:
    """'LoRA rank r on n Linears: t trained parameters of N (p%); adapter file s KiB'."""
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    trained = sum(p.numel() for p in params if p.requires_grad)
    adapters = lora_modules(model)
    ranks = sorted({m.lora_a.shape[0] for m in adapters.values()})
    size = len(adapter_file_bytes(model))
    return (f"LoRA rank {'/'.join(map(str, ranks))} on {len(adapters)} Linears: {trained:,} trained parameters of "
            f"{total:,} ({100 * trained / max(total, 1):.2f}%); adapter file {size / 1024:.1f} KiB")
