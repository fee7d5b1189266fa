"""tools/check_dataset.py on a clean RGB-D folder (exit 0, counts, depth range, invalid fraction) and on one with
planted defects, each of which it names (exit 1)."""
from pathlib import Path

import check_dataset
import cv2
import numpy as np
import pytest


def write_frame(root, stem, depth, size=(4, 6)):
    cv2.imwrite(str(root / 'rgb' / f'{stem}.png'), np.full((*size, 3), 90, np.uint8))
    if depth is not None:
        cv2.imwrite(str(root / 'depth' / f'{stem}.png'), depth)


@pytest.fixture
def clean(tmp_path):
    for sub in ('rgb', 'depth'):
        (tmp_path / sub).mkdir()
    depth = np.full((4, 6), 1000, np.uint16)   # 1 m
    depth[0, :3] = 0                            # 3 of 24 pixels invalid
    depth[3, 5] = 2500                          # 2.5 m
    for stem in ('a', 'b'):
        write_frame(tmp_path, stem, depth)
    return tmp_path


def test_a_clean_folder_exits_0_and_reports_what_it_found(clean, capsys):
    assert check_dataset.main([str(clean)]) == 0
    out = capsys.readouterr().out
    assert '2 images, 2 depth maps, 0 masks; 2 pairs read' in out
    assert 'depth range 1.000 .. 2.500 m' in out and 'invalid fraction 0.125' in out and 'OK' in out


