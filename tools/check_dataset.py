"""Check a folder of one's own RGB-D data before training on it, and say what was found.

    python tools/check_dataset.py ../shared/data/depth-7scenes --depth-scale 1000 --depth-invalid 0 65535
    python tools/check_dataset.py my_rgbd/ --depth-scale 1   # .npy depth in float metres

The layout is :class:`heads.datasets.RGBDFolderDataset`'s (Microsoft 7-Scenes'): ``rgb/<stem>.jpg|png``,
``depth/<stem>.png|npy`` with the same stems, optional ``mask/<stem>.png`` (non-zero = valid) and optional
``camera-intrinsics.txt`` or ``intrinsics/<stem>.txt``. The folder is listed by the dataset's own code
(:func:`heads.io.rgbd_folder.list_rgbd_folder`: what it refuses or leaves out is named here) and every file is
read with the dataset's reader. Reported: the counts, the depth range in metres (raw / --depth-scale) and the
invalid fraction; named: a missing or empty folder, each unreadable file (truncated, not an image, OpenEXR,
intrinsics that are not numbers or have non-finite or non-positive focal lengths), each frame stored in two files
(``a.png`` beside ``a.npy``), each image without depth and depth without image, each mask without an image, each
depth map or mask whose size differs from its image, each frame without a single valid depth pixel, and each
8-bit depth PNG (16-bit expected: 8 bits hold 256 levels, usually a visualisation; --allow-8bit accepts them).
Exit status 1 when anything is named, else 0; 2 for a --depth-scale that is not a finite positive number.
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
    parser.add_argument('--list-file', help='check only the frames this file names (one stem per line; relative '
                        'to the folder), as the dataset\'s list_file')
    return parser


def check(folder, depth_scale: float = 1000.0, depth_invalid=(0,), rgb_dir: str = 'rgb', depth_dir: str = 'depth',
          mask_dir: str = 'mask', allow_8bit: bool = False, list_file: str | None = None) -> tuple[dict, list[str]]:
    """(summary, problems) of the RGB-D folder ``folder``: each problem a line naming its file. The folder is listed
    by :func:`heads.io.rgbd_folder.list_rgbd_folder`, as :class:`heads.datasets.RGBDFolderDataset` lists it."""
    import numpy as np

    from heads.io.depth import checked_depth_scale
    from heads.io.rgbd_folder import frame_problems, list_rgbd_folder
    depth_scale = checked_depth_scale(depth_scale)
    root = Path(folder)
    listed = None if list_file is None else Path(list_file) if Path(list_file).is_absolute() else root / list_file
    listing = list_rgbd_folder(root / rgb_dir, root / depth_dir, root / mask_dir, list_file=listed, root=root)
    problems = [str(err) for err in listing.errors] + listing.notes
    lo, hi, invalid, total, pairs = np.inf, -np.inf, 0, 0, 0
    for frame in listing.frames:
        found, depth, valid = frame_problems(frame, depth_scale, depth_invalid, allow_8bit)
        problems += found
        if valid is None:
            continue
        pairs += 1
        total += valid.size
        invalid += int(valid.size - valid.sum())
        if valid.any():
            lo, hi = min(lo, float(depth[valid].min())), max(hi, float(depth[valid].max()))
    summary = dict(**listing.counts, checked_pairs=pairs, depth_range_m=(lo, hi) if lo <= hi else None,
                   invalid_fraction=invalid / total if total else None, intrinsics=listing.intrinsics)
    return summary, problems


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from heads.io.depth import checked_depth_scale
    try:
        checked_depth_scale(args.depth_scale)
    except ValueError as err:
        parser.error(f"--depth-scale: {err}")
    summary, problems = check(args.folder, args.depth_scale, args.depth_invalid, args.rgb_dir, args.depth_dir,
                              args.mask_dir, args.allow_8bit, args.list_file)
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
