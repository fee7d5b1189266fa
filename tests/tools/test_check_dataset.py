"""tools/check_dataset.py on a clean RGB-D folder (exit 0, counts, depth range, invalid fraction) and on one with
planted defects, each of which it names (exit 1)."""
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
    assert found == [f'missing folder: {tmp_path / "depth"} (expected rgb/ and depth/ in {tmp_path})']
    (tmp_path / 'depth').mkdir()
    write_frame(tmp_path, 'a', None)
    (tmp_path / 'depth' / 'a.exr').write_bytes(b'v/1\x01')
    _, found = check_dataset.check(tmp_path)
    assert len(found) == 1 and found[0].startswith('unreadable: ') and 'a.exr' in found[0] and '.npy' in found[0]
