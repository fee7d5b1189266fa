"""bf16 (or fp16) autocast training on any device: mmengine's AmpOptimWrapper insists on a GPU."""
from __future__ import annotations

import warnings
from contextlib import contextmanager

import torch
from mmengine.optim import OptimWrapper

from zoo.core import cpu_has_bf16_kernels

from ..registry import OPTIM_WRAPPERS


@OPTIM_WRAPPERS.register_module()
class AutocastOptimWrapper(OptimWrapper):
    """An OptimWrapper whose forward context is ``torch.autocast`` on the model's device (bf16 by default).

    bf16 needs no loss scaling; parameters, gradients and optimizer state stay fp32. Depth heads and losses
    run in fp32 inside autocast by their own choice.
    """

    def __init__(self, *args, dtype: str | torch.dtype = 'bfloat16', **kwargs):
        super().__init__(*args, **kwargs)
        self.dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype

    @contextmanager
    def optim_context(self, model):
        device = next(model.parameters()).device.type
        if device == 'cpu' and self.dtype == torch.bfloat16 and not cpu_has_bf16_kernels():
            warnings.warn(f"this CPU ({torch.backends.cpu.get_cpu_capability()}) has no oneDNN bf16 kernels: bf16 "
                          f"autocast runs several times slower than fp32 here; train without --amp, or on a GPU or "
                          f"a CPU with AVX512/AMX", stacklevel=3)
        with super().optim_context(model), torch.autocast(device_type=device, dtype=self.dtype):
            yield
