"""Small parts of a transformer block: MLP, activations (QuickGELU and the names families take), DropPath,
LayerScale, a Linear reading normed inputs."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..runtime.gemm import linear, mm
from .linear import Linear


class _GeluLinear(torch.autograd.Function):
    """linear(gelu(h)) that saves only h for backward and recomputes gelu(h) there.

    Autograd would keep both h and gelu(h) ('b n 4c' each, the largest activations of a block); the
    recomputation is one elementwise pass.
    """

    @staticmethod
    def forward(ctx, h, weight, bias):
        ctx.save_for_backward(h, weight)
        ctx.has_bias = bias is not None
        return linear(F.gelu(h), weight, bias)

    @staticmethod
    def backward(ctx, grad):
        h, weight = ctx.saved_tensors
        grad = grad.to(h.dtype)
        rows = grad.flatten(0, -2)
        grad_act = mm(rows, weight.to(h.dtype)).view(*grad.shape[:-1], weight.shape[1])
        grad_weight = mm(rows.T, F.gelu(h).flatten(0, -2))
        grad_bias = rows.sum(0) if ctx.has_bias else None
        grad_h = torch.ops.aten.gelu_backward(grad_act, h)
        return grad_h, grad_weight.to(weight.dtype), None if grad_bias is None else grad_bias.to(weight.dtype)


def grad_free(x: torch.Tensor) -> bool:
    """True when autograd will not need x (inference): then x may be overwritten instead of copied."""
    return not (torch.is_grad_enabled() and x.requires_grad)


def activate(act: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``act(x)``, computed in place for GELU/SiLU/ReLU/Hardswish when x is a grad-free intermediate.

    On CPU a fresh map-sized output costs page faults that take as long as the activation itself.
    """
    if grad_free(x):
        if type(act) is nn.GELU:
            return torch.ops.aten.gelu_(x, approximate=act.approximate)
        if type(act) is nn.SiLU:
            return F.silu(x, inplace=True)
        if type(act) is nn.ReLU:
            return F.relu(x, inplace=True)
        if type(act) is nn.Hardswish:
            return F.hardswish(x, inplace=True)
    return act(x)


class QuickGELU(nn.Module):
    """x * sigmoid(1.702 x): the GELU approximation of CLIP and of the official CvT code."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class GELUTanh(nn.GELU):
    """GELU with the tanh approximation (timm's ``gelu_tanh``: SigLIP's towers where Big Vision trained them so)."""

    def __init__(self):
        super().__init__(approximate='tanh')


#: Activation names a family's ``act`` option takes.
ACTIVATIONS: dict[str, type[nn.Module]] = {'gelu': nn.GELU, 'gelu_tanh': GELUTanh, 'quick_gelu': QuickGELU,
                                           'silu': nn.SiLU, 'relu': nn.ReLU}


def activation_layer(name: str) -> type[nn.Module]:
    """The activation class called ``name`` (:data:`ACTIVATIONS`); an unknown name is an error listing them."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


