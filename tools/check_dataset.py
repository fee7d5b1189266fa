"""Check a folder of one's own RGB-D data before training on it, and say what was found.

    python tools/check_dataset.py ../shared/data/depth-7scenes --depth-scale 1000 --depth-invalid 0 65535
    python tools/check_dataset.py my_rgbd/ --depth-scale 1   # .npy depth in float metres

The layout is :class:`heads.datasets.RGBDFolderDataset`'s (Microsoft 7-Scenes'): ``rgb/<stem>.jpg|png``,
``depth/<stem>.png|npy`` with the same stems, optional ``mask/<stem>.png`` (non-zero = valid) and optional
``camera-intrinsics.txt`` or ``intrinsics/<stem>.txt``. Every file is read with the dataset's reader. Reported:
the counts, the depth range in metres (raw / --depth-scale) and the invalid fraction; named: each unreadable file
(truncated, not an image, OpenEXR), each image without depth and depth without image, each mask without an image,
each depth map or mask whose size differs from its image, and each 8-bit depth PNG (16-bit expected: 8 bits hold
256 levels, usually a visualisation; --allow-8bit accepts them). Exit status 1 when anything is named, else 0.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('folder', help='the dataset folder (holding rgb/ and depth/)')
    parser.add_argument('--depth-scale', type=float, default=1000.0,
                        help='raw depth / this = metres (default 1000: millimetres; 1 for float metres)')
    parser.add_argument('--depth-invalid', type=float, nargs='*', default=[0.0],
                        help='raw values meaning "no measurement" (default: 0; 7-Scenes: 0 65535)')
    parser.add_argument('--rgb-dir', default='rgb', help='image subfolder (default rgb)')
    parser.add_argument('--depth-dir', default='depth', help='depth subfolder (default depth)')
    parser.add_argument('--mask-dir', default='mask', help='optional validity-mask subfolder (default mask)')
    parser.add_argument('--allow-8bit', action='store_true', help='accept 8-bit depth PNGs without naming them')
    return parser


def check(folder, depth_scale: float = 1000.0, depth_invalid=(0,), rgb_dir: str = 'rgb', depth_dir: str = 'depth',
          mask_dir: str = 'mask', allow_8bit: bool = False) -> tuple[dict, list[str]]:
    """(summary, problems) of the RGB-D folder ``folder``: each problem a line naming its file."""
    import cv2
    import numpy as np

    from heads.io.depth import (
        DEPTH_SUFFIXES,
        INTRINSICS_DIR,
        RGB_SUFFIXES,
        SHARED_INTRINSICS,
        depth_in_metres,
        read_intrinsics,
        read_mask,
        read_raw_depth,
        stems,
    )
    from heads.io.images import decode
    root = Path(folder)
    problems: list[str] = []
    for sub in (rgb_dir, depth_dir):
        if not (root / sub).is_dir():
            problems.append(f"missing folder: {root / sub} (expected {rgb_dir}/ and {depth_dir}/ in {root})")
    images = stems(root / rgb_dir, RGB_SUFFIXES)
    depths = stems(root / depth_dir, (*DEPTH_SUFFIXES, '.exr'))
    masks = stems(root / mask_dir, ('.png',))
    problems += [f"image without depth: {images[s]} (no {root / depth_dir / s}.png|.npy)"
                 for s in images if s not in depths]
    problems += [f"depth without image: {depths[s]} (no {root / rgb_dir / s}.jpg|.png)"
                 for s in depths if s not in images]
    problems += [f"mask without image: {masks[s]}" for s in masks if s not in images]
    lo, hi, invalid, total, pairs = np.inf, -np.inf, 0, 0, 0
    for stem in (s for s in images if s in depths):
        try:
            image = decode(images[stem], cv2.IMREAD_COLOR, 'image')
        except (OSError, ValueError) as err:
            problems.append(f"unreadable: {images[stem]}: {err}")
            image = None
        try:
            raw = read_raw_depth(depths[stem])
        except (OSError, ValueError) as err:
            problems.append(f"unreadable: {depths[stem]}: {err}")
            continue
        if raw.dtype == np.uint8 and not allow_8bit:
            problems.append(f"8-bit depth: {depths[stem]} is an 8-bit PNG; depth PNGs must be 16-bit (raw / "
                            f"depth_scale = metres; 8 bits hold only 256 levels, usually a visualisation)")
        if image is not None and raw.shape != image.shape[:2]:
            problems.append(f"size mismatch: {depths[stem]} is {raw.shape[0]}x{raw.shape[1]} (h x w) but "
                            f"{images[stem]} is {image.shape[0]}x{image.shape[1]}")
            continue
        depth = depth_in_metres(raw, depth_scale, depth_invalid)
        valid = depth > 0
        if stem in masks:
            try:
                mask = read_mask(masks[stem])
            except (OSError, ValueError) as err:
                problems.append(f"unreadable: {masks[stem]}: {err}")
                continue
            if mask.shape != depth.shape:
                problems.append(f"size mismatch: {masks[stem]} is {mask.shape[0]}x{mask.shape[1]} (h x w) but "
                                f"{depths[stem]} is {depth.shape[0]}x{depth.shape[1]}")
                continue
            valid &= mask
        pairs += 1
        total += valid.size
        invalid += int(valid.size - valid.sum())
        if valid.any():
            lo, hi = min(lo, float(depth[valid].min())), max(hi, float(depth[valid].max()))
    intrinsics = None
    if (root / SHARED_INTRINSICS).is_file():
        try:
            intrinsics = f"shared {root / SHARED_INTRINSICS}: {read_intrinsics(root / SHARED_INTRINSICS)}"
        except (OSError, ValueError) as err:
            problems.append(f"unreadable: {err}")
    elif (root / INTRINSICS_DIR).is_dir():
        intrinsics = f"per image in {root / INTRINSICS_DIR}: {len(list((root / INTRINSICS_DIR).glob('*.txt')))} files"
    summary = dict(images=len(images), depth_maps=len(depths), masks=len(masks), checked_pairs=pairs,
                   depth_range_m=(lo, hi) if lo <= hi else None,
                   invalid_fraction=invalid / total if total else None, intrinsics=intrinsics)
    return summary, problems


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    summary, problems = check(args.folder, args.depth_scale, args.depth_invalid, args.rgb_dir, args.depth_dir,
                              args.mask_dir, args.allow_8bit)
    print(f"{args.folder}: {summary['images']} images, {summary['depth_maps']} depth maps, {summary['masks']} masks; "
          f"{summary['checked_pairs']} pairs read")
    if summary['depth_range_m'] is not None:
        lo, hi = summary['depth_range_m']
        print(f"depth range {lo:.3f} .. {hi:.3f} m (raw / {args.depth_scale:g}); "
              f"invalid fraction {summary['invalid_fraction']:.3f}")
    print(f"intrinsics: {summary['intrinsics'] or 'none'}")
    for line in problems:
        print(f"PROBLEM {line}")
    print(f"{len(problems)} problem(s)" if problems else 'OK: no problem found')
    return 1 if problems else 0


if __name__ == '__main__':
    from lab.cli import run_main
    sys.exit(run_main(main))
