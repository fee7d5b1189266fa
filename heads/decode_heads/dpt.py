"""DPT prediction heads on the finest fused map (stride 2): segmentation logits and depth."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core import Dropout
from zoo.core.resize import Upsample

from ..conv_init import check_init, classifier_init, conv_module_init
from ..registry import MODELS


@MODELS.register_module()
class DPTSegHead(nn.Module):
    """conv3x3 (no bias) -> BN -> ReLU -> Dropout -> conv1x1 to classes [-> bilinear x2, align_corners=True].

    The auxiliary head is the same without the final upsampling (``upsample=False``); so is mmseg's DPT head, whose
    stride-2 logits the segmentor resizes straight to the label size (bilinear, align_corners=False).
    init: 'torch' (PyTorch's defaults) or 'mmseg' (kaiming conv + BN, classifier normal std 0.01;
    :mod:`heads.conv_init`).
    """

    def __init__(self, num_classes: int, in_channels: int = 256, dropout: float = 0.1, upsample: bool = True,
                 init: str = 'torch'):
        super().__init__()
        layers = [nn.Conv2d(in_channels, in_channels, 3, padding=1, bias=False), nn.BatchNorm2d(in_channels),
                  nn.ReLU(inplace=True), Dropout(dropout), nn.Conv2d(in_channels, num_classes, 1)]
        if upsample:
            layers.append(Upsample(scale_factor=2, mode='bilinear', align_corners=True))
        self.head = nn.Sequential(*layers)
        self.num_classes = num_classes
        if check_init(init) == 'mmseg':
            conv_module_init(self.head[0], self.head[1])
            classifier_init(self.head[4])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """'b c h w -> b k (2h) (2w)' (or 'b k h w' without upsampling)."""
        return self.head(x)


@MODELS.register_module()
class DPTDepthHead(nn.Module):
    """conv 256->128 -> bilinear x2 -> conv 128->32 -> ReLU -> conv 32->1, then the output activation.

    mode 'relative': ReLU, the output is inverse depth (disparity) up to scale and shift (MiDaS training);
    mode 'metric':   sigmoid x ``max_depth``, the output is depth in metres in (0, max_depth).
    Runs in float32 even under autocast (fp16/bf16 depth regressions overflow or lose the fine range).
    ``projection`` adds a 3x3 conv + ReLU before the head (HF ``add_projection``, DPT-Hybrid MiDaS).
    """

    def __init__(self, in_channels: int = 256, mode: str = 'relative', max_depth: float = 10.0,
                 projection: bool = False):
        super().__init__()
        if mode not in ('relative', 'metric'):
            raise ValueError(f"depth head mode must be 'relative' or 'metric', got {mode!r}")
        self.mode, self.max_depth = mode, max_depth
        self.projection = nn.Conv2d(in_channels, in_channels, 3, padding=1) if projection else None
        self.head = nn.Sequential(
            nn.Conv2d(in_channels, in_channels // 2, 3, padding=1),
            Upsample(scale_factor=2, mode='bilinear', align_corners=True),
            nn.Conv2d(in_channels // 2, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """'b c h w -> b 1 (2h) (2w)'."""
        with torch.autocast(device_type=x.device.type, enabled=False):
            x = x.float()
            if self.projection is not None:
                x = F.relu(self.projection(x))
            x = self.head(x)
            return F.relu(x) if self.mode == 'relative' else torch.sigmoid(x) * self.max_depth
