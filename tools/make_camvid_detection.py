"""A COCO-format detection set from CamVid's label maps: connected components of Car and Pedestrian as boxes
and masks (CamVid has no instance annotations; touching objects of one class become one instance).

    python tools/make_camvid_detection.py ../shared/data/camvid data/camvid_det

Writes OUT/annotations/instances_{split}.json and links OUT/{split} to the split's image folder (the COCO
layout: ``file_name`` relative to OUT/{split}). Components smaller than ``--min-area`` pixels are dropped.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('root', help='CamVid: images/{split}/*.jpg with annotations/{split}/*.png')
    parser.add_argument('out', help='the COCO-layout folder to write')
    parser.add_argument('--splits', nargs='+', default=['train', 'val'],
                        help='splits to convert (default: %(default)s)')
    parser.add_argument('--classes', nargs='+', default=['Car', 'Pedestrian'],
                        help="CamVid class names whose components become instances (default: %(default)s)")
    parser.add_argument('--min-area', type=int, default=64, help='least pixels of a kept component')
    return parser


def main(argv=None) -> dict[str, dict]:
    args = build_parser().parse_args(argv)
    from heads.datasets import CAMVID_CLASSES
    from heads.datasets.instances_from_labels import labels_to_coco
    unknown = [name for name in args.classes if name not in CAMVID_CLASSES]
    if unknown:
        raise SystemExit(f"unknown CamVid classes {unknown}; choose from {list(CAMVID_CLASSES)}")
    root, out = Path(args.root), Path(args.out)
    (out / 'annotations').mkdir(parents=True, exist_ok=True)
    written = {}
    for split in args.splits:
        images = (root / 'images' / split).resolve()
        coco = labels_to_coco(images, root / 'annotations' / split,
                              {name: CAMVID_CLASSES.index(name) for name in args.classes}, args.min_area)
        link = out / split
        if not link.exists():
            link.symlink_to(images, target_is_directory=True)
        (out / 'annotations' / f'instances_{split}.json').write_text(json.dumps(coco))
        counts = {c['name']: sum(a['category_id'] == c['id'] for a in coco['annotations']) for c in coco['categories']}
        print(f"{split}: {len(coco['images'])} images, instances {counts}")
        written[split] = coco
    return written


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
