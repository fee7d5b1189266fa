r"""Attention maps of a backbone on an image: per layer and head, for the CLS token or a chosen query patch, plus
attention rollout, overlaid on the image. The weights are the model's own, from the core's explicit attention
path (zoo.attention_maps.record_attention).

    python tools/visualize_attention.py vit_small_patch16_224 street.jpg --checkpoint vit_s.safetensors
    python tools/visualize_attention.py configs/dpt_vitt4_camvid_cpu.py street.png \
        --checkpoint work_dirs/dpt_vitt4_camvid_cpu/iter_400.pth --head all --out attention.png
    python tools/visualize_attention.py cvt_13_224 street.jpg --query 0.7,0.3 --layer -1 -2

Panels: one per self-attention layer (``--layer`` picks them by index, negative from the end), the mean over
heads (``--head 3``: that head; ``--head all``: a row per layer, mean then every head), then the rollout through
the layers of the last token grid (where rollout is defined: keys and queries the same tokens). Query: ``cls`` (the
first prefix token; default when the layer has one) or ``Y,X`` in [0, 1] of the image (default: its centre).
Without --checkpoint the backbone has random weights: the tool says so, in its output and in the picture's title.
"""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import cv2
import numpy as np

from heads.io.images import read_rgb, write_rgb
from heads.visualization.draw import caption, heatmap, overlay, side_by_side
from lab.outputs import refuse_outputs_that_are_inputs

if TYPE_CHECKING:
    from zoo.attention_maps import AttentionMap

RANDOM_WEIGHTS = 'RANDOM weights (no --checkpoint): these maps say nothing about a trained model'


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('source', help='a config file (its model.backbone) or a backbone name '
                                       '(python tools/list_models.py)')
    parser.add_argument('image', help='an image file')
    parser.add_argument('--checkpoint', help='weights: a training checkpoint of the config, or backbone weights')
    parser.add_argument('--layer', type=int, nargs='+', help='self-attention layers to show (default: all)')
    parser.add_argument('--head', default='mean', help="'mean' (default), 'all', or a head index")
    parser.add_argument('--query', default=None, help="'cls', or 'Y,X' in [0, 1] of the image (default: cls if "
                                                      "the layer has a prefix token, else the centre)")
    parser.add_argument('--size', type=int, default=224, help='short side of the input, rounded to a multiple of 32')
    parser.add_argument('--panel', type=int, default=160, help='short side of each drawn panel, pixels')
    parser.add_argument('--columns', type=int, default=6, help='panels per row (one layer per panel)')
    parser.add_argument('--out', default='attention.png', help='the PNG to write (default: %(default)s)')
    return parser


def load_backbone(source: str, checkpoint: str | None):
    """(backbone, mean, std) from a config (model built, checkpoint loaded into it) or a backbone name."""
    import zoo
    from heads.models.preprocessor import IMAGENET_MEAN_255, IMAGENET_STD_255
    if source.endswith('.py'):
        from mmengine.config import Config

        from heads.registry import MODELS
        cfg = Config.fromfile(source)
        model = MODELS.build(cfg.model)
        if checkpoint:
            zoo.load_pretrained(model, checkpoint, format='zoo')
        pre = cfg.model.get('data_preprocessor', {})
        return model.backbone.eval(), pre.get('mean', IMAGENET_MEAN_255), pre.get('std', IMAGENET_STD_255)
    return zoo.create_backbone(source, pretrained=checkpoint).eval(), IMAGENET_MEAN_255, IMAGENET_STD_255


def attention_maps(backbone, image: np.ndarray, mean, std) -> list[AttentionMap]:
    """Every attention call of ``backbone`` on ``image`` ('h w 3' uint8 RGB, already at the input size)."""
    import torch

    from zoo.attention_maps import record_attention
    mean, std = (torch.tensor(v, dtype=torch.float32).view(3, 1, 1) for v in (mean, std))
    x = (torch.from_numpy(image).permute(2, 0, 1).float() - mean) / std  # h w c -> c h w, normalised
    with torch.no_grad(), record_attention(backbone, image.shape[:2]) as maps:
        backbone(x[None])
    return maps


def query_of(attention: AttentionMap, query: str | None) -> tuple[int, str]:
    """(query token index, label) for ``--query``."""
    if query == 'cls' or (query is None and attention.num_prefix):
        if not attention.num_prefix:
            raise ValueError(f"{attention.name} has no CLS token; pass --query Y,X")
        return 0, 'CLS'
    y, x = (0.5, 0.5) if query is None else (float(v) for v in query.split(','))
    return attention.query_index(y, x), f'query ({y:.2f}, {x:.2f})'


