r"""Predict images with a trained model and draw the results.

    python tools/infer.py configs/dpt_vitt4_camvid_cpu.py work_dirs/dpt_vitt4_camvid_cpu/iter_400.pth \
        ../shared/data/camvid/images/val --out results/camvid_val
    python tools/infer.py CONFIG model.safetensors street.jpg kitchen/ --out out --device cuda

For each image (files, or the images in folders, in natural order: frame_2 before frame_10), writes to --out,
at the image's path relative to the folder common to all the inputs (a/001.png and b/001.png give a/001* and
b/001*), ``<stem>`` its name without suffix (heads.io.predictions):
- ``<stem>.png``: segmentation: the image with the predicted classes blended in (``--alpha``) and a legend of
  the classes present (panoptic: each segment, any number of instances of a class, in shades of its class colour,
  borders dark); depth: the image, the depth map in colour (near = bright) and a colour bar in metres;
- the raw prediction at the image's size: ``<stem>_pred.png``, class ids (8-bit; 255 = none); a panoptic map as
  COCO's panoptic format stores it: ``<stem>_pred.png`` of RGB segment ids (id = R + 256 G + 256^2 B, 0 = none;
  id = label + instance * 1000 + 1) with ``<stem>_pred.json`` (segments_info: id, category_id = the class index,
  iscrowd, area, bbox; categories), and all of them in ``<out>/panoptic.json`` (COCO's predictions file); depth, as
  ``--depth-format`` asks (default both): ``<stem>_pred.npy``, float32 as predicted (metres, or a relative head's
  inverse depth), and ``<stem>_pred.png``, 16-bit: metric depth in millimetres (0 = none; up to 65.534 m: a deeper
  pixel is written as 0, with a warning naming the file and the count) or a relative head's inverse depth scaled to
  0..65535.
No output overwrites an input or another output: such a run is refused before anything is predicted (give --out a
folder of its own). Predictions come from heads.Predictor (the config's model, resized as its test pipeline does).

An exported ONNX file (tools/export_model.py --config ...) runs in place of config and checkpoint, through
onnxruntime on the CPU, with the same resize, normalisation, padding, inference strategy, class names and pictures
(all read from the file's metadata, heads.export.metadata; a file without it is refused):

    python tools/infer.py dpt_camvid.onnx ../shared/data/camvid/images/val --out results/camvid_val_onnx

Point clouds and video (depth models; see docs/depth.md, "Point clouds and video"):

    python tools/infer.py configs/dpt_vitt4_7scenes_cpu.py CHECKPOINT ../shared/data/depth-7scenes/rgb --out out \
        --intrinsics ../shared/data/depth-7scenes/camera-intrinsics.txt --ply --sequence --smooth 0.5

- ``--ply`` with ``--intrinsics FILE`` (a 3x3 matrix or 'fx fy cx cy', as 7-Scenes' camera-intrinsics.txt) or
  ``--intrinsics FX FY CX CY``: also ``<stem>.ply``, the valid pixels back-projected to metres in the camera frame
  (x right, y down, z forward) with the image's colours (heads.io.pointcloud). The intrinsics are those of the images
  as stored. Metric models only: a relative model's disparity is known up to scale *and shift*, so its
  back-projection would be distorted, not merely scaled, and is refused.
- ``--sequence``: the inputs are the ordered frames of one video; prints the temporal-consistency figure, the mean
  relative change of depth between consecutive frames on photometrically stable pixels (grey change below
  ``--static-threshold``; heads.evaluation.temporal), and writes it to ``<out>/temporal.json``. A relative model's
  disparity counts as depth 1 / disparity (up to scale). Where the figure is not defined (one frame: no pair; or no
  pair with a static pixel) the JSON holds null and a ``..._note`` saying why.
  A video model's config (Video Depth Anything: ``VideoDepthEstimator``) predicts the sequence together, in
  overlapping windows of clips aligned to each other (heads.Predictor.video; the frames must have one size), and
  needs ``--sequence``.
- ``--smooth ALPHA`` (with ``--sequence``): each frame's prediction aligned (scale and shift in disparity for a
  relative model, median scaling for a metric one) to an exponential moving average of the predictions (ALPHA in
  (0, 1]: the weight of the new frame; 1 = no smoothing); the pictures, raw predictions and PLY files are the
  smoothed ones, and the figure is printed for both.

With ``--tile H W`` the image is predicted at its own size, any size, in overlapping H x W tiles blended smoothly
(relative depth: each tile aligned to its neighbours by scale and shift), so the model needs one tile's memory:

    python tools/infer.py CONFIG CHECKPOINT big_photo.jpg --out out --tile 518 518 --overlap 64

The number of tiles is printed before predicting; an image needing more than ``--max-tiles`` (default 4096) is
refused before anything is predicted (a larger --tile or a smaller --overlap needs fewer).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np

from heads.io.images import images_in, read_rgb, write_rgb
from heads.io.labels import IGNORE_INDEX, INSTANCE_OFFSET
from heads.io.palettes import default_palette
from heads.io.predictions import DEPTH_FORMATS, output_bases, write_depth, write_labels, write_panoptic
from heads.visualization.draw import (
    colorize_depth,
    colorize_labels,
    colorize_panoptic,
    colour_bar,
    legend,
    overlay,
)

#: Tiles per image above which --tile is refused unless --max-tiles allows more (each tile is one forward pass).
MAX_TILES = 4096


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='the config the checkpoint was trained with, or an exported .onnx file '
                                       '(tools/export_model.py --config; then no checkpoint follows)')
    parser.add_argument('checkpoint', help='a training checkpoint (.pth) or weights (.safetensors); after an .onnx '
                                           'file, the first input')
    parser.add_argument('inputs', nargs='*', help='images or folders of images')
    parser.add_argument('--out', required=True, help='folder for the pictures and raw predictions')
    parser.add_argument('--device', default='cpu', help="'cpu' (default), 'cuda' or 'cuda:N' (ONNX files: cpu)")
    parser.add_argument('--threads', type=int, default=None, help="ONNX files: onnxruntime's intra-op threads")
    parser.add_argument('--alpha', type=float, default=0.5, help='weight of the class colours over the image')
    add_cloud_and_video_options(parser)
    parser.add_argument('--tile', type=int, nargs=2, metavar=('H', 'W'), default=None,
                        help="predict at the image's own size in overlapping H x W tiles (multiples of the model's "
                             "input multiple, e.g. 518 518 for Depth Anything); no resize")
    parser.add_argument('--overlap', type=int, default=64, help='with --tile: pixels shared by neighbouring tiles')
    parser.add_argument('--max-tiles', type=int, default=MAX_TILES,
                        help=f'with --tile: refuse an image needing more tiles than this (default {MAX_TILES})')
    parser.add_argument('--depth-format', nargs='+', choices=DEPTH_FORMATS, default=list(DEPTH_FORMATS),
                        help='depth models: the raw files, <stem>_pred.npy (float32, as predicted) and/or '
                             '<stem>_pred.png (16-bit millimetres, up to 65.534 m); default both')
    return parser


def add_cloud_and_video_options(parser: argparse.ArgumentParser) -> None:
    """``--intrinsics``, ``--ply``, ``--sequence``, ``--smooth``, ``--static-threshold`` (module docstring)."""
    group = parser.add_argument_group('point clouds and video (depth models)')
    group.add_argument('--intrinsics', nargs='+', metavar='FILE | FX FY CX CY',
                       help="camera intrinsics of the images as stored: a file (3x3 or 'fx fy cx cy') or 4 numbers")
    group.add_argument('--ply', action='store_true', help='also write <stem>.ply (metric models; needs --intrinsics)')
    group.add_argument('--sequence', action='store_true',
                       help='the inputs are ordered video frames: print the temporal-consistency figure')
    group.add_argument('--smooth', type=float, metavar='ALPHA',
                       help='with --sequence: alignment smoothed over time, ALPHA in (0, 1] (1 = none)')
    group.add_argument('--static-threshold', type=float, default=10.0,
                       help='grey-level change (of 255) below which a pixel is static for the figure (default 10)')


def intrinsics_of(values) -> np.ndarray:
    """The 3x3 camera matrix of ``--intrinsics``: one file (heads.io.depth.read_intrinsics) or 'fx fy cx cy'."""
    from heads.io.depth import camera_matrix, read_intrinsics
    from heads.io.pointcloud import check_intrinsics
    if len(values) == 1:
        if not Path(values[0]).is_file():
            raise FileNotFoundError(f"--intrinsics file {values[0]} does not exist")
        return check_intrinsics(read_intrinsics(values[0]), f'intrinsics file {values[0]}')
    try:
        fx, fy, cx, cy = map(float, values)
    except ValueError as err:
        raise ValueError(f"--intrinsics takes one file or the four numbers fx fy cx cy, got {values}") from err
    return check_intrinsics(camera_matrix([fx, fy, cx, cy]), f'--intrinsics {" ".join(values)}')


class CloudAndVideo:
    """What ``--ply``, ``--sequence`` and ``--smooth`` add per frame: ``prediction = extras(path, image,
    prediction)`` (smoothed when asked; writes the PLY), then ``extras.finish()`` (prints and writes the figure)."""

    def __init__(self, args, relative: bool, out: Path):
        if args.smooth is not None and not args.sequence:
            raise ValueError('--smooth ALPHA smooths over the frames of a sequence: give --sequence too')
        if args.ply and not args.intrinsics:
            raise ValueError('--ply needs the camera: give --intrinsics FILE or --intrinsics FX FY CX CY')
        if args.ply and relative:
            raise ValueError("--ply needs metric depth: this config's model is relative (disparity up to scale and "
                             "shift), whose back-projection would be distorted, not just scaled; use a metric model")
        from heads.evaluation.temporal import SmoothedAlignment, TemporalConsistency
        self.args, self.relative, self.out = args, relative, out
        self.intrinsics = intrinsics_of(args.intrinsics) if args.intrinsics else None
        self.active = args.ply or args.sequence
        self.raw = TemporalConsistency(args.static_threshold) if args.sequence else None
        self.smoothed = TemporalConsistency(args.static_threshold) if args.smooth is not None else None
        self.smoother = (SmoothedAlignment(args.smooth, 'scale_shift_disparity' if relative else 'median')
                         if args.smooth is not None else None)

    def __call__(self, path: Path, image: np.ndarray, prediction: np.ndarray, base: Path | None = None) -> np.ndarray:
        """``base``: where the outputs of ``path`` go, without suffix (default ``<out>/<stem>``)."""
        if not self.active:
            return prediction
        if prediction.dtype.kind in 'iu':
            raise ValueError('--ply and --sequence are for depth models; this config predicts classes')
        from heads.evaluation.temporal import depth_of
        if self.raw is not None:
            self.raw.update(depth_of(prediction, self.relative), image)
        if self.smoother is not None:
            prediction = self.smoother(prediction).astype(np.float32)
            self.smoothed.update(depth_of(prediction, self.relative), image)
        if self.args.ply:
            from heads.io.pointcloud import back_project, write_ply
            points, colours = back_project(prediction, self.intrinsics, image, image_size=image.shape[1::-1])
            write_ply(Path(f'{base if base is not None else self.out / path.stem}.ply'), points, colours)
        return prediction

    def finish(self) -> dict:
        """Print the figures and write them to <out>/temporal.json; returns them ({} without --sequence)."""
        if self.raw is None:
            return {}
        import json
        figures = {'frames': self.raw.frames, 'static_threshold': self.args.static_threshold}
        figures.update(figure('temporal_consistency_percent', self.raw))
        print(f"temporal consistency over {figures['frames']} frames (mean relative depth change between "
              f"consecutive frames, grey change < {self.args.static_threshold:g}): {said(self.raw)}")
        if self.smoothed is not None:
            figures.update(smooth_alpha=self.args.smooth,
                           **figure('smoothed_temporal_consistency_percent', self.smoothed))
            print(f"smoothed (alpha = {self.args.smooth:g}): {said(self.smoothed)}")
        (self.out / 'temporal.json').write_text(json.dumps(figures, indent=1, allow_nan=False) + '\n')
        return figures


def figure(key: str, meter) -> dict:
    """``{key: value}`` of a TemporalConsistency, or ``{key: None, key_note: why}`` where it is not defined (JSON
    has no NaN)."""
    reason = meter.undefined_because
    return {key: meter.value} if reason is None else {key: None, f'{key}_note': reason}


def said(meter) -> str:
    reason = meter.undefined_because
    return f'{meter.value:.2f} %' if reason is None else f'not defined ({reason})'


def natural_key(path: Path) -> list:
    """Sort key putting numbers in numeric order: frame_2 before frame_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r'(\d+)', str(path))]


