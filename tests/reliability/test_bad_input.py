"""Bad input gets an error that names the file or the config key, or is converted by a stated rule
(docs/reliability.md); a diverging run stops with its last good checkpoint intact."""
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.dataset import pseudo_collate

from heads.datasets import CamVidDataset
from heads.engine import DivergedError
from heads.engine.config.check import ConfigKeyError
from heads.io.images import read_rgb
from heads.models import DensePreprocessor
from heads.registry import TRANSFORMS

ROOT = Path(__file__).resolve().parents[2]
import train as train_tool  # noqa: E402

SEG_PIPELINE = [dict(type='LoadImage'), dict(type='LoadAnnotations'), dict(type='PackDenseInputs')]


# ------------------------------------------------------------------------------------------------- images
def test_grayscale_is_repeated_into_three_channels(tmp_path):
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    cv2.imwrite(str(tmp_path / 'g.png'), gray)
    rgb = read_rgb(tmp_path / 'g.png')
    assert rgb.shape == (3, 4, 3) and all((rgb[..., c] == gray).all() for c in range(3))


def test_alpha_is_dropped_without_compositing(tmp_path):
    bgra = np.zeros((3, 4, 4), np.uint8)
    bgra[..., :3] = (10, 20, 30)  # B, G, R
    bgra[0, 0, 3] = 255  # one opaque pixel, the rest fully transparent
    cv2.imwrite(str(tmp_path / 'a.png'), bgra)
    assert (read_rgb(tmp_path / 'a.png') == (30, 20, 10)).all()


def test_sixteen_bit_is_scaled_to_eight_bits_by_rounding(tmp_path):
    values = np.array([0, 128, 129, 257, 32896, 65535], np.uint16)
    bgr = np.repeat(values.reshape(1, -1, 1), 3, axis=2)
    cv2.imwrite(str(tmp_path / 's.png'), bgr)
    assert read_rgb(tmp_path / 's.png')[0, :, 0].tolist() == np.round(values / 257).astype(int).tolist()


def test_float_images_are_refused_naming_the_file(tmp_path):
    cv2.imwrite(str(tmp_path / 'f.tiff'), np.ones((3, 4, 3), np.float32))
    with pytest.raises(ValueError, match=r'f\.tiff has float32 pixels'):
        read_rgb(tmp_path / 'f.tiff')


def test_each_exif_orientation_gives_the_pixels_a_viewer_shows(tmp_path):
    """An asymmetric picture (six blocks of distinct colours, 2 x 3 as stored) saved with each EXIF orientation 1-8
    reads as PIL's ``ImageOps.exif_transpose`` shows it; the eight views differ, so a wrong rotation or flip fails."""
    from PIL import Image, ImageOps
    colours = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255]], [[255, 255, 0], [0, 255, 255], [255, 0, 255]]],
                       np.uint8)
    stored = Image.fromarray(colours.repeat(16, 0).repeat(16, 1))  # 16-pixel blocks: whole JPEG blocks, 4:4:4
    views, wrong = {}, {}
    for orientation in range(1, 9):
        exif = stored.getexif()
        exif[0x0112] = orientation
        path = tmp_path / f'o{orientation}.jpg'
        stored.save(path, exif=exif, quality=95, subsampling=0)
        views[orientation] = np.asarray(ImageOps.exif_transpose(Image.open(path)).convert('RGB')).astype(int)
        read = read_rgb(path).astype(int)
        if read.shape != views[orientation].shape or np.abs(read - views[orientation]).max() > 8:
            wrong[orientation] = read.shape
    assert not wrong, f'orientations read unlike a viewer shows them (shape read): {wrong}'
    assert views[6].shape == (48, 32, 3) and (views[6][0, 0] > 200).tolist() == [True, True, False]  # yellow: top left
    assert all(a.shape != b.shape or np.abs(a - b).max() > 100 for i, a in views.items() for j, b in views.items()
               if i < j)


# ------------------------------------------------------------------------------------------------- labels
def camvid_folder(root: Path, label: np.ndarray) -> CamVidDataset:
    (root / 'images/train').mkdir(parents=True)
    (root / 'annotations/train').mkdir(parents=True)
    cv2.imwrite(str(root / 'images/train/f001.jpg'), np.zeros((*label.shape, 3), np.uint8))
    cv2.imwrite(str(root / 'annotations/train/f001.png'), label)
    return CamVidDataset(str(root), pipeline=SEG_PIPELINE)


def test_label_outside_the_classes_names_the_file_and_the_values(tmp_path):
    label = np.zeros((6, 8), np.uint8)
    label[0, :3] = (11, 12, 40)  # 11 is CamVid's void (mapped to 255); 12 and 40 are no class
    with pytest.raises(ValueError, match=r'f001\.png has values \[12, 40\].*11 classes 0\.\.10'):
        camvid_folder(tmp_path, label)[0]


