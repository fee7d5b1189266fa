"""Reading images and computing resize targets, with errors that name the file."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np


def read_rgb(path) -> np.ndarray:
    """An 'h w 3' uint8 RGB array from an image file, by these rules (docs/reliability.md):

    - grayscale is repeated into three equal channels; palette images are expanded to their colours;
    - an alpha channel is dropped (no compositing: transparent pixels keep their stored colour);
    - 16-bit images are scaled to 8 bits, ``round(v * 255 / 65535)``;
    - the EXIF orientation of JPEGs is applied (as cv2 and PIL viewers show them);
    - floating-point images (EXR, float TIFF) are refused, since their range is unknown.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image {path} does not exist")
    image = cv2.imread(str(path), cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH)
    if image is None:
        raise ValueError(f"cannot decode image {path}: the file is corrupt, truncated or not an image")
    if image.dtype == np.uint16:
        image = ((image.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
    elif image.dtype != np.uint8:
        raise ValueError(f"image {path} has {image.dtype} pixels: only 8- and 16-bit integer images are read; "
                         f"convert it to an 8-bit PNG/JPEG with the intensity range you want")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def check_rgb(image: np.ndarray, name: str = 'image') -> np.ndarray:
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        desc = f"{image.dtype} array of shape {image.shape}" if isinstance(image, np.ndarray) else type(image).__name__
        raise ValueError(f"{name} must be an RGB uint8 array of shape (H, W, 3), got a {desc}")
    return image


def keep_ratio_size(height: int, width: int, scale: tuple[int, int]) -> tuple[int, int]:
    """mmseg's keep-ratio rescale: fit the long side in max(scale) and the short side in min(scale)."""
    factor = min(max(scale) / max(height, width), min(scale) / min(height, width))
    return int(height * factor + 0.5), int(width * factor + 0.5)


def write_rgb(path, image: np.ndarray) -> Path:
    """Write an 'h w 3' uint8 RGB picture (PNG/JPEG by the suffix), making its folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR)):
        raise ValueError(f"could not write {path}: use a .png or .jpg name")
    return path
