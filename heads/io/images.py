"""Reading images and computing resize targets, with errors that name the file.

Every image and annotation map is decoded by :func:`decode`: a missing file, undecodable bytes and a JPEG
whose data ends before its end marker (libjpeg would fill the missing rows with grey and only print a
warning without the file name) are errors naming the file (:class:`ImageError`).
"""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from .files import files_under

_JPEG, _PNG, _BMP = b'\xff\xd8\xff', b'\x89PNG\r\n\x1a\n', b'BM'
_STANDALONE = {0x01, *range(0xD0, 0xD9)}  # TEM, RSTn, SOI: markers without a length field
_SOF = set(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers (they hold the image size)
#: Larger images are refused before decoding: a few header bytes can ask the decoder for gigabytes.
MAX_PIXELS = 1 << 28  # 16384 x 16384


class ImageError(ValueError):
    """An image or annotation map that cannot be used; the message names the file and what is wrong."""


def _jpeg_segments(data: bytes):
    """(marker, offset of its length field) of each JPEG header segment, up to the start of scan (0xDA); walked
    by their lengths, so an EXIF thumbnail's own markers are skipped. Stops early in a damaged header."""
    position = 2
    while position + 4 <= len(data) and data[position] == 0xFF:
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in _STANDALONE:
            position += 2
            continue
        if marker == 0xD9:  # end of image before any scan
            return
        yield marker, position + 2
        if marker == 0xDA:
            return
        position += 2 + int.from_bytes(data[position + 2:position + 4], 'big')


def jpeg_truncated(data: bytes) -> bool:
    """Whether JPEG ``data`` ends before its end-of-image marker (or has no scan): the entropy-coded data after
    the start of scan cannot contain 0xFFD9 except as the end marker (0xFF bytes are stuffed as 0xFF00)."""
    for marker, at in _jpeg_segments(data):
        if marker == 0xDA:
            return b'\xff\xd9' not in data[at + int.from_bytes(data[at:at + 2], 'big'):]
    return True


def declared_size(data: bytes) -> tuple[int, int] | None:
    """(height, width) that a JPEG, PNG or BMP header declares; None for other formats or a header cut short."""
    if data.startswith(_PNG) and data[12:16] == b'IHDR' and len(data) >= 24:
        return int.from_bytes(data[20:24], 'big'), int.from_bytes(data[16:20], 'big')
    if data.startswith(_BMP) and len(data) >= 26:
        return abs(int.from_bytes(data[22:26], 'little', signed=True)), abs(int.from_bytes(data[18:22], 'little',
                                                                                             signed=True))
    if data.startswith(_JPEG):
        for marker, at in _jpeg_segments(data):
            if marker in _SOF and at + 7 <= len(data):
                return int.from_bytes(data[at + 3:at + 5], 'big'), int.from_bytes(data[at + 5:at + 7], 'big')
    return None


def decode(path, flags: int, what: str = 'image') -> np.ndarray:
    """``cv2.imread(path, flags)``, or an :class:`ImageError` (``FileNotFoundError`` for a missing file) that
    names the file: undecodable, a truncated JPEG, or a header declaring more than ``MAX_PIXELS``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
    with open(path, 'rb') as f:
        data = f.read(64)
    if data.startswith(_JPEG):
        data = path.read_bytes()
    size = declared_size(data)
    if size is not None and size[0] * size[1] > MAX_PIXELS:
        raise ImageError(f"{what} {path} declares {size[0]}x{size[1]} pixels, more than the {MAX_PIXELS} this "
                         f"reader decodes (heads.io.images.MAX_PIXELS): a damaged or hostile header, or an image to "
                         f"tile first")
    if data.startswith(_JPEG) and jpeg_truncated(data):
        raise ImageError(f"cannot decode {what} {path}: the file is corrupt or truncated: its JPEG data ends "
                         f"before the end marker (e.g. a copy cut short), so rows would be missing. Copy it again")
    try:
        array = cv2.imread(str(path), flags)
    except cv2.error as err:
        raise ImageError(f"cannot decode {what} {path}: {str(err).strip().splitlines()[-1]}") from err
    if array is None:
        raise ImageError(f"cannot decode {what} {path}: the file is corrupt, truncated or not an image")
    return array


def read_rgb(path) -> np.ndarray:
    """An 'h w 3' uint8 RGB array from an image file, by these rules (docs/reliability.md):

    - grayscale is repeated into three equal channels; palette images are expanded to their colours;
    - an alpha channel is dropped (no compositing: transparent pixels keep their stored colour);
    - 16-bit images are scaled to 8 bits, ``round(v * 255 / 65535)``;
    - the EXIF orientation of JPEGs is applied (as cv2 and PIL viewers show them);
    - floating-point images (EXR, float TIFF) are refused, since their range is unknown.
    """
    image = decode(path, cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH)
    if image.dtype == np.uint16:
        image = ((image.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
    elif image.dtype != np.uint8:
        raise ImageError(f"image {path} has {image.dtype} pixels: only 8- and 16-bit integer images are read; "
                         f"convert it to an 8-bit PNG/JPEG with the intensity range you want")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def check_rgb(image: np.ndarray, name: str = 'image') -> np.ndarray:
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        desc = f"{image.dtype} array of shape {image.shape}" if isinstance(image, np.ndarray) else type(image).__name__
        raise ImageError(f"{name} must be an RGB uint8 array of shape (H, W, 3), got a {desc}")
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


#: The suffixes read as images wherever folders are searched (any case).
IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.webp', '.tif', '.tiff')


def images_in(folder) -> list[Path]:
    """The image files under ``folder`` (recursively, symbolic links to folders followed, sorted); an error names a
    missing folder or one without images."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"image folder {folder} does not exist")
    paths = [p for p in files_under(folder) if p.suffix.lower() in IMAGE_SUFFIXES]
    if not paths:
        raise ValueError(f"folder {folder} holds no image ({', '.join(IMAGE_SUFFIXES)})")
    return paths