def test_sixteen_bit_label_maps_whose_values_fit_are_read(tmp_path):
    label = np.full((6, 8), 3, np.uint16)
    label[0, 0] = 11
    labels = camvid_folder(tmp_path, label)[0]['data_samples'].gt_sem_seg.data[0]
    assert labels[0, 0] == 255 and (labels.flatten()[1:] == 3).all()


def test_sixteen_bit_label_values_beyond_255_are_refused(tmp_path):
    label = np.full((6, 8), 3, np.uint16)
    label[0, 0] = 300
    with pytest.raises(ValueError, match=r'f001\.png is uint16 \(largest value 300\)'):
        camvid_folder(tmp_path, label)[0]


def test_model_with_fewer_classes_than_the_labels_says_so():
    from heads.losses import CrossEntropyLoss
    with pytest.raises(ValueError, match=r'model predicts 4 classes \(decode_head.num_classes\)'):
        CrossEntropyLoss()(torch.zeros(1, 4, 2, 2), torch.tensor([[[0, 5], [255, 1]]]))


def test_image_smaller_than_the_crop_is_padded_with_ignored_labels():
    """mmseg's rule: the crop spans a smaller image whole, and the batch pads it with label 255 (ignored by
    the loss and metrics) and image value 0."""
    crop = TRANSFORMS.build(dict(type='RandomCrop', crop_size=(32, 48)))
    pack = TRANSFORMS.build(dict(type='PackDenseInputs'))
    small = {'img': np.full((20, 30, 3), 7, np.uint8), 'gt_seg_map': np.ones((20, 30), np.uint8),
             'seg_fields': ['gt_seg_map']}
    large = {'img': np.zeros((40, 60, 3), np.uint8), 'gt_seg_map': np.zeros((40, 60), np.uint8),
             'seg_fields': ['gt_seg_map']}
    batch = DensePreprocessor(size_divisor=16)(pseudo_collate([pack(crop(small)), pack(crop(large))]),
                                               training=True)
    assert batch['inputs'].shape == (2, 3, 32, 48)
    labels = batch['data_samples'][0].gt_sem_seg.data[0]
    assert (labels[:20, :30] == 1).all() and (labels[20:] == 255).all() and (labels[:, 30:] == 255).all()


# ------------------------------------------------------------------------------------------------- configs
@pytest.mark.parametrize('key, owner', [('model.decode_head.colour', 'DPTSegHead'),
                                        ('model.decod_head', 'Segmentor'),
                                        ('train_dataloader.dataset.pipeline.2.prob_', 'RandomFlip'),
                                        ('optim_wrapper.optimizer.lr_', 'AdamW'),
                                        ('param_scheduler.1.powr', 'PolyLR')])
def test_config_key_no_component_accepts_is_named_before_building(key, owner, tmp_path):
    with pytest.raises(ConfigKeyError, match=rf"config key {key.replace('.', '[.]')} is not accepted by {owner}"):
        train_tool.main(['configs/quickstart.py', '--work-dir', str(tmp_path), '--cfg-options', f'{key}=1'])
    assert not any(tmp_path.iterdir())  # failed before the runner made its work dir


def test_backbone_option_that_does_not_exist_lists_the_accepted_ones(tmp_path):
    with pytest.raises(TypeError, match=r"does not accept \['colour'\]; accepted options: .*'depth'"):
        train_tool.main(['configs/quickstart.py', '--work-dir', str(tmp_path), '--cfg-options',
                         'model.backbone.colour=1'])


# ------------------------------------------------------------------------------------------------- divergence
@pytest.mark.slow
def test_nan_loss_stops_at_that_iteration_keeping_every_checkpoint(tmp_path, monkeypatch):
    """The first update at lr 1e4 ruins the weights: iteration 2's loss, the first computed with the weights of
    iter_1.pth, is NaN. So iter_1.pth is kept on disk but not called good (docs/reliability.md)."""
    monkeypatch.chdir(ROOT)
    args = ['configs/quickstart.py', '--work-dir', str(tmp_path), '--cfg-options', 'train_cfg.max_iters=8',
            'default_hooks.checkpoint.interval=1', 'train_dataloader.batch_size=4',
            'train_dataloader.dataset.num_samples=16', 'optim_wrapper.optimizer.lr=1e4', 'param_scheduler=[]']
    with pytest.raises(DivergedError, match=r"loss \{'loss': nan.* at iteration 2; stopped without saving. No good "
                                            r"checkpoint is left on disk; not iter_1\.pth \(the loss of the "
                                            r"iteration after it was \{'loss': nan"):
        train_tool.main(args)
    assert sorted(p.name for p in tmp_path.glob('*.pth')) == ['iter_1.pth']
    weights = torch.load(tmp_path / 'iter_1.pth', weights_only=True)['state_dict']
    assert all(torch.isfinite(v).all() for v in weights.values() if v.is_floating_point())
