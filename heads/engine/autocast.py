"""bf16 (or fp16) autocast training on any device: mmengine's AmpOptimWrapper insists on a GPU."""
from __future__ import annotations

from contextlib import contextmanager

import torch
from mmengine.optim import OptimWrapper

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
        with super().optim_context(model), torch.autocast(device_type=device, dtype=self.dtype):
            yield
