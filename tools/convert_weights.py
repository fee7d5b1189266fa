r"""Convert checkpoints from other layouts into this project's own (safetensors + a matching config).

    python tools/convert_weights.py hf-dpt HF_FOLDER OUT_DIR    # transformers DPT -> model.safetensors, config.py
    python tools/convert_weights.py timm vit_base_patch16_224 IN OUT.safetensors   # timm ViT/DeiT -> our keys
    python tools/convert_weights.py eomt-deltas DELTAS.bin DINOV3.safetensors OUT.safetensors  # EoMT-DINOv3 release

The HF output loads with ``heads.Predictor(OUT_DIR/config.py, OUT_DIR/model.safetensors)``; the timm output
with ``zoo.create_backbone(name, pretrained=OUT)``. The EoMT authors' DINOv3 releases store deltas to DINOv3's
pretrained weights: ``eomt-deltas`` adds them as the authors' code does
(:func:`heads.layouts.eomt_authors.eomt_from_deltas`; DINOV3: the ``model.safetensors`` of the DINOv3 model the
release names), writing the authors' full checkpoint, which an EoMT model loads (``load_from``, ``heads.Predictor``;
the ``'EoMT authors'`` layout).

The output never replaces an input: an OUT_DIR that is HF_FOLDER (or would write over one of its files: a link to
it, a hard link) and an OUT that is IN are refused before anything is read or written. Converting a transformers
folder in place used to replace its model.safetensors by this project's layout, which transformers then reads as a
checkpoint missing every weight (re-initialised, with only a warning).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from lab.outputs import files_in, refuse_outputs_that_are_inputs


def save_state(model, path: Path) -> None:
    from safetensors.torch import save_file
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(path))


def convert_hf_dpt(folder: Path, out_dir: Path) -> tuple[Path, Path]:
    from mmengine.config import Config

    import heads
    model = heads.from_pretrained_hf(folder)
    weights, config = out_dir / 'model.safetensors', out_dir / 'config.py'
    save_state(model, weights)
    Config(dict(model=model.hf_model_config)).dump(str(config))
    return weights, config


def convert_timm(name: str, source: Path, out: Path) -> Path:
    import zoo
    model = zoo.create_classifier(name, pretrained=source)
    save_state(model, out)
    return out


def convert_eomt_deltas(deltas: Path, dinov3: Path, out: Path) -> Path:
    from safetensors.torch import save_file

    from heads.layouts.eomt_authors import eomt_from_deltas
    from zoo.weights.io import read_state_dict
    full = eomt_from_deltas(read_state_dict(deltas), read_state_dict(dinov3), name=str(deltas))
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in full.items()}, str(out))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='source_format', required=True, help='the layout of the input')
    hf = sub.add_parser('hf-dpt', help='a transformers DPT save_pretrained folder')
    hf.add_argument('folder', type=Path, help='the folder with config.json and the weights')
    hf.add_argument('out_dir', type=Path, help='gets model.safetensors and config.py')
    tm = sub.add_parser('timm', help='a timm ViT/DeiT checkpoint file')
    tm.add_argument('name', help='registered model name, e.g. deit_small_patch16_224')
    tm.add_argument('source', type=Path, help="timm's checkpoint (.safetensors, .pth or .bin)")
    tm.add_argument('out', type=Path, help='the .safetensors file to write, in this project\'s layout')
    ed = sub.add_parser('eomt-deltas', help="the EoMT authors' DINOv3 delta file, added to DINOv3's weights")
    ed.add_argument('deltas', type=Path, help="the release's pytorch_model.bin (network.* keys, deltas)")
    ed.add_argument('dinov3', type=Path, help="the DINOv3 model's model.safetensors (transformers' layout)")
    ed.add_argument('out', type=Path, help="the .safetensors file to write, in the authors' layout, weights whole")
    return parser


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.source_format == 'hf-dpt':
        written = {f'OUT_DIR/{name}': args.out_dir / name for name in ('model.safetensors', 'config.py')}
        refuse_outputs_that_are_inputs(parser.error, {'OUT_DIR': args.out_dir, **written},
                                       {'HF_FOLDER': args.folder, **files_in(args.folder)})
        weights, config = convert_hf_dpt(args.folder, args.out_dir)
        print(f"wrote {weights} and {config}")
    elif args.source_format == 'eomt-deltas':
        refuse_outputs_that_are_inputs(parser.error, {'OUT': args.out}, {'DELTAS': args.deltas, 'DINOV3': args.dinov3})
        print(f"wrote {convert_eomt_deltas(args.deltas, args.dinov3, args.out)}")
    else:
        refuse_outputs_that_are_inputs(parser.error, {'OUT': args.out}, {'IN': args.source, **files_in(args.source)})
        print(f"wrote {convert_timm(args.name, args.source, args.out)}")


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
