r"""Predict images with a trained model and draw the results.

    python tools/infer.py configs/dpt_vitt4_camvid_cpu.py work_dirs/dpt_vitt4_camvid_cpu/iter_400.pth \
        ../shared/data/camvid/images/val --out results/camvid_val
    python tools/infer.py CONFIG model.safetensors street.jpg kitchen/ --out out --device cuda

For each image (files, or the images in folders), writes to --out:
- ``<stem>.png``: segmentation: the image with the predicted classes blended in (``--alpha``) and a legend of
  the classes present; depth: the image, the depth map in colour (near = bright) and a colour bar in metres;
- ``<stem>_pred.png``: the raw prediction at the image's size: class ids (8-bit; 255 = none), metric depth in
  millimetres (16-bit; 0 = none), or a relative head's inverse depth scaled to 0..65535.
Predictions come from heads.Predictor (the config's model, resized as its test pipeline does).

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
  disparity counts as depth 1 / disparity (up to scale).
- ``--smooth ALPHA`` (with ``--sequence``): each frame's prediction aligned (scale and shift in disparity for a
  relative model, median scaling for a metric one) to an exponential moving average of the predictions (ALPHA in
  (0, 1]: the weight of the new frame; 1 = no smoothing); the pictures, raw predictions and PLY files are the
  smoothed ones, and the figure is printed for both.

With ``--tile H W`` the image is predicted at its own size, any size, in overlapping H x W tiles blended smoothly
(relative depth: each tile aligned to its neighbours by scale and shift), so the model needs one tile's memory:

    python tools/infer.py CONFIG CHECKPOINT big_photo.jpg --out out --tile 518 518 --overlap 64
"""
from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from heads.io.images import images_in, read_rgb, write_rgb
from heads.io.labels import IGNORE_INDEX
from heads.visualization.draw import colorize_depth, colorize_labels, colour_bar, default_palette, legend, overlay


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

    def __call__(self, path: Path, image: np.ndarray, prediction: np.ndarray) -> np.ndarray:
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
            write_ply(self.out / f'{path.stem}.ply', points, colours)
        return prediction

    def finish(self) -> dict:
        """Print the figures and write them to <out>/temporal.json; returns them ({} without --sequence)."""
        if self.raw is None:
            return {}
        import json
        figures = {'frames': len(self.raw.changes) + 1, 'static_threshold': self.args.static_threshold,
                   'temporal_consistency_percent': self.raw.value}
        print(f"temporal consistency over {figures['frames']} frames (mean relative depth change between "
              f"consecutive frames, grey change < {self.args.static_threshold:g}): {self.raw.value:.2f} %")
        if self.smoothed is not None:
            figures.update(smooth_alpha=self.args.smooth, smoothed_temporal_consistency_percent=self.smoothed.value)
            print(f"smoothed (alpha = {self.args.smooth:g}): {self.smoothed.value:.2f} %")
        (self.out / 'temporal.json').write_text(json.dumps(figures, indent=1) + '\n')
        return figures


def list_images(inputs) -> list[Path]:
    """The files named, and the images inside the folders named (sorted); an error names what is missing."""
    images = []
    for item in map(Path, inputs):
        if item.is_dir():
            images += images_in(item)
        elif item.is_file():
            images.append(item)
        else:
            raise FileNotFoundError(f"input {item} does not exist")
    return images


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
    return args


def build_predictor(args):
    """(predictor, class names, palette, relative) for a config + checkpoint or for an ONNX file."""
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
    return np.concatenate([blended, legend(names, [palette[c] for c in present], image.shape[0])], axis=1)


def draw_depth(image, depth, unit: str = 'm') -> np.ndarray:
    """The image, the depth map in colour (near = bright) and a colour bar over its valid range."""
    valid = depth[np.isfinite(depth) & (depth > 0)]
    vmin, vmax = (float(valid.min()), float(valid.max())) if valid.size else (0.0, 1.0)
    return np.concatenate([image, colorize_depth(depth, vmin, vmax), colour_bar(vmin, vmax, depth.shape[0], unit)],
                          axis=1)


def main(argv=None) -> list[Path]:
    args = parse_args(argv)
    from tqdm import tqdm
    predictor, classes, palette, relative = build_predictor(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extras = CloudAndVideo(args, relative, out)
    written = []
    for path in tqdm(list_images(args.inputs), desc='infer', unit='image'):
        image = read_rgb(path)
        prediction = predictor(image)
        prediction = extras(path, image, prediction)  # --sequence / --smooth / --ply
        if prediction.dtype.kind in 'iu':  # class ids
            picture = draw_segmentation(image, prediction, classes, palette, args.alpha)
            raw = np.where((prediction >= 0) & (prediction < 255), prediction, 255).astype(np.uint8)
        elif relative:  # inverse depth up to scale and shift: drawn as its inverse, a depth up to scale
            picture = draw_depth(image, np.where(prediction > 0, 1 / np.maximum(prediction, 1e-12), 0), unit='rel.')
            raw = np.clip(prediction / max(float(prediction.max()), 1e-12) * 65535, 0, 65535).astype(np.uint16)
        else:  # depth in metres
            picture = draw_depth(image, prediction)
            raw = np.clip(np.nan_to_num(prediction) * 1000, 0, 65535).round().astype(np.uint16)
        written.append(write_rgb(out / f'{path.stem}.png', picture))
        cv2.imwrite(str(out / f'{path.stem}_pred.png'), raw)
    extras.finish()
    return written


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
