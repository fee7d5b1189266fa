"""How the convolutional parts (DPT neck, heads) start: 'torch' or 'mmseg' initialisation.

'torch': PyTorch's defaults (kaiming-uniform with a=sqrt(5), uniform biases), as the parts are built.
'mmseg': what mmseg's DPT gets from mmcv: every conv it wraps in a ``ConvModule`` kaiming-normal (fan_out, ReLU
gain) with zero bias and its norm at weight 1, bias 0; the classifier conv (``conv_seg``) normal with std 0.01
and zero bias; the other layers (readout Linear, resampling convs) keep PyTorch's defaults.
"""
from __future__ import annotations

from torch import nn

INITS = ('torch', 'mmseg')


def check_init(init: str) -> str:
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    return init


def conv_module_init(*convs: nn.Module) -> None:
    """mmcv ``ConvModule.init_weights``: kaiming-normal (fan_out, ReLU), zero bias; BatchNorms to (1, 0)."""
    for conv in convs:
        if isinstance(conv, nn.Conv2d):
            nn.init.kaiming_normal_(conv.weight, a=0, mode='fan_out', nonlinearity='relu')
            if conv.bias is not None:
                nn.init.zeros_(conv.bias)
        elif isinstance(conv, nn.modules.batchnorm._BatchNorm):
            nn.init.ones_(conv.weight)
            nn.init.zeros_(conv.bias)


def classifier_init(conv: nn.Conv2d, std: float = 0.01) -> None:
    """mmseg's decode-head classifier: normal(0, std) weight, zero bias."""
    nn.init.normal_(conv.weight, 0.0, std)
    if conv.bias is not None:
        nn.init.zeros_(conv.bias)
