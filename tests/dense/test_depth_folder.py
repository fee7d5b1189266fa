"""RGBDFolderDataset: one's own RGB-D folder (rgb/, depth/ as 16-bit PNG or .npy, optional mask/ and intrinsics),
read as the 7-Scenes dataset reads the real 7-Scenes folder; OpenEXR refused with how to convert."""
import shutil

import cv2
import numpy as np
import pytest

from heads.datasets import RGBDDepthDataset, RGBDFolderDataset
from heads.io.images import ImageError
from heads.registry import DATASETS

from ..reference import shared_data

PIPELINE = [dict(type='LoadImage'), dict(type='LoadAnnotations', seg=False, depth=True), dict(type='PackDenseInputs')]
FRAMES = ('frame-000000', 'frame-000002', 'frame-000004')


def depth_of(dataset, i):
    return dataset[i]['data_samples'].gt_depth.data[0].numpy()


@pytest.fixture
def seven_scenes_copy(tmp_path):
    """Three real 7-Scenes frames in the folder layout (no list file), with its camera-intrinsics.txt."""
    root = shared_data('depth-7scenes')
    for sub in ('rgb', 'depth'):
        (tmp_path / sub).mkdir()
    for stem in FRAMES:
        shutil.copy(root / 'rgb' / f'{stem}.jpg', tmp_path / 'rgb')
        shutil.copy(root / 'depth' / f'{stem}.png', tmp_path / 'depth')
    shutil.copy(root / 'camera-intrinsics.txt', tmp_path)
    return tmp_path


def test_the_folder_dataset_gives_7_scenes_depth(seven_scenes_copy):
    listed = RGBDDepthDataset(str(shared_data('depth-7scenes')), 'train.txt', pipeline=PIPELINE, indices=3)
    folder = DATASETS.build(dict(type='RGBDFolderDataset', data_root=str(seven_scenes_copy),
                                 depth_invalid=(0, 65535), pipeline=PIPELINE))
    assert len(folder) == 3
    for i, stem in enumerate(FRAMES):
        assert folder.get_data_info(i)['img_path'].endswith(f'rgb/{stem}.jpg')
        assert listed.get_data_info(i)['depth_path'].endswith(f'depth/{stem}.png')
        np.testing.assert_array_equal(depth_of(folder, i), depth_of(listed, i))
    assert folder.get_data_info(0)['intrinsics'] == [[585.0, 0.0, 320.0], [0.0, 585.0, 240.0], [0.0, 0.0, 1.0]]
    assert listed.get_data_info(0)['intrinsics'] == folder.get_data_info(0)['intrinsics']


def test_npy_depth_masks_and_per_image_intrinsics(tmp_path):
    for sub in ('rgb', 'depth', 'mask', 'intrinsics'):
        (tmp_path / sub).mkdir()
    cv2.imwrite(str(tmp_path / 'rgb' / 'a.png'), np.zeros((2, 3, 3), np.uint8))
    np.save(tmp_path / 'depth' / 'a.npy', np.array([[1.5, 2.0, np.nan], [0.0, 3.0, np.inf]], np.float32))
    cv2.imwrite(str(tmp_path / 'mask' / 'a.png'), np.array([[255, 0, 255], [255, 255, 255]], np.uint8))
    (tmp_path / 'intrinsics' / 'a.txt').write_text('500 510 1.5 1\n')
    dataset = RGBDFolderDataset(str(tmp_path), depth_scale=1.0, pipeline=PIPELINE)
    # nan, inf and 0 are invalid (-> 0); the mask's 0 removes the 2.0
    np.testing.assert_array_equal(depth_of(dataset, 0), [[1.5, 0, 0], [0, 3.0, 0]])
    assert dataset.get_data_info(0)['intrinsics'] == [[500.0, 0.0, 1.5], [0.0, 510.0, 1.0], [0.0, 0.0, 1.0]]
    # millimetres in a uint16 PNG, scale 1000
    cv2.imwrite(str(tmp_path / 'depth' / 'a.png'), np.array([[1500, 2000, 0], [7, 3000, 65535]], np.uint16))
    (tmp_path / 'depth' / 'a.npy').unlink()
    dataset = RGBDFolderDataset(str(tmp_path), mask_dir=None, depth_invalid=(0, 65535), pipeline=PIPELINE)
    np.testing.assert_allclose(depth_of(dataset, 0), [[1.5, 2.0, 0], [0.007, 3.0, 0]], rtol=1e-6)


def test_missing_depth_and_exr_are_errors_that_say_what_to_do(tmp_path):
    for sub in ('rgb', 'depth'):
        (tmp_path / sub).mkdir()
    cv2.imwrite(str(tmp_path / 'rgb' / 'a.png'), np.zeros((2, 2, 3), np.uint8))
    with pytest.raises(FileNotFoundError, match=r'image without depth: .*rgb/a\.png.*depth/a\.png'):
        RGBDFolderDataset(str(tmp_path))
    (tmp_path / 'depth' / 'a.exr').write_bytes(b'v/1\x01')
    with pytest.raises(ImageError, match=r'a\.exr.*OpenEXR.*\.npy.*16-bit PNG'):
        RGBDFolderDataset(str(tmp_path))
    with pytest.raises(ImageError, match='OpenEXR'):
        RGBDFolderDataset(str(tmp_path), depth_suffix='.exr')
