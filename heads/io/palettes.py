"""Class colours: the palette a dataset that names none gets (mmseg's fallback). Datasets set it in their
metainfo; the pictures (:mod:`heads.visualization`), the exported metadata and the tools read it from there or
from here. numpy only."""
from __future__ import annotations

import numpy as np


def default_palette(num_classes: int) -> list[list[int]]:
    """mmseg's fallback colours for classes without a palette: ``RandomState(42).randint(0, 255, (k, 3))``."""
    return np.random.RandomState(42).randint(0, 255, size=(num_classes, 3)).tolist()
