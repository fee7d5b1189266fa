r"""Export a backbone with its detection pyramid, or a config's task model, with a dynamic input height and width.

    python tools/export_model.py --backbone vit_base_patch16_224 --pretrained vit_b16.safetensors \
        --size 512 512 --out vitb_pyramid.onnx --check 384 640 --check 768 512
    python tools/export_model.py --config configs/dpt_vitt4_camvid_cpu.py \
        --checkpoint work_dirs/dpt_vitt4_camvid_cpu/iter_400.pth --size 192 256 --out dpt.onnx --check 384 480
    python tools/export_model.py --config configs/dpt_vitt4_camvid_cpu.py --format program --out dpt.pt2

--backbone exports heads.detection.PyramidBackbone (outputs 'stride4', 'stride8', ...: the pyramid maps);
--config exports the config's task model from a normalised image (normalise with the config's data_preprocessor
mean/std first): a DPT or UperNet model to its dense output at the input size ('seg_logits' or 'depth'), a
Mask2Former or EoMT model to 'class_logits' 'b q c+1' and 'mask_logits' 'b q h w' (at its mask stride). The ONNX
file carries the preprocessing, inference strategy, resize and class names (heads.export.metadata), so that
`tools/infer.py MODEL.onnx IMAGES --out DIR` predicts as with the checkpoint (mask models too: their semantic,
instance and panoptic post-processing runs on the file's class and mask logits).
Input height and width must be multiples of what the model needs (printed; 32 for ViT/16). The export is dynamic:
without --size it traces at a size that suits the model (heads.export.sizes.trace_size: its smallest trace side, and
wider down to the coarsest map; for Swin every stage's map wider than its window, e.g. 256x288 for Swin-T), and a --size
it cannot trace at is refused in one line naming one to use. --check compares the export with PyTorch on random inputs
of those sizes (onnxruntime for ONNX, the program's module for --format program), prints the max abs difference and
exits with 1 if one exceeds --tolerance.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lab.cli import json_object, stage
from lab.outputs import refuse_outputs_that_are_inputs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--backbone', metavar='NAME', help='a zoo backbone name: exports it with its pyramid')
    source.add_argument('--config', metavar='CFG',
                        help="a config file: exports its model (DPT, UperNet, Mask2Former, EoMT)")
    parser.add_argument('--backbone-kwargs', default={}, type=json_object, metavar='JSON',
                        help='keyword arguments of PyramidBackbone, e.g. \'{"depth": 2, "out_channels": 64}\'')
    parser.add_argument('--pretrained', metavar='FILE', help='backbone weights (with --backbone)')
    parser.add_argument('--checkpoint', metavar='FILE', help='model weights, .pth or .safetensors (with --config)')
    parser.add_argument('--format', choices=('onnx', 'program'), default='onnx',
                        help='onnx, or program: a torch.export program saved with torch.export.save (.pt2)')
    parser.add_argument('--size', type=int, nargs=2, metavar=('H', 'W'),
                        help='example input size traced (default: the smallest side the model traces at, and wider '
                             'down to the coarsest map; the exported graph takes other sizes)')
    parser.add_argument('--check', type=int, nargs=2, action='append', default=[], metavar=('H', 'W'),
                        help='compare with PyTorch at this input size after exporting (repeatable)')
    parser.add_argument('--tolerance', type=float, default=1e-3, help='largest max abs difference --check accepts')
    parser.add_argument('--opset', type=int, help='ONNX opset (default: the exporter\'s)')
    parser.add_argument('--out', required=True, type=Path, help='the .onnx or .pt2 file to write')
    return parser


def parse_args(argv=None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.backbone and args.checkpoint:
        parser.error('--checkpoint goes with --config; use --pretrained for backbone weights')
    if args.config and (args.pretrained or args.backbone_kwargs):
        parser.error('--pretrained and --backbone-kwargs go with --backbone; a config sets its own backbone')
    refuse_outputs_that_are_inputs(parser.error, {'--out': args.out},
                                   {'--config': args.config, '--checkpoint': args.checkpoint,
                                    '--pretrained': args.pretrained})
    return parser, args


def build_model(args):
    """The PyramidBackbone of --backbone, or the model of --config with --checkpoint loaded; in eval mode."""
    if args.backbone:
        from heads.detection import PyramidBackbone
        return PyramidBackbone(args.backbone, pretrained=args.pretrained, **args.backbone_kwargs).eval()
    from mmengine.config import Config

    from heads.registry import MODELS
    from zoo.weights import load_pretrained
    model = MODELS.build(Config.fromfile(args.config).model)
    if args.checkpoint:
        load_pretrained(model, args.checkpoint, format='zoo')
    return model.eval()


def config_metadata(args) -> dict | None:
    """With --config: its resize, class names and palette, stored in the ONNX file beside the model's own
    preprocessing (heads.export.metadata), so that tools/infer.py runs the file as it runs the checkpoint."""
    if not args.config:
        return None
    from mmengine.config import Config

    from heads.export.metadata import config_metadata as of_config
    return of_config(Config.fromfile(args.config))


def main(argv=None) -> int:
    parser, args = parse_args(argv)
    import torch

    from heads.export import (
        check_size,
        compare_onnx,
        compare_program,
        export_onnx,
        export_program,
        exportable,
        min_side,
        required_multiple,
    )
    from heads.export.sizes import check_trace_size, trace_side, trace_size
    with stage('building the model'):
        model = build_model(args)
    multiple = required_multiple(exportable(model))
    smallest = min_side(model, multiple)
    tracing = trace_side(model, multiple)
    size = tuple(args.size) if args.size else trace_size(model, multiple)
    try:
        check_trace_size(size, multiple, tracing, smallest)
        checks = [check_size(s, multiple, smallest if args.format == 'program' else None) for s in args.check]
    except ValueError as e:
        parser.error(str(e))
    print(f"{type(model).__name__}: input sides multiples of {multiple} (program: from {smallest}; traced from "
          f"{tracing})", flush=True)
    with stage(f'tracing with torch.export at {size[0]}x{size[1]}'):
        program = export_program(model, size, multiple)
    if args.format == 'onnx':
        with stage('converting to ONNX (the dynamo exporter: minutes for a base-size model on a CPU)'):
            out = export_onnx(model, args.out, program=program, opset=args.opset, metadata=config_metadata(args))
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        torch.export.save(program, str(args.out))
        out = args.out
    print(f"wrote {out}", flush=True)
    with stage(f"checking against PyTorch at {', '.join(f'{h}x{w}' for h, w in checks)}" if checks else 'no checks'):
        diffs = (compare_onnx(out, model, checks) if args.format == 'onnx' else
                 compare_program(program, model, checks))
    for (h, w), diff in diffs.items():
        print(f"check {h}x{w}: max abs diff {diff:.3g}" + ('' if diff <= args.tolerance else
                                                            f" > tolerance {args.tolerance:g}"))
    return int(any(diff > args.tolerance for diff in diffs.values()))


if __name__ == '__main__':
    from lab.cli import run_main
    sys.exit(run_main(main))