class Mlp(nn.Module):
    """fc1 -> act -> dropout -> fc2 -> dropout on the last axis (``drop``: one rate, or (hidden, output)).

    With GELU and no hidden dropout, training recomputes the activation in backward instead of storing it
    (identical values and gradients, one 'b n hidden' tensor less per block).
    ``gated`` (GLU; SwiGLU with ``act_layer=nn.SiLU``, DINOv2's giant MLP): fc1 gives 2 * hidden_dim, packed as
    [gate, value] on the last axis ('b n (two hidden)'), and fc2 reads act(gate) * value, as timm's SwiGLUPacked,
    DINOv2's ``w12``/``w3`` and transformers' ``weights_in``/``weights_out``.
    ``norm``: an optional part applied to the hidden 'b n hidden' just before fc2 (NormFormer's MLP norm; EVA-02's
    SwiGLU, timm's ``scale_mlp``), e.g. ``nn.LayerNorm(hidden_dim)``; its keys are ``norm.*``.
    ``bias``: fc1 and fc2 have biases (AIMv2's have none).
    """

    def __init__(self, dim: int, hidden_dim: int, out_dim: int | None = None, act_layer=nn.GELU,
                 drop: float | tuple[float, float] = 0.0, gated: bool = False, norm: nn.Module | None = None,
                 bias: bool = True):
        super().__init__()
        hidden_drop, out_drop = drop if isinstance(drop, tuple) else (drop, drop)
        self.gated = gated
        self.fc1 = nn.Linear(dim, 2 * hidden_dim if gated else hidden_dim, bias=bias)
        self.act = act_layer()
        self.drop1 = nn.Dropout(hidden_drop) if hidden_drop else nn.Identity()
        self.norm = norm  # a module only when given: the keys of MLPs without one are unchanged
        self.fc2 = nn.Linear(hidden_dim, out_dim or dim, bias=bias)
        self.drop2 = nn.Dropout(out_drop) if out_drop else nn.Identity()
        self.recompute_act = type(self.act) is nn.GELU and self.act.approximate == 'none' and not hidden_drop \
            and not gated and norm is None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        if self.gated:  # 'b n (two hidden)' -> act(gate) * value
            hidden = h.shape[-1] // 2
            gate, value = h[..., :hidden], h[..., hidden:]
            # the activation in place in fc1's output when grad-free (activate); the product a fresh contiguous
            # tensor, so that fc2 sums as it would over act(gate) * value (in place, fc2 would read a strided view
            # and round otherwise)
            h = self.drop1(activate(self.act, gate) * value)
            return self.drop2(self.fc2(h if self.norm is None else self.norm(h)))
        # (fc2's weight is read directly there: only for a plain Linear, not one with an adapter, zoo.lora)
        if self.recompute_act and type(self.fc2) is nn.Linear and torch.is_grad_enabled() and h.requires_grad:
            dtype = torch.get_autocast_dtype(h.device.type) if torch.is_autocast_enabled(h.device.type) else h.dtype
            with torch.autocast(h.device.type, enabled=False):  # run in the dtype autocast would have used
                h = h.to(dtype)
                out = _GeluLinear.apply(h, self.fc2.weight.to(dtype), None if self.fc2.bias is None
                                        else self.fc2.bias.to(dtype))
            return self.drop2(out)
        h = self.drop1(activate(self.act, h))
        return self.drop2(self.fc2(h if self.norm is None else self.norm(h)))


class PreNormLinear(Linear):
    """A Linear reading ``norm(x)``: ``norm`` is a part (e.g. ``nn.LayerNorm(in_features)``), its keys ``norm.*``
    beside the Linear's ``weight``/``bias``. As an attention's ``proj`` it is EVA-02 CLIP's norm of the heads'
    output before the projection (timm's ``scale_attn_inner``, ``attn.norm``)."""

    def __init__(self, in_features: int, out_features: int, norm: nn.Module, bias: bool = True):
        super().__init__(in_features, out_features, bias=bias)
        self.norm = norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(self.norm(x))


def init_linear(module: nn.Module) -> None:
    """timm's ViT initialisation of Linear layers: truncated normal (std 0.02) weights, zero biases."""
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


class _RandomDrop(nn.Module):
    """In training, zero parts of x with probability p and scale the rest by 1 / (1 - p).

    Subclasses choose the parts through a bool ``keep_mask`` broadcastable to x; ``where`` keeps only that
    mask for backward, so the rescaling can run in place.
    """

    def __init__(self, p: float = 0.0):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"{type(self).__name__} probability must be in [0, 1), got {p}")
        self.p = p

    def keep_mask(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        return torch.where(self.keep_mask(x), x, 0.0).mul_(1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}"


class DropPath(_RandomDrop):
    """Stochastic depth: a sample's whole residual branch is dropped ('b ...' mask of shape 'b 1 ...')."""

    def keep_mask(self, x: torch.Tensor) -> torch.Tensor:
        return torch.rand((x.shape[0],) + (1,) * (x.ndim - 1), device=x.device) >= self.p


class Dropout(_RandomDrop):
    """Element-wise dropout as ``nn.Dropout`` (same distribution, another random stream), with a bool mask
    drawn by ``rand_like``: about 1.3x faster than ``F.dropout`` on large CPU maps, a 1-byte mask kept."""

    def keep_mask(self, x: torch.Tensor) -> torch.Tensor:
        return torch.rand_like(x) >= self.p


class LayerScale(nn.Module):
    """Per-channel learned scale of a residual branch (CaiT), ``gamma`` initialised to ``init_values``."""

    def __init__(self, dim: int, init_values: float = 1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), float(init_values)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma
