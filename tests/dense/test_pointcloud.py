"""Point clouds (heads.io.pointcloud): a real 7-Scenes depth map -> points -> PLY -> read back -> projected with the
same intrinsics gives the depth map back; hand-worked back-projection and intrinsics scaling; bad input named."""
import numpy as np
import pytest

from heads.io.depth import depth_in_metres, read_intrinsics, read_raw_depth
from heads.io.images import read_rgb
from heads.io.pointcloud import back_project, check_intrinsics, project, read_ply, scale_intrinsics, write_ply

from ..reference import shared_data


def test_a_7_scenes_frame_survives_ply_and_reprojection(tmp_path):
    root = shared_data('depth-7scenes')
    depth = depth_in_metres(read_raw_depth(root / 'depth' / 'frame-000000.png'), 1000.0, (0, 65535))
    image = read_rgb(root / 'rgb' / 'frame-000000.jpg')
    intrinsics = read_intrinsics(root / 'camera-intrinsics.txt')
    points, colours = back_project(depth, intrinsics, image)
    valid = depth > 0
    assert 0.5 * depth.size < len(points) == valid.sum() < depth.size  # 7-Scenes has holes: they give no point
    points_read, colours_read = read_ply(write_ply(tmp_path / 'frame.ply', points, colours))
    assert points_read.dtype == np.float32 and np.array_equal(points_read, points)
    assert np.array_equal(colours_read, image[valid])
    again = project(points_read, intrinsics, size=(640, 480))
    assert np.array_equal(again, depth)  # every valid pixel back with its exact depth, holes stay 0
    # x = (u - cx) z / fx, y = (v - cy) z / fy at one pixel, by hand from the file's 585, 320, 240
    v, u = 100, 500
    index = valid[:v].sum() + valid[v, :u].sum()
    z = depth[v, u]
    np.testing.assert_allclose(points[index], [(u - 320) * z / 585, (v - 240) * z / 585, z], rtol=1e-6)


def test_hand_worked_two_by_two():
    intrinsics = [[2.0, 0.0, 0.5], [0.0, 4.0, 0.5], [0.0, 0.0, 1.0]]
    depth = np.array([[1.0, 2.0], [0.0, 4.0]], np.float32)
    colours = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    points, rgb = back_project(depth, intrinsics, colours)
    # (u, v) = (0, 0): ((0 - .5)/2, (0 - .5)/4) * 1; (1, 0): (.5/2, -.5/4) * 2; (1, 1): (.5/2, .5/4) * 4; (0, 1) hole
    np.testing.assert_array_equal(points, [[-0.25, -0.125, 1.0], [0.5, -0.25, 2.0], [1.0, 0.5, 4.0]])
    np.testing.assert_array_equal(rgb, [[0, 1, 2], [3, 4, 5], [9, 10, 11]])
    np.testing.assert_array_equal(project(points, intrinsics, (2, 2)), depth)
    # two points on one pixel: the nearer wins; behind the camera or outside the image: dropped
    crowd = np.array([[0.5, -0.25, 2.0], [0.25, -0.125, 1.0], [0.0, 0.0, -1.0], [5.0, 0.0, 1.0]])
    np.testing.assert_array_equal(project(crowd, intrinsics, (2, 2)), [[0.0, 1.0], [0.0, 0.0]])


def test_intrinsics_are_scaled_by_the_size_ratio():
    k = read_intrinsics(shared_data('depth-7scenes', 'camera-intrinsics.txt'))
    half = scale_intrinsics(k, (640, 480), (320, 240))
    # fx * 0.5; (cx + 0.5) * 0.5 - 0.5 = 159.75 (pixel centres on the same rays)
    np.testing.assert_array_equal(half, [[292.5, 0, 159.75], [0, 292.5, 119.75], [0, 0, 1]])
    # a depth map at half size with the full-size intrinsics: its points are those of the half-size camera
    depth = np.linspace(1, 3, 240 * 320, dtype=np.float32).reshape(240, 320)
    points, _ = back_project(depth, k, image_size=(640, 480))
    np.testing.assert_array_equal(points, back_project(depth, half)[0])
    np.testing.assert_array_equal(project(points, k, (320, 240), image_size=(640, 480)), depth)


def test_bad_intrinsics_and_ply_are_named(tmp_path):
    with pytest.raises(ValueError, match=r'K has shape \(2, 2\); a camera matrix is 3x3'):
        check_intrinsics([[1, 0], [0, 1]], 'K')
    with pytest.raises(ValueError, match=r'focal lengths fx = 0, fy = 5 .* must be positive'):
        check_intrinsics([[0, 0, 1], [0, 5, 1], [0, 0, 1]])
    with pytest.raises(ValueError, match=r'last row \[0, 0, 1\]'):
        check_intrinsics([[5, 0, 1], [0, 5, 1], [0, 1, 1]])
    with pytest.raises(ValueError, match='non-finite'):
        check_intrinsics([[np.nan, 0, 1], [0, 5, 1], [0, 0, 1]])
    with pytest.raises(ValueError, match=r"colours of shape \(2, 3, 3\) do not fit"):
        back_project(np.ones((2, 2)), np.eye(3), np.zeros((2, 3, 3), np.uint8))
    ascii_ply = tmp_path / 'ascii.ply'
    ascii_ply.write_text('ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nend_header\n0\n')
    with pytest.raises(ValueError, match='ascii.ply is in PLY format ascii 1.0'):
        read_ply(ascii_ply)
    cut = write_ply(tmp_path / 'cut.ply', np.ones((4, 3), np.float32))
    cut.write_bytes(cut.read_bytes()[:-5])
    with pytest.raises(ValueError, match=r'cut.ply holds 43 bytes .* 4 vertices need 48'):
        read_ply(cut)
    assert read_ply(write_ply(tmp_path / 'plain.ply', np.ones((4, 3), np.float32)))[1] is None


def test_degenerate_intrinsics_and_malformed_ply_headers_are_named(tmp_path):
    """fx = 1e-300 passed and back-projected to infinite points; an 'element' line of two words raised IndexError,
    a vertex count that is no number a ValueError without the file."""
    with pytest.raises(ValueError, match=r'camera.txt: the focal lengths fx = 1e-300, fy = 5 .* at least 0.001'):
        check_intrinsics([[1e-300, 0, 1], [0, 5, 1], [0, 0, 1]], 'intrinsics file camera.txt')
    with pytest.raises(ValueError, match=r'K: the value 1e\+300 is above 1e\+08 pixels'):
        check_intrinsics([[5, 0, 1e300], [0, 5, 1], [0, 0, 1]], 'K')
    with pytest.raises(ValueError, match=r'non-finite points for depths up to 1e\+38'):
        back_project(np.full((2, 2), 1e38, np.float32), [[1e-3, 1e8, 0], [0, 1e-3, 0], [0, 0, 1]])
    header = 'ply\nformat binary_little_endian 1.0\n{}\nproperty float x\nproperty float y\nproperty float z\n'
    for element, message in [('element vertex', r"short.ply: header line 'element vertex' is not 'element <name> "
                                                r"<count>'"),
                             ('element vertex lots', r"short.ply: the vertex count 'lots' .* is not a non-negative"),
                             ('element vertex -1', r"short.ply: the vertex count '-1'")]:
        (tmp_path / 'short.ply').write_bytes((header.format(element) + 'end_header\n').encode())
        with pytest.raises(ValueError, match=message):
            read_ply(tmp_path / 'short.ply')

