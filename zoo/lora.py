"""LoRA (Hu et al. 2022): low-rank adapters on chosen Linears of any model, everything else frozen.

A LoRA Linear computes ``W x + b + (alpha / rank) * B A dropout(x)`` with A 'rank in' (Kaiming-uniform) and B
'out rank' (zeros, so training starts from the base model). The Linears are chosen by shell-style patterns on
their module names (``'*.attn.qkv'``, ``'blocks.*.mlp.fc*'``, ...) and adapted in place: the module keeps its
class's behaviour (a fused q/k/v projection still returns q, k, v) and its ``weight``/``bias`` keys, and gains
``lora_a``/``lora_b``, so base checkpoints load into it unchanged.

- :func:`apply_lora` adapts the Linears and freezes every other parameter (``trainable`` patterns keep some);
- :func:`merge_lora` folds ``(alpha / rank) B A`` into the base weights for inference, :func:`unmerge_lora`
  takes it out again (outputs equal within float rounding either way);
- :func:`save_adapters` / :func:`load_adapters`: the adapters alone as a small safetensors file (rank, alpha and
  targets in its metadata);
- :func:`lora_summary`: the parameters trained, of how many, and the adapter file's size.

In configs: ``model.backbone.lora = dict(rank=8, alpha=16, dropout=0.0, targets=('*.attn.qkv', ...))``
(:func:`zoo.create_backbone`'s ``lora`` option).
"""
from __future__ import annotations

import fnmatch
import json
import math

import torch
from torch import nn

from .core.cpu_gemm import CPULinear, cpu_linear_class, plain_linear_class

DEFAULT_TARGETS = ('*.attn.qkv', '*.attn.qkv.*')  # the attention's q/k/v projection, fused or separate


class LoRALinear(nn.Linear):
    """A Linear with an adapter: ``lora_a`` 'rank in', ``lora_b`` 'out rank', ``lora_dropout``, ``lora_scale``.

    :func:`apply_lora` turns a Linear into one in place. A Linear subclass with its own forward (the fused q/k/v
    projection) becomes a class deriving from it and then from this one, so that its ``super().forward`` (the
    plain linear map) is this forward and the adapter acts inside it: its outputs keep their form.
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

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, lora_rank={self.lora_a.shape[0]}, lora_scale={self.lora_scale:g}, " \
               f"merged={self.lora_merged}"


_CLASSES: dict[type, type] = {}


def _lora_class(cls: type) -> type:
    """The LoRA form of a Linear class (see :class:`LoRALinear`)."""
    if cls is nn.Linear:
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
    """Adapt (in place) every ``nn.Linear`` whose module name matches one of ``targets``; freeze every other
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
    for module in chosen.values():
        _adapt(module, rank, float(rank if alpha is None else alpha), dropout)
    model.lora_config = {'targets': list(targets), 'rank': rank, 'alpha': float(rank if alpha is None else alpha),
                         'dropout': dropout}
    for name, param in model.named_parameters():
        param.requires_grad_(name.rsplit('.', 1)[-1] in ('lora_a', 'lora_b') or _match(name, trainable))
    return model


def _adapt(module: nn.Linear, rank: int, alpha: float, dropout: float) -> None:
    weight = module.weight
    fast = isinstance(module, CPULinear)  # LoRA's forward must come before the oneDNN one in the method order
    module.__class__ = _lora_class(plain_linear_class(type(module)))
    if fast:
        module.__class__ = cpu_linear_class(module.__class__)
    module.lora_a = nn.Parameter(torch.empty(rank, module.in_features, device=weight.device, dtype=weight.dtype))
    module.lora_b = nn.Parameter(torch.zeros(module.out_features, rank, device=weight.device, dtype=weight.dtype))
    nn.init.kaiming_uniform_(module.lora_a, a=math.sqrt(5))
    module.lora_dropout = nn.Dropout(dropout) if dropout else nn.Identity()
    module.lora_scale = alpha / rank
    module.lora_merged = False


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


def _serialise(model: nn.Module) -> bytes:
    from safetensors.torch import save
    tensors = {k: v.contiguous().cpu() for k, v in adapter_state_dict(model).items()}
    return save(tensors, metadata={'lora_config': json.dumps(getattr(model, 'lora_config', {}))})


def save_adapters(model: nn.Module, path) -> int:
    """Write the adapters alone to ``path`` (safetensors); returns the file's size in bytes."""
    if not lora_modules(model):
        raise ValueError(f"{type(model).__name__} has no LoRA adapters to save; call zoo.lora.apply_lora first")
    data = _serialise(model)
    with open(path, 'wb') as f:
        f.write(data)
    return len(data)


def load_adapters(model: nn.Module, path) -> nn.Module:
    """Load adapters saved by :func:`save_adapters` into a model adapted with the same targets and rank (saved from
    a task model and loaded into its backbone, or the other way round, the 'backbone.' part of the names is
    matched)."""
    from safetensors import safe_open
    with safe_open(str(path), framework='pt') as f:
        state = {k: f.get_tensor(k) for k in f.keys()}
    own = adapter_state_dict(model)
    for outer, inner in (('backbone.', ''), ('', 'backbone.')):
        if set(own) != set(state) and all(k.startswith(inner) for k in own) and \
                {outer + k[len(inner):] for k in own} == set(state):
            state = {inner + k[len(outer):]: v for k, v in state.items()}
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    wrong = [f"{k} {tuple(state[k].shape)} vs model {tuple(own[k].shape)}" for k in own
             if k in state and state[k].shape != own[k].shape]
    if missing or unexpected or wrong:
        raise ValueError(f"adapters in {path} do not fit the model's LoRA layers (apply_lora with the targets and "
                         f"rank they were trained with): missing {missing[:6]}, not in model {unexpected[:6]}, "
                         f"shape mismatch {wrong[:6]}")
    merged = any(m.lora_merged for m in lora_modules(model).values())
    unmerge_lora(model)
    with torch.no_grad():
        for name, module in lora_modules(model).items():
            module.lora_a.copy_(state[f'{name}.lora_a'])
            module.lora_b.copy_(state[f'{name}.lora_b'])
    return merge_lora(model) if merged else model


def lora_summary(model: nn.Module) -> str:
    """'LoRA rank r on n Linears: t trained parameters of N (p%); adapter file s KiB'."""
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    trained = sum(p.numel() for p in params if p.requires_grad)
    adapters = lora_modules(model)
    ranks = sorted({m.lora_a.shape[0] for m in adapters.values()})
    size = len(_serialise(model))
    return (f"LoRA rank {'/'.join(map(str, ranks))} on {len(adapters)} Linears: {trained:,} trained parameters of "
            f"{total:,} ({100 * trained / max(total, 1):.2f}%); adapter file {size / 1024:.1f} KiB")