def test_each_planted_defect_is_named_and_the_exit_is_1(clean, capsys):
    write_frame(clean, 'no_depth', None)
    cv2.imwrite(str(clean / 'depth' / 'no_image.png'), np.ones((4, 6), np.uint16))
    write_frame(clean, 'small_depth', np.ones((2, 3), np.uint16))
    write_frame(clean, 'eight_bit', np.ones((4, 6), np.uint8))
    write_frame(clean, 'truncated', np.ones((4, 6), np.uint16))
    data = (clean / 'depth' / 'truncated.png').read_bytes()
    (clean / 'depth' / 'truncated.png').write_bytes(data[:len(data) // 2])
    assert check_dataset.main([str(clean), '--depth-scale', '1000']) == 1
    problems = [line for line in capsys.readouterr().out.splitlines() if line.startswith('PROBLEM')]
    named = {'image without depth': 'no_depth.png', 'depth without image': 'no_image.png',
             'size mismatch': 'small_depth.png', '8-bit depth': 'eight_bit.png', 'unreadable': 'truncated.png'}
    assert len(problems) == len(named), problems
    for kind, name in named.items():
        assert any(line.startswith(f'PROBLEM {kind}: ') and name in line for line in problems), (kind, problems)
    # --allow-8bit accepts the 8-bit map
    summary, found = check_dataset.check(clean, allow_8bit=True)
    assert len(found) == 4 and summary['images'] == 6 and summary['depth_maps'] == 6


def test_exr_and_a_missing_folder_are_named(tmp_path):
    (tmp_path / 'rgb').mkdir()
    summary, found = check_dataset.check(tmp_path)
    assert found == [f'missing folder: depth map folder {tmp_path / "depth"} does not exist',
                     f'no images: image folder {tmp_path / "rgb"} holds no .jpg|.jpeg|.png|.bmp file']
    (tmp_path / 'depth').mkdir()
    write_frame(tmp_path, 'a', None)
    (tmp_path / 'depth' / 'a.exr').write_bytes(b'v/1\x01')
    _, found = check_dataset.check(tmp_path)
    assert len(found) == 1 and found[0].startswith('unreadable: ') and 'a.exr' in found[0] and '.npy' in found[0]


# ---------------------------------------------- the check and RGBDFolderDataset are one reader of the folder
# Each case below was a disagreement: the check said OK where the dataset refused or silently lost files, or the
# reverse. Both now list the folder with heads.io.rgbd_folder.list_rgbd_folder.

def dataset(root, **kwargs):
    from heads.datasets import RGBDFolderDataset
    return RGBDFolderDataset(str(root), **kwargs)


def test_an_upper_case_mask_is_used_by_the_dataset_as_the_check_counts_it(clean):
    (clean / 'mask').mkdir()
    cv2.imwrite(str(clean / 'mask' / 'a.PNG'), np.zeros((4, 6), np.uint8))   # every pixel masked out
    summary, _ = check_dataset.check(clean)
    assert summary['masks'] == 1
    info = dataset(clean).get_data_info(0)
    assert info['depth_mask_path'].endswith('a.PNG')   # before: no mask, trained on the masked pixels


def test_a_frame_stored_as_png_and_as_npy_is_refused_naming_both(clean):
    from heads.io.images import ImageError
    np.save(clean / 'depth' / 'a.npy', np.ones((4, 6), np.float32))
    _, found = check_dataset.check(clean)
    assert len(found) == 1 and found[0].startswith("ambiguous depth map: frame 'a'")
    assert str(clean / 'depth' / 'a.npy') in found[0] and str(clean / 'depth' / 'a.png') in found[0]
    with pytest.raises(ImageError, match=r"ambiguous depth map: frame 'a' has 2 files, .*a\.npy and .*a\.png"):
        dataset(clean)   # before: the PNG, silently


def test_depth_invalid_everywhere_is_named(clean, capsys):
    write_frame(clean, 'b', np.zeros((4, 6), np.uint16))
    write_frame(clean, 'c', np.full((4, 6), 65535, np.uint16))
    assert check_dataset.main([str(clean), '--depth-invalid', '0', '65535']) == 1
    problems = [line for line in capsys.readouterr().out.splitlines() if line.startswith('PROBLEM')]
    assert [line.split(': ')[0] for line in problems] == ['PROBLEM no valid depth'] * 2
    assert 'b.png' in problems[0] and 'c.png' in problems[1]
    # one frame masked out entirely: the same
    write_frame(clean, 'b', np.full((4, 6), 1000, np.uint16))
    (clean / 'mask').mkdir()
    cv2.imwrite(str(clean / 'mask' / 'b.png'), np.zeros((4, 6), np.uint8))
    _, found = check_dataset.check(clean, depth_invalid=(0, 65535))
    assert len(found) == 2 and 'masked out by' in found[0] and 'b.png' in found[0] and 'c.png' in found[1]


def test_empty_rgb_and_depth_folders_are_named(tmp_path):
    for sub in ('rgb', 'depth'):
        (tmp_path / sub).mkdir()
    assert check_dataset.main([str(tmp_path)]) == 1   # before: 0 images, "OK: no problem found"
    _, found = check_dataset.check(tmp_path)
    assert found == [f'no images: image folder {tmp_path / "rgb"} holds no .jpg|.jpeg|.png|.bmp file']
    with pytest.raises(ValueError, match='no images: image folder .*rgb holds no'):
        dataset(tmp_path)


def test_unreadable_per_frame_intrinsics_are_named(clean):
    (clean / 'intrinsics').mkdir()
    (clean / 'intrinsics' / 'a.txt').write_text('hello\n')
    _, found = check_dataset.check(clean)   # before: "per image in intrinsics/: 1 files", OK
    assert len(found) == 2
    assert found[0].startswith('unreadable: intrinsics file ') and 'a.txt is not numbers' in found[0]
    assert found[1].startswith('frame without intrinsics: ') and 'b.png' in found[1]
    with pytest.raises(ValueError, match=r'a\.txt is not numbers'):
        dataset(clean)


@pytest.mark.parametrize('scale', ['0', '-1', 'nan', 'inf'])
def test_a_depth_scale_that_is_not_finite_and_positive_is_refused(clean, scale, capsys):
    with pytest.raises(SystemExit) as exit_:
        check_dataset.main([str(clean), '--depth-scale', scale])   # before: 0 gave "OK", a range of inf m
    assert exit_.value.code == 2 and 'depth_scale must be a finite positive number' in capsys.readouterr().err
    with pytest.raises(ValueError, match='depth_scale must be a finite positive number'):
        dataset(clean, depth_scale=float(scale))


@pytest.mark.parametrize('numbers', ['nan 585 320 240', '0 585 320 240', '585 -585 320 240',
                                     '585 0 320 0 inf 240 0 0 1'])
def test_nan_or_non_positive_focal_lengths_are_refused(clean, numbers):
    (clean / 'camera-intrinsics.txt').write_text(numbers + '\n')
    _, found = check_dataset.check(clean)   # before: OK, and the dataset read them
    assert len(found) == 1 and found[0].startswith('unreadable: intrinsics file ') and 'camera-intrinsics' in found[0]
    assert 'non-finite' in found[0] or 'must be positive' in found[0]
    with pytest.raises(ValueError, match='camera-intrinsics.txt(: the focal lengths| holds non-finite)'):
        dataset(clean)


def test_symlinked_subfolders_are_followed_by_the_dataset_the_check_and_the_image_search(clean, tmp_path_factory):
    from heads.datasets.base import list_files
    from heads.io.images import images_in
    elsewhere = tmp_path_factory.mktemp('elsewhere')
    for sub in ('rgb', 'depth'):
        (elsewhere / sub).mkdir()
    write_frame(elsewhere, 'x', np.full((4, 6), 2000, np.uint16))
    (clean / 'rgb' / 'seq').symlink_to(elsewhere / 'rgb', target_is_directory=True)
    (clean / 'depth' / 'seq').symlink_to(elsewhere / 'depth', target_is_directory=True)
    (clean / 'rgb' / 'loop').symlink_to(clean / 'rgb', target_is_directory=True)   # a cycle: entered once
    summary, found = check_dataset.check(clean)
    assert found == [] and summary['images'] == summary['checked_pairs'] == 3   # before: 2, seq/x skipped
    assert [info['img_path'][len(str(clean)) + 1:] for info in dataset(clean).load_data_list()] == [
        'rgb/a.png', 'rgb/b.png', 'rgb/seq/x.png']
    assert [p.relative_to(clean) for p in images_in(clean / 'rgb')] == [
        Path('rgb/a.png'), Path('rgb/b.png'), Path('rgb/seq/x.png')]
    assert list(list_files(clean / 'depth', '.png', 'depth', '')) == ['a', 'b', 'seq/x']
