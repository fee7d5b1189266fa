"""What a config's data pipeline feeds the model, drawn: to check a config (augmentation, labels, depth) by eye.

    python tools/browse_dataset.py configs/dpt_vitt4_camvid_cpu.py --data-root ../shared/data/camvid
    python tools/browse_dataset.py configs/dpt_vitb_7scenes.py --split val --num 6 --out browse.png

Each row is one sample as the pipeline packs it (after resizing, cropping, flipping, colour distortion):
the image | the label map blended over it (ignored pixels left as the image) | the label map in colour (or the
depth map, near = bright, invalid black) — the same arrays the preprocessor receives.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from tqdm import tqdm

from heads.io.images import write_rgb
from heads.io.palettes import default_palette
from heads.visualization.draw import caption, colorize_depth, colorize_labels, overlay, side_by_side
from lab.outputs import refuse_outputs_that_are_inputs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='the config whose dataloader to draw')
    parser.add_argument('--split', choices=['train', 'val', 'test'], default='train',
                        help="which dataloader's dataset and pipeline (default: train, with its augmentation)")
    parser.add_argument('--num', type=int, default=4, help='how many samples')
    parser.add_argument('--start', type=int, default=0, help='index of the first sample')
    parser.add_argument('--data-root', help="override the dataset's data_root")
    parser.add_argument('--out', default='browse.png', help='the PNG to write (default: %(default)s)')
    return parser


def sample_panels(packed: dict, palette, name: str) -> list[np.ndarray]:
    """[image, labels over image, labels] or [image, depth] of one packed sample."""
    image = np.ascontiguousarray(packed['inputs'].numpy().transpose(1, 2, 0))  # c h w -> h w c
    sample = packed['data_samples']
    panels = [caption(image, name)]
    if 'gt_sem_seg' in sample:
        labels = sample.gt_sem_seg.data[0].numpy()
        colours = colorize_labels(labels, palette)
        panels += [caption(overlay(image, colours, 0.5, mask=labels != 255), 'labels over image'),
                   caption(colours, 'labels (black: ignored)')]
    if 'gt_depth' in sample:
        panels.append(caption(colorize_depth(sample.gt_depth.data[0].numpy()), 'depth (black: invalid)'))
    return panels


def main(argv=None) -> np.ndarray:
    parser = build_parser()
    args = parser.parse_args(argv)
    refuse_outputs_that_are_inputs(parser.error, {'--out': args.out},
                                   {'CONFIG': args.config})
    from heads.engine.launch import load_config
    from heads.registry import DATASETS
    cfg = load_config(args.config, data_root=args.data_root)
    dataset = DATASETS.build(cfg[f'{args.split}_dataloader'].dataset)
    classes = dataset.metainfo.get('classes') or ()
    palette = dataset.metainfo.get('palette') or default_palette(max(len(classes), 256))
    indices = range(args.start, min(args.start + args.num, len(dataset)))
    rows = []
    for index in tqdm(indices, desc='browse', unit='sample'):
        packed = dataset[index]
        name = Path(str(packed['data_samples'].metainfo.get('img_path', index))).name
        rows.append(sample_panels(packed, palette, f'{index}: {name}'))
    picture = side_by_side(rows)
    write_rgb(args.out, picture)
    print(f"{len(rows)} samples of {args.split} -> {args.out}")
    return picture


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
