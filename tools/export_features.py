r"""Export a backbone's multi-scale feature maps of a set of images to safetensors shards, for other frameworks.

    python tools/export_features.py --backbone vit_base_patch16_224 --pretrained vit_b16.safetensors \
        --coco data/coco/annotations/instances_val2017.json --images data/coco/val2017 --out feats/coco_val
    python tools/export_features.py --backbone cvt_13_224 --pyramid --folder ../shared/data/camvid/images/val \
        --out feats/camvid_val --short-side 384 --dtype float16

Writes OUT/shard_00000.safetensors, ... (--images-per-shard images each, tensor "{image_id}/{level}" 'c h w')
and OUT/index.json (backbone, weights hash, settings, levels with name/stride/channels, and per image its id,
file name, original and input size, shard). Read them with ``heads.features.FeatureStore(OUT)[image_id]``.
Image ids: COCO's ids with --coco; the path relative to the folder with --folder.

Size rule: each image is resized (bilinear) so its short side is --short-side (default: the short side of the
backbone's pretrained input size), keeping the aspect ratio, then each side is rounded to the nearest multiple
of the coarsest stride; normalised with the backbone's mean/std. Maps are of the backbone (out0, out1, ...) or,
with --pyramid, of heads.detection.PyramidBackbone (p2 ... p6).

Resumable: rerunning the same command skips the shards already finished (the model does not run on their
images) and computes the rest; a shard is held in memory until it is written, so lower --images-per-shard for
large inputs. Other settings or weights than the folder's export are refused: use another --out or --overwrite.
"""
from __future__ import annotations

import argparse
import sys

from lab.cli import json_object, positive

#: Stored dtypes (heads.features.writer.DTYPES), listed here so that --help needs no torch.
DTYPE_NAMES = ('float32', 'float16', 'bfloat16')
SEED = 0  # layers without pretrained weights (all without --pretrained, a pyramid's) are initialised from it


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--backbone', required=True, help='a zoo backbone name, e.g. vit_base_patch16_224')
    parser.add_argument('--backbone-kwargs', default='{}', type=json_object,
                        help='JSON object of keyword arguments of zoo.create_backbone, e.g. \'{"depth": 2}\'')
    parser.add_argument('--pretrained', help='backbone weights (.safetensors/.pth, zoo or timm layout); with '
                                             '--pyramid also a PyramidBackbone state dict (body./pyramid. keys)')
    parser.add_argument('--pyramid', action='store_true', help="export heads.detection.PyramidBackbone's maps")
    parser.add_argument('--pyramid-channels', type=int, default=256, help='channels of the pyramid levels')
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--coco', metavar='ANN_FILE', help='a COCO JSON; its images are read from --images')
    source.add_argument('--folder', metavar='DIR', help='a folder of images (searched recursively)')
    parser.add_argument('--images', metavar='DIR', help="the folder the COCO file's file_name entries are in")
    parser.add_argument('--out', required=True, help='output folder')
    parser.add_argument('--images-per-shard', type=positive, default=64,
                        help='images per safetensors shard (default 64; a shard is held in memory until written)')
    parser.add_argument('--short-side', type=positive, help="input short side before rounding to the coarsest "
                                                            "stride (default: the backbone's input size)")
    parser.add_argument('--dtype', choices=DTYPE_NAMES, default='float32', help='dtype of the stored maps')
    parser.add_argument('--limit', type=positive, help='export only the first N images (COCO: by id)')
    parser.add_argument('--overwrite', action='store_true', help="delete an earlier export in --out first")
    parser.add_argument('--device', default='cpu', help="'cpu' (default), 'cuda' or 'cuda:N'")
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.coco and not args.images:
        parser.error('--coco needs --images, the folder its file_name entries are relative to')
    if args.folder and args.images:
        parser.error('--images goes with --coco; with --folder the images are those in the folder')
    return args


def build_model(args):
    """The backbone (or PyramidBackbone) with its weights; layers without weights are initialised from SEED."""
    import torch

    import zoo
    from heads.detection import PyramidBackbone
    from zoo.weights import read_state_dict
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in args.backbone_kwargs.items()}
    torch.manual_seed(SEED)
    if not args.pyramid:
        return zoo.create_backbone(args.backbone, pretrained=args.pretrained, **kwargs)
    state = read_state_dict(args.pretrained) if args.pretrained else None
    whole = state is not None and any(k.startswith('pyramid.') for k in state)
    model = PyramidBackbone(args.backbone, pretrained=None if whole else state,
                            out_channels=args.pyramid_channels, **kwargs)
    if whole:
        model.load_state_dict(state)
    else:
        print(f"note: the pyramid's layers have no trained weights (initialised from seed {SEED}); pass a "
              f"PyramidBackbone state dict as --pretrained to export trained ones", file=sys.stderr)
    return model


def main(argv=None):
    args = parse_args(argv)
    from heads.features import coco_images, export_features, folder_images, level_names
    images = coco_images(args.coco, args.images) if args.coco else folder_images(args.folder)
    images = images[:args.limit] if args.limit else images
    if args.pretrained is None:
        print(f"note: no --pretrained: the backbone has random weights (seed {SEED})", file=sys.stderr)
    model = build_model(args)
    settings = dict(backbone=args.backbone, backbone_kwargs=args.backbone_kwargs, pyramid=args.pyramid)
    if args.pyramid:
        settings['pyramid_channels'] = args.pyramid_channels
    summary = export_features(model, images, args.out, short_side=args.short_side, model_settings=settings,
                              names=level_names(model.out_strides, pyramid=args.pyramid), dtype=args.dtype,
                              images_per_shard=args.images_per_shard, overwrite=args.overwrite,
                              device=args.device, pretrained=args.pretrained)
    print(summary)
    return summary


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)  # a folder holding another export (ExportSettingsError): one line saying what to do
