"""Measuring models: parameters, multiply-accumulates, forward throughput and peak memory."""
from __future__ import annotations

import contextlib
import math
import time
import weakref

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from zoo.runtime.gemm import uses_onednn


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _onednn_linear_flops(x_shape, weight_shape, *args, **kwargs) -> int:
    """'... k, n k -> ... n': 2 FLOPs per multiply-accumulate."""
    return 2 * math.prod(x_shape) * weight_shape[0]


_EXTRA_FLOPS = {torch.ops.mkldnn._linear_pointwise: _onednn_linear_flops} if hasattr(
    torch.ops.mkldnn, '_linear_pointwise') else {}


@torch.no_grad()
def count_macs(model: nn.Module, x: torch.Tensor) -> int:
    """Multiply-accumulates of one forward (torch's FlopCounterMode counts 2 FLOPs per MAC).

    Attention runs through SDPA's math backend here so that its two matmuls are counted (the fused CPU
    kernels are invisible to the counter); oneDNN's fp32 linear (zoo.runtime.gemm) counts as a linear.
    The parameters are counted with ``requires_grad`` off (restored after): under ``no_grad`` a view of a parameter
    (Mask2Former's ``query_feat.expand(b, -1, -1)``) would require grad without a grad function, which the counter's
    module tracker refuses ("Expected gradient function to be set").
    """
    uses_onednn()  # its one-off probe of the library runs outside the counter
    trainable = [p for p in model.parameters() if p.requires_grad]
    try:
        for p in trainable:
            p.requires_grad_(False)
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False, custom_mapping=_EXTRA_FLOPS) as counter:
            model(x)
    finally:
        for p in trainable:
            p.requires_grad_(True)
    return counter.get_total_flops() // 2


class _LiveTensorBytes(TorchDispatchMode):
    """Counts the bytes of tensor storages created inside the mode and still alive; keeps the peak."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, list[int]] = {}  # storage address -> [bytes, live tensors using it]
        self.older: set[int] = set()          # storages that existed before (parameters, inputs)
        self.current = self.peak = 0

    def _release(self, ptr: int) -> None:
        entry = self.live[ptr]
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.live[ptr]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.live:
                self.older.add(t.untyped_storage().data_ptr())
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr in self.older or ptr == 0:
                continue
            entry = self.live.get(ptr)
            if entry is None:
                entry = self.live[ptr] = [storage.nbytes(), 0]
                self.current += entry[0]
                self.peak = max(self.peak, self.current)
            entry[1] += 1
            weakref.finalize(t, self._release, ptr)
        return out


@contextlib.contextmanager
def peak_memory(device: torch.device | str):
    """Yields a dict whose 'peak_mib' is filled on exit: the peak of tensor memory allocated inside.

    CUDA: the caching allocator's peak above the level at entry. Elsewhere: the peak of the bytes of
    tensor storages created inside the block and still referenced (parameters and inputs excluded),
    followed op by op — the same quantity, free of the CPU allocator's caching.
    """
    result = {'peak_mib': float('nan')}
    device = torch.device(device)
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        yield result
        torch.cuda.synchronize(device)
        result['peak_mib'] = (torch.cuda.max_memory_allocated(device) - base) / 2 ** 20
        return
    with _LiveTensorBytes() as tracker:
        yield result
    result['peak_mib'] = tracker.peak / 2 ** 20


def synchronize(device) -> None:
    """Wait for the device's queued work (CUDA); nothing to wait for on CPU."""
    if torch.device(device).type == 'cuda':
        torch.cuda.synchronize(device)


def seconds_of(fn, device='cpu') -> float:
    """Wall-clock seconds of ``fn()``, the device's queued work included."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def median(values) -> float:
    """The middle value (the upper one of an even count): robust to the odd slow run."""
    return sorted(values)[len(values) // 2]


def interleaved_rounds(measures: list, rounds: int) -> list[list[float]]:
    """Seconds of each zero-argument ``measure`` (it returns its own duration) in each round; the order
    alternates between rounds (AB BA ...) so that neither always runs first after the other."""
    times = [[] for _ in measures]
    for r in range(rounds):
        for i in (range(len(measures)) if r % 2 == 0 else reversed(range(len(measures)))):
            times[i].append(measures[i]())
    return times


def time_forward(model: nn.Module, x: torch.Tensor, *, amp_dtype: torch.dtype | None = None, warmup: int = 2,
                 iters: int = 5, min_seconds: float = 0.0) -> float:
    """Median seconds per forward pass (no grad) over ``iters`` timed runs after ``warmup`` runs."""
    device = x.device
    autocast = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
    times = []
    with torch.inference_mode(), autocast:
        for _ in range(warmup):
            model(x)
        synchronize(device)
        start_all = time.perf_counter()
        while len(times) < iters or time.perf_counter() - start_all < min_seconds:
            times.append(seconds_of(lambda: model(x), device))
    return median(times)
