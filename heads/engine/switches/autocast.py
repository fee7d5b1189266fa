"""bf16 or fp16 autocast training on any device (mmengine's AmpOptimWrapper insists on a GPU), with loss scaling
for fp16.

fp16 has 5 exponent bits: gradients below about 6e-8 underflow to zero (and above 65504 overflow). So an fp16
run scales its loss as mmengine's :class:`~mmengine.optim.AmpOptimWrapper` does, through the same methods: a
dynamic ``torch.amp.GradScaler`` on the parameters' device multiplies the loss before backward, unscales the
gradients before clipping and the step, skips steps whose gradients overflowed, and is saved in checkpoints
(``optimizer.loss_scaler``). bf16 has fp32's exponent range and needs none: no scaler, plain steps.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager

import torch
from mmengine.optim import AmpOptimWrapper, OptimWrapper

from zoo.runtime import cpu_has_bf16_kernels

from ...registry import OPTIM_WRAPPERS

DTYPES = ('bfloat16', 'float16')


@OPTIM_WRAPPERS.register_module()
class AutocastOptimWrapper(AmpOptimWrapper):
    """An OptimWrapper whose forward context is ``torch.autocast`` on the model's device (bf16 by default).

    ``dtype='float16'``: AmpOptimWrapper's loss scaling (``loss_scale``: 'dynamic', a float for a static scale, or
    GradScaler options as a dict); ``self.loss_scaler`` is None for bf16. Parameters, gradients and optimizer
    state stay fp32. Depth heads and losses run in fp32 inside autocast by their own choice.
    """

    def __init__(self, *args, dtype: str | torch.dtype = 'bfloat16', loss_scale='dynamic', **kwargs):
        OptimWrapper.__init__(self, *args, **kwargs)  # AmpOptimWrapper's own __init__ asserts a GPU
        self.dtype = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
        if self.dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(f"optim_wrapper.dtype must be one of {DTYPES} for AutocastOptimWrapper, got {dtype!r}")
        self.cast_dtype = self.dtype
        self._scale_update_param = None
        self.loss_scaler = self._scaler(loss_scale) if self.dtype == torch.float16 else None

    def _scaler(self, loss_scale) -> torch.amp.GradScaler:
        device = self.optimizer.param_groups[0]['params'][0].device.type
        if loss_scale == 'dynamic':
            return torch.amp.GradScaler(device)
        if isinstance(loss_scale, float):
            self._scale_update_param = loss_scale  # a static scale, as AmpOptimWrapper keeps it
            return torch.amp.GradScaler(device, init_scale=loss_scale)
        if isinstance(loss_scale, dict):
            return torch.amp.GradScaler(device, **loss_scale)
        raise TypeError(f"optim_wrapper.loss_scale must be 'dynamic', a float or a dict of GradScaler options, "
                        f"got {loss_scale!r}")

    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        if self.loss_scaler is None:
            return OptimWrapper.backward(self, loss, **kwargs)
        return super().backward(loss, **kwargs)

    def step(self, **kwargs) -> None:
        if self.loss_scaler is None:
            return OptimWrapper.step(self, **kwargs)
        return super().step(**kwargs)

    def state_dict(self) -> dict:
        return OptimWrapper.state_dict(self) if self.loss_scaler is None else super().state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        if self.loss_scaler is None:  # a bf16 run resumed from an fp16 one's checkpoint: its scale has no use here
            state_dict = {k: v for k, v in state_dict.items() if k != 'loss_scaler'}
        super().load_state_dict(state_dict)

    @contextmanager
    def optim_context(self, model):
        device = next(model.parameters()).device.type
        if device == 'cpu' and self.dtype == torch.bfloat16 and not cpu_has_bf16_kernels():
            warnings.warn(f"this CPU ({torch.backends.cpu.get_cpu_capability()}) has no oneDNN bf16 kernels: bf16 "
                          f"autocast runs several times slower than fp32 here; train without --amp, or on a GPU or "
                          f"a CPU with AVX512/AMX", stacklevel=3)
        with OptimWrapper.optim_context(self, model), torch.autocast(device_type=device, dtype=self.dtype):
            yield