def head_rows(maps: list[AttentionMap], layers: list[int], heads_arg: str, query: str | None, columns: int):
    """Rows of (caption, 'h w' weights) panels: with ``--head all`` a row per layer (mean, then each head), else
    one panel per layer, ``columns`` to a row."""
    rows = []
    for layer, attention in zip(layers, maps):
        index, _ = query_of(attention, query)
        weights = attention.from_query(index)[0]  # heads h w
        chosen = [('mean', weights.mean(0))]
        if heads_arg == 'all':
            chosen += [(f'head {h}', w) for h, w in enumerate(weights)]
        elif heads_arg != 'mean':
            if not 0 <= int(heads_arg) < len(weights):
                raise ValueError(f"{attention.name} has {len(weights)} heads: --head must be 'mean', 'all' or "
                                 f"0..{len(weights) - 1} for every layer shown (pick layers with --layer)")
            chosen = [(f'head {int(heads_arg)}', weights[int(heads_arg)])]
        rows.append([(f'L{layer} {name}', w.numpy()) for name, w in chosen])
    if heads_arg == 'all':
        return rows
    flat = [panel for row in rows for panel in row]
    return [flat[i:i + columns] for i in range(0, len(flat), columns)]


def rollout_panel(maps: list[AttentionMap], query: str | None) -> tuple[str, np.ndarray] | None:
    """Rollout through the self-attention layers over the last layer's tokens (for CrossViT: its branch; the
    cross-attention fusion is not part of it), read at the query. None where keys are not the queries (CvT's
    subsampled keys): rollout is undefined there."""
    from zoo.attention_maps import rollout
    final = maps[-1]
    if final.weights.shape[-2] != final.weights.shape[-1]:
        return None
    layers = [m for m in maps if m.weights.shape[-2:] == final.weights.shape[-2:] and m.key_grid == final.key_grid]
    index, _ = query_of(final, query)
    row = rollout(layers)[0, index, final.num_prefix:]
    return f'rollout, {len(layers)} layers', row.reshape(final.key_grid).numpy()


def draw(image: np.ndarray, rows: list[list[tuple[str, np.ndarray]]], panel: int, marker=None) -> np.ndarray:
    """Each (caption, weights) as a heat map over the image, rows of panels; ``marker`` (y, x) in [0, 1]: the query
    patch, circled."""
    h, w = image.shape[:2]
    factor = panel / min(h, w)
    small = cv2.resize(image, (round(w * factor), round(h * factor)), interpolation=cv2.INTER_AREA)

    def picture(weights):
        drawn = overlay(small, heatmap(weights, small.shape[:2]), 0.5)
        if marker is not None:
            centre = (round(marker[1] * drawn.shape[1]), round(marker[0] * drawn.shape[0]))
            cv2.circle(drawn, centre, 6, (255, 255, 255), 2, cv2.LINE_AA)
        return drawn
    return side_by_side([[caption(picture(weights), text) for text, weights in row] for row in rows])


def title(picture: np.ndarray, text: str) -> np.ndarray:
    return caption(picture, text, height=22)


def main(argv=None) -> np.ndarray:
    parser = build_parser()
    args = parser.parse_args(argv)
    refuse_outputs_that_are_inputs(parser.error, {'--out': args.out},
                                   {'SOURCE': args.source, 'IMAGE': args.image, '--checkpoint': args.checkpoint})
    from heads.features import input_size
    if args.checkpoint is None:
        print(f'note: {RANDOM_WEIGHTS}', file=sys.stderr)
    backbone, mean, std = load_backbone(args.source, args.checkpoint)
    original = read_rgb(args.image)
    height, width = input_size(*original.shape[:2], args.size, multiple=32)  # aspect kept, sides multiples of 32
    image = cv2.resize(original, (width, height), interpolation=cv2.INTER_AREA)
    maps = [m for m in attention_maps(backbone, image, mean, std) if m.is_self_attention]
    if not maps:
        raise ValueError(f"{args.source} ran no self-attention layer on this image")
    layers = list(range(len(maps))) if args.layer is None else [i % len(maps) for i in args.layer]
    rows = head_rows([maps[i] for i in layers], layers, args.head, args.query, args.columns)
    extra = rollout_panel(maps, args.query)
    if extra is not None:
        rows.append([extra])
    _, query = query_of(maps[-1], args.query)
    marker = None if query == 'CLS' else tuple(float(v) for v in (args.query or '0.5,0.5').split(','))
    text = f'{args.source}: attention of the {query} (L = self-attention layer in call order, of {len(maps)})'
    picture = title(draw(image, rows, args.panel, marker), text)
    if args.checkpoint is None:
        picture = title(picture, RANDOM_WEIGHTS)
    write_rgb(args.out, picture)
    print(f"{len(layers)} layers{' + rollout' if extra is not None else ''} -> {args.out}")
    return picture


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
