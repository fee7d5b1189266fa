"""Cut a segmentation dataset's images into labelled patches: an ImageFolder classification set from real data.

    python tools/make_patch_dataset.py ../shared/data/camvid data/camvid_patches --size 48 --min-share 0.75

For each split (images/{split}/*.jpg with annotations/{split}/*.png, CamVid's layout), the images are cut into
non-overlapping ``--size`` squares; a square whose most frequent class covers at least ``--min-share`` of it
(void/ignored pixels counting against it) is written to ``OUT/{split}/{class name}/{image stem}_{y}_{x}.png``.
Classes are CamVid's unless ``--classes`` names them (label value = position). Prints the count per class.
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
from tqdm import tqdm

from heads.io.images import read_rgb, write_rgb


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('root', help='a folder with images/{split} and annotations/{split}')
    parser.add_argument('out', help='the ImageFolder tree to write: OUT/{split}/{class name}/*.png')
    parser.add_argument('--splits', nargs='+', default=['train', 'val'], help='splits to cut (default: %(default)s)')
    parser.add_argument('--size', type=int, default=48, help='patch side, pixels')
    parser.add_argument('--min-share', type=float, default=0.75, help="the majority class's least share of a patch")
    parser.add_argument('--classes', nargs='+', default=None,
                        help="class names by label value (default: CamVid's eleven, in its order)")
    parser.add_argument('--every', type=int, default=1, help='use every k-th image of each split (sorted by name)')
    return parser


def patch_labels(labels: np.ndarray, size: int, num_classes: int, min_share: float):
    """(y, x, class) of each ``size`` square of 'h w' ``labels`` whose majority class has ``min_share``."""
    for y in range(0, labels.shape[0] - size + 1, size):
        for x in range(0, labels.shape[1] - size + 1, size):
            counts = np.bincount(labels[y:y + size, x:x + size].ravel(), minlength=256)[:num_classes]
            if counts.max() >= min_share * size * size:
                yield y, x, int(counts.argmax())


def main(argv=None) -> dict[str, Counter]:
    args = build_parser().parse_args(argv)
    if args.classes is None:
        from heads.datasets import CAMVID_CLASSES
        args.classes = list(CAMVID_CLASSES)
    root, out = Path(args.root), Path(args.out)
    totals = {}
    for split in args.splits:
        images = sorted((root / 'images' / split).glob('*.jpg'))[::args.every]
        if not images:
            raise FileNotFoundError(f"no images in {root / 'images' / split}; expected images/{split}/*.jpg with "
                                    f"annotations/{split}/*.png")
        counts = Counter()
        for path in tqdm(images, desc=split, unit='image'):
            image = read_rgb(path)
            labels = cv2.imread(str(root / 'annotations' / split / f'{path.stem}.png'), cv2.IMREAD_UNCHANGED)
            if labels is None or labels.shape != image.shape[:2]:
                raise ValueError(f"label map of {path} is missing or of another size")
            for y, x, label in patch_labels(labels, args.size, len(args.classes), args.min_share):
                write_rgb(out / split / args.classes[label] / f'{path.stem}_{y}_{x}.png',
                          image[y:y + args.size, x:x + args.size])
                counts[args.classes[label]] += 1
        totals[split] = counts
        print(f"{split}: {sum(counts.values())} patches, {dict(sorted(counts.items()))}")
    return totals


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