def list_images(inputs) -> list[Path]:
    """The files named, and the images inside the folders named (each folder's in natural order: frame_2 before
    frame_10), each once; an error names what is missing."""
    images, seen = [], set()
    for item in map(Path, inputs):
        if item.is_dir():
            found = sorted(images_in(item), key=lambda p: natural_key(p.relative_to(item)))
        elif item.is_file():
            found = [item]
        else:
            raise FileNotFoundError(f"input {item} does not exist")
        for path in found:
            if path.resolve() not in seen:
                seen.add(path.resolve())
                images.append(path)
    return images


def image_size(path: Path) -> tuple[int, int]:
    """(height, width) of an image as read (EXIF rotation applied), from its header when PIL reads it."""
    try:
        from PIL import Image
        with Image.open(path) as image:
            width, height = image.size
            rotated = image.getexif().get(0x0112) in (5, 6, 7, 8)
        return (width, height) if rotated else (height, width)
    except (ImportError, OSError, ValueError):  # no PIL, or a format it does not read: decode it
        return read_rgb(path).shape[:2]


def check_tiles(images, tile, overlap: int, max_tiles: int) -> int:
    """The tiles ``--tile`` takes over all the images, printed; SystemExit naming the image and the options when
    one needs more than ``max_tiles``. ``tile`` and ``overlap`` as checked when the model was built
    (:func:`build_predictor`)."""
    from heads.models.tiling import tile_starts
    if not images:
        return 0
    total, most = 0, (0, None, None)
    for path in images:
        h, w = image_size(path)
        count = len(tile_starts(h, tile[0], overlap)) * len(tile_starts(w, tile[1], overlap))
        total += count
        most = max(most, (count, str(path), (h, w)), key=lambda m: m[0])
    count, path, (h, w) = most
    print(f"--tile {tile[0]} {tile[1]} --overlap {overlap}: {total} tiles for {len(images)} image(s) (the most: "
          f"{count} for {path}, {h}x{w})")
    if count > max_tiles:
        raise SystemExit(f"error: --tile {tile[0]} {tile[1]} --overlap {overlap} needs {count} tiles (forward passes) "
                         f"for {path} ({h}x{w}), more than --max-tiles {max_tiles}: use larger tiles (--tile) or a "
                         f"smaller --overlap, or raise --max-tiles to run it anyway")
    return total


