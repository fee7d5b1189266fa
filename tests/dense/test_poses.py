"""7-Scenes camera poses (heads.io.poses): a frame's pose file found next to it (or in a pose folder), read as a
camera-to-world matrix, and every malformed file refused with an error that names it."""
import numpy as np
import pytest

from heads.io.poses import pose_path, read_pose, read_poses

#: a 7-Scenes-like pose: a turn of 30 degrees about y, the camera 0.1 m up and 0.5 m along z
ANGLE = np.radians(30)
POSE = np.array([[np.cos(ANGLE), 0, np.sin(ANGLE), 0.0], [0, 1, 0, -0.1], [-np.sin(ANGLE), 0, np.cos(ANGLE), 0.5],
                 [0, 0, 0, 1]])


def write(path, matrix) -> None:
    path.write_text('\n'.join(' '.join(f'{x:.7e}' for x in row) for row in np.atleast_2d(matrix)) + '\n')


def test_a_frames_pose_is_read_from_next_to_it_or_from_a_pose_folder(tmp_path):
    assert pose_path('seq-01/frame-000007.color.png') == pose_path('seq-01/frame-000007.depth.png')
    assert str(pose_path('seq-01/frame-000007.color.png')) == 'seq-01/frame-000007.pose.txt'
    assert pose_path('rgb/frame-000007.jpg', tmp_path / 'poses') == tmp_path / 'poses' / 'frame-000007.pose.txt'
    write(tmp_path / 'frame-000000.pose.txt', np.eye(4))
    write(tmp_path / 'frame-000001.pose.txt', POSE)
    frames = [tmp_path / 'frame-000000.color.png', tmp_path / 'frame-000001.color.png']
    poses = read_poses(frames)
    assert poses.shape == (2, 4, 4) and poses.dtype == np.float64
    assert np.allclose(poses[0], np.eye(4)) and np.allclose(poses[1], POSE, atol=1e-7)


def test_a_missing_pose_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'frame-000003\.pose\.txt does not exist.*next to each frame'):
        read_poses([tmp_path / 'frame-000003.color.png'])


@pytest.mark.parametrize('content, message', [
    ('1 0 0 0\n0 1 0 0\n0 0 1 0\n', 'holds 12 numbers'),
    ('1 0 0 x\n0 1 0 0\n0 0 1 0\n0 0 0 1\n', 'not numbers'),
    ('1 0 0 nan\n0 1 0 0\n0 0 1 0\n0 0 0 1\n', 'non-finite'),
    ('1 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 1 1\n', 'bottom row'),
    ('2 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 0 1\n', 'no rotation'),
    ('-1 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 0 1\n', 'no rotation'),  # a reflection
])
def test_a_malformed_pose_file_is_named_with_the_fault(tmp_path, content, message):
    path = tmp_path / 'frame-000000.pose.txt'
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as caught:
        read_pose(path)
    assert str(path) in str(caught.value)