def class_meta(cfg) -> tuple[list[str], list]:
    """Class names and palette of the config's test dataset (built lazily: no file is read); what an ONNX export
    stores (heads.export.metadata)."""
    from heads.export.metadata import config_classes
    return config_classes(cfg)


def predict_scale(cfg):
    """The config's ``predict_scale``, or the scale of its test pipeline's Resize (as evaluation sees images)."""
    from heads.export.metadata import config_predict_scale
    return config_predict_scale(cfg)


def parse_args(argv=None) -> argparse.Namespace:
    """The arguments; with an .onnx file first, ``model`` is that file and every other positional is an input."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.model = None
    if args.config.lower().endswith('.onnx'):
        args.model, args.inputs = args.config, [args.checkpoint, *args.inputs]
    elif not args.inputs:
        parser.error('give images or folders of images after the config and the checkpoint')
    if Path(args.out).exists() and not Path(args.out).is_dir():
        parser.error(f"--out {args.out} is a file, not a folder: give a folder for the outputs (made if missing)")
    return args


def panoptic_of(model):
    """(num_classes, stuff classes) when ``model`` (a mask-classification model, or an ONNX file's) predicts
    panoptic maps only (what Predictor then returns), else None."""
    mode = getattr(model, 'inference_mode', None)
    if mode is None or mode.family != 'mask' or 'panoptic' not in mode.tasks or 'semantic' in mode.tasks:
        return None
    return int(model.num_classes), mode.stuff_classes


def build_predictor(args):
    """(predictor, class names, palette, relative) for a config + checkpoint or for an ONNX file. ``--tile`` and
    ``--overlap`` are checked where every inference mode is, when the model is built
    (:class:`heads.models.inference_mode.InferenceMode`); a refusal names the options."""
    from heads.models.inference_mode import InferenceModeError
    try:
        return predictor_of(args)
    except InferenceModeError as err:
        if args.tile is None:
            raise
        raise InferenceModeError(f"--tile {args.tile[0]} {args.tile[1]} --overlap {args.overlap} (test_cfg "
                                 f"mode='tile', crop_size, overlap) is refused: {err}", err.key) from None


def predictor_of(args):
    if args.model:
        from heads.export import OnnxPredictor
        predictor = OnnxPredictor(args.model, device=args.device, tile=args.tile, overlap=args.overlap,
                                  threads=args.threads)
        model = predictor.model
        palette = model.palette or default_palette(max(len(model.classes), 256))
        return predictor, model.classes, palette, model.relative
    from mmengine.config import Config

    from heads import Predictor
    cfg = Config.fromfile(args.config)
    cfg.predict_scale = predict_scale(cfg)
    predictor = Predictor(cfg, args.checkpoint, device=args.device, tile=args.tile, overlap=args.overlap)
    classes, palette = class_meta(cfg)
    return predictor, classes, palette, getattr(predictor.model, 'relative', False)


def draw_segmentation(image, labels, classes, palette, alpha) -> np.ndarray:
    """The image with the class colours blended in, and a legend of the classes present."""
    blended = overlay(image, colorize_labels(labels, palette), alpha, mask=labels != IGNORE_INDEX)
    present = [int(c) for c in np.unique(labels) if c != IGNORE_INDEX]
    names = [classes[c] if c < len(classes) else f'class {c}' for c in present]
    return np.concatenate([blended, legend(names, [swatch(palette, c) for c in present], image.shape[0])], axis=1)


def swatch(palette, label: int) -> list[int]:
    """The palette colour of a class; black (as drawn) for a class beyond the palette."""
    return list(palette[label]) if 0 <= label < len(palette) else [0, 0, 0]


def draw_panoptic(image, panoptic, classes, palette, num_classes: int, alpha) -> np.ndarray:
    """The image with each segment blended in (instances of a class in shades of its colour, any number of them),
    and a legend of the classes present."""
    blended = overlay(image, colorize_panoptic(panoptic, palette, num_classes), alpha,
                      mask=(panoptic != num_classes) & (panoptic >= 0))
    present = sorted({int(v % INSTANCE_OFFSET) for v in np.unique(panoptic) if v >= 0 and v != num_classes})
    names = [classes[c] if c < len(classes) else f'class {c}' for c in present]
    return np.concatenate([blended, legend(names, [swatch(palette, c) for c in present], image.shape[0])], axis=1)


def draw_depth(image, depth, unit: str = 'm') -> np.ndarray:
    """The image, the depth map in colour (near = bright) and a colour bar over its valid range."""
    valid = depth[np.isfinite(depth) & (depth > 0)]
    vmin, vmax = (float(valid.min()), float(valid.max())) if valid.size else (0.0, 1.0)
    return np.concatenate([image, colorize_depth(depth, vmin, vmax), colour_bar(vmin, vmax, depth.shape[0], unit)],
                          axis=1)


def main(argv=None) -> list[Path]:
    args = parse_args(argv)
    from tqdm import tqdm
    out = Path(args.out)
    predictor, classes, palette, relative = build_predictor(args)
    panoptic = panoptic_of(predictor.model)
    video_model = hasattr(predictor.model, 'predict_sequence')
    if video_model and not args.sequence:
        raise SystemExit(f"error: {args.config}'s model ({type(predictor.model).__name__}) predicts clips of "
                         f"consecutive frames: give the frames of one video in order with --sequence")
    images = list_images(args.inputs)
    try:
        bases = output_bases(images, out)  # refused before anything is predicted when an output would overwrite
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    if args.tile is not None:
        check_tiles(images, args.tile, args.overlap, args.max_tiles)
    out.mkdir(parents=True, exist_ok=True)
    extras = CloudAndVideo(args, relative, out)
    video = iter(predictor.video(images)) if video_model else None  # the whole sequence at once, in windows
    written, annotations = [], []
    for path in tqdm(images, desc='infer', unit='image'):
        base = bases[path]
        image = read_rgb(path)
        prediction = next(video) if video is not None else predictor(image)
        prediction = extras(path, image, prediction, base)  # --sequence / --smooth / --ply
        if panoptic is not None:  # label + instance * INSTANCE_OFFSET, num_classes = none
            num_classes, stuff = panoptic
            picture = draw_panoptic(image, prediction, classes, palette, num_classes, args.alpha)
            annotation = write_panoptic(base, prediction, num_classes, classes, stuff)
            annotations.append({**annotation, 'file_name': str(Path(f'{base}_pred.png').relative_to(out)),
                                'image_id': str(base.relative_to(out))})  # a/001 and b/001 apart
        elif prediction.dtype.kind in 'iu':  # class ids
            picture = draw_segmentation(image, prediction, classes, palette, args.alpha)
            write_labels(base, prediction)
        elif relative:  # inverse depth up to scale and shift: drawn as its inverse, a depth up to scale
            picture = draw_depth(image, np.where(prediction > 0, 1 / np.maximum(prediction, 1e-12), 0), unit='rel.')
            write_depth(base, prediction, relative=True, formats=args.depth_format)
        else:  # depth in metres
            picture = draw_depth(image, prediction)
            write_depth(base, prediction, relative=False, formats=args.depth_format)
        written.append(write_rgb(f'{base}.png', picture))
    if annotations:  # COCO's panoptic predictions file: the categories once, file names relative to --out
        import json
        categories = annotations[0]['categories']
        (out / 'panoptic.json').write_text(json.dumps(
            {'annotations': [{k: v for k, v in a.items() if k != 'categories'} for a in annotations],
             'categories': categories}, indent=1) + '\n')
    extras.finish()
    return written


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
