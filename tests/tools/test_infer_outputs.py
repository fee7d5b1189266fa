"""What tools/infer.py writes and where (heads.io.predictions): outputs that overwrite no input and no other output
(same names from different folders keep their folders), depth beyond 16-bit millimetres kept in float32 files and
never clipped silently, a one-line error for an --out that is a file, a tile count said and bounded, frames in
natural order and a one-frame sequence's figure as valid JSON."""
import json
from pathlib import Path

import cv2
import infer
import numpy as np
import pytest
import torch

import heads
from heads.evaluation.temporal import TemporalConsistency
from heads.io.depth import read_raw_depth

from ..reference import shared_data, tiny_dpt

CAMVID_TEST = dict(type='CamVidDataset', data_root='unused', split='val', pipeline=[])  # names only (lazy)


def frame(path: Path, size=(64, 48), name='0016E5_07959.jpg') -> Path:
    """A real CamVid frame resized to ``size`` (w, h), written as PNG to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    picture = cv2.imread(str(shared_data('camvid', 'images', 'val', name)))
    cv2.imwrite(str(path), cv2.resize(picture, size, interpolation=cv2.INTER_AREA))
    return path


def tiny_model(root: Path, task: str, **head) -> tuple[Path, Path]:
    """(config, checkpoint) of a random tiny DPT (tests/reference.py); ``head`` overrides decode_head entries; a
    metric head's last bias is 10 (sigmoid ~ 1: depth ~ max_depth everywhere)."""
    cfg = tiny_dpt(task)
    cfg['decode_head'] = {**cfg['decode_head'], **head}
    config = root / f'{task}.py'
    test = f'test_dataloader = dict(dataset={CAMVID_TEST!r})\n' if task == 'seg' else ''
    config.write_text(f'model = {cfg!r}\npredict_scale = (64, 48)\n{test}')
    torch.manual_seed(0)
    model = heads.MODELS.build(cfg)
    if task == 'metric':
        with torch.no_grad():
            [m for m in model.decode_head.modules() if isinstance(m, torch.nn.Conv2d)][-1].bias.fill_(10.0)
    torch.save({'state_dict': model.state_dict()}, root / f'{task}.pth')
    return config, root / f'{task}.pth'


@pytest.fixture(scope='module')
def seg_model(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp('seg'), 'seg')


@pytest.mark.slow  # ~2 s: the tiny model runs on four 64x48 images
def test_same_names_in_different_folders_keep_their_folders_and_no_input_is_overwritten(seg_model, tmp_path):
    config, checkpoint = seg_model
    first, second = frame(tmp_path / 'in' / 'a' / '001.png'), frame(tmp_path / 'in' / 'b' / '001.png',
                                                                    name='0016E5_07961.jpg')
    out = tmp_path / 'out'
    infer.main([str(config), str(checkpoint), str(tmp_path / 'in' / 'a'), str(second), '--out', str(out)])
    for folder in ('a', 'b'):  # before: one 001.png and one 001_pred.png, the first image's overwritten
        assert (out / folder / '001.png').is_file() and (out / folder / '001_pred.png').is_file()
    assert not (out / '001_pred.png').exists()
    labels = [cv2.imread(str(out / f / '001_pred.png'), cv2.IMREAD_UNCHANGED) for f in ('a', 'b')]
    predictor = heads.Predictor(str(config), checkpoint)
    for folder, raw in zip(('a', 'b'), labels):
        assert np.array_equal(raw, predictor(tmp_path / 'in' / folder / '001.png').astype(np.uint8))
    # --out the inputs' own folder: the picture 001.png would replace the photo 001.png; refused, photo kept
    photo = first.read_bytes()
    with pytest.raises(SystemExit, match=r"the output .*a/001.png of input .*a/001.png would overwrite the input "
                                         r".*give --out a folder apart"):
        infer.main([str(config), str(checkpoint), str(tmp_path / 'in' / 'a'), '--out', str(tmp_path / 'in' / 'a')])
    assert first.read_bytes() == photo and sorted(p.name for p in first.parent.iterdir()) == ['001.png']


def test_outputs_that_would_overwrite_each_other_are_refused_before_anything_runs(seg_model, tmp_path):
    """x.jpg and x.png share the outputs x.png, x_pred.png; x.png and x_pred.jpg share x_pred.png."""
    config, checkpoint = seg_model
    for names in (('x.jpg', 'x.png'), ('x.png', 'x_pred.jpg')):
        for name in names:
            frame(tmp_path / 'in' / name)
        with pytest.raises(SystemExit, match=r"inputs .* and .* would both write .*x(_pred)?.png: rename one"):
            infer.main([str(config), str(checkpoint), str(tmp_path / 'in'), '--out', str(tmp_path / 'out')])
        for name in names:
            (tmp_path / 'in' / name).unlink()
    assert not (tmp_path / 'out').exists()


def test_an_out_that_is_a_file_is_a_one_line_error_naming_it(seg_model, tmp_path, capsys):
    config, checkpoint = seg_model
    image, taken = frame(tmp_path / 'x.png'), tmp_path / 'results.txt'
    taken.write_text('not a folder')
    with pytest.raises(SystemExit) as stop:  # before: FileExistsError's traceback after the model was built
        infer.main([str(config), str(checkpoint), str(image), '--out', str(taken)])
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(f"--out {taken} is a file, not a folder: give a folder for the outputs (made if missing)")
    assert taken.read_text() == 'not a folder'


@pytest.mark.slow  # ~2 s: the tiny model runs three times on a 64x48 image
def test_metric_depth_beyond_65_m_is_kept_in_float32_and_never_clipped_silently(tmp_path):
    """A model predicting ~100 m (max_depth 100, as Depth Anything's outdoor configs' 80): the .npy holds the
    predicted metres, the 16-bit PNG of millimetres writes the pixels beyond 65.534 m as 0 (none, not 65535, which
    7-Scenes reads as invalid too, nor a clipped 65.535 m) and a warning names the file and the count."""
    config, checkpoint = tiny_model(tmp_path, 'metric', max_depth=100.0)
    image = frame(tmp_path / 'in' / 'far.png')
    depth = heads.Predictor(str(config), checkpoint)(image)
    assert depth.min() > 65.6  # every pixel beyond what 16-bit millimetres hold
    with pytest.warns(UserWarning, match=r"far_pred.png: 3072 pixels deeper than 65.534 m \(up to 99.99\d m\) do "
                                         r"not fit .* written as 0 \(none\); their values are in .*far_pred.npy"):
        infer.main([str(config), str(checkpoint), str(image), '--out', str(tmp_path / 'out')])
    np.testing.assert_array_equal(np.load(tmp_path / 'out' / 'far_pred.npy'), depth)  # before: no .npy
    np.testing.assert_array_equal(read_raw_depth(tmp_path / 'out' / 'far_pred.npy'), depth)  # as depth_scale=1
    png = cv2.imread(str(tmp_path / 'out' / 'far_pred.png'), cv2.IMREAD_UNCHANGED)
    assert png.dtype == np.uint16 and (png == 0).all()  # before: 65535 everywhere, silently
    with pytest.warns(UserWarning, match=r"far_pred.png: 3072 pixels .* add npy to --depth-format to keep them"):
        infer.main([str(config), str(checkpoint), str(image), '--out', str(tmp_path / 'png'), '--depth-format', 'png'])
    assert not (tmp_path / 'png' / 'far_pred.npy').exists()
    infer.main([str(config), str(checkpoint), str(image), '--out', str(tmp_path / 'npy'), '--depth-format', 'npy'])
    assert not (tmp_path / 'npy' / 'far_pred.png').exists() and (tmp_path / 'npy' / 'far.png').is_file()


def test_a_metric_depth_that_fits_is_written_in_millimetres(tmp_path):
    from heads.io.predictions import write_depth
    depth = np.array([[0.0, 0.0004, 0.0006, 1.25], [65.534, 65.6, np.nan, np.inf]], np.float32)
    with pytest.warns(UserWarning, match=r"d_pred.png: 1 pixels deeper than 65.534 m \(up to 65.600 m\)"):
        write_depth(tmp_path / 'd', depth, relative=False)
    png = cv2.imread(str(tmp_path / 'd_pred.png'), cv2.IMREAD_UNCHANGED)
    assert png.tolist() == [[0, 0, 1, 1250], [65534, 0, 0, 0]]


def test_too_many_tiles_are_refused_naming_the_options_before_anything_runs(seg_model, tmp_path, capsys):
    """--tile 32 32 --overlap 31 on a 360x480 image is 147,721 forward passes: before, minutes without a word."""
    config, checkpoint = seg_model
    image = frame(tmp_path / 'big.png', size=(480, 360))
    # rows ceil((360 - 32) / 128), columns ceil((480 - 32) / 128)
    assert infer.check_tiles([image], (160, 160), 32, 4096) == 3 * 4
    assert '--tile 160 160 --overlap 32: 12 tiles for 1 image(s)' in capsys.readouterr().out
    assert infer.check_tiles([image], (32, 32), 31, 200000) == 147721  # allowed when asked for
    capsys.readouterr()
    with pytest.raises(SystemExit, match=r"--tile 32 32 --overlap 31 needs 147721 tiles \(forward passes\) for "
                                         r".*big.png \(360x480\), more than --max-tiles 4096: use larger tiles "
                                         r"\(--tile\) or a smaller --overlap, or raise --max-tiles"):
        infer.main([str(config), str(checkpoint), str(image), '--out', str(tmp_path / 'out'),
                    '--tile', '32', '32', '--overlap', '31'])
    assert '147721 tiles for 1 image(s)' in capsys.readouterr().out and not (tmp_path / 'out').exists()


def test_folder_frames_come_in_natural_order(tmp_path):
    for name in ('frame_10.png', 'frame_2.png', 'frame_1.png', 'sub/frame_3.png'):
        frame(tmp_path / 'seq' / name)
    names = [str(p.relative_to(tmp_path / 'seq')) for p in infer.list_images([tmp_path / 'seq'])]
    assert names == ['frame_1.png', 'frame_2.png', 'frame_10.png', 'sub/frame_3.png']  # before: 1, 10, 2
    explicit = [tmp_path / 'seq' / 'frame_10.png', tmp_path / 'seq' / 'frame_2.png']
    assert infer.list_images(explicit + [tmp_path / 'seq' / 'frame_10.png']) == explicit  # as given, once each


def test_a_one_frame_sequence_writes_valid_json_saying_why_there_is_no_figure(tmp_path, capsys):
    def refuse(constant):
        raise ValueError(f'{constant} is not JSON')

    args = infer.build_parser().parse_args(['c.py', 'm.pth', 'x.png', '--out', str(tmp_path), '--sequence',
                                            '--smooth', '0.5'])
    extras = infer.CloudAndVideo(args, relative=False, out=tmp_path)
    extras(Path('x.png'), np.zeros((4, 4, 3), np.uint8), np.ones((4, 4), np.float32))
    extras.finish()
    saved = json.loads((tmp_path / 'temporal.json').read_text(), parse_constant=refuse)  # before: NaN
    assert saved['frames'] == 1 and saved['temporal_consistency_percent'] is None
    assert saved['temporal_consistency_percent_note'] == ('1 frame: the figure compares consecutive frames and '
                                                          'needs at least two')
    assert saved['smoothed_temporal_consistency_percent'] is None
    assert 'over 1 frames' in capsys.readouterr().out


def test_a_sequence_without_static_pixels_says_so():
    meter = TemporalConsistency(threshold=10)
    meter.update(np.ones((2, 2)), np.zeros((2, 2, 3), np.uint8))
    meter.update(np.ones((2, 2)), np.full((2, 2, 3), 200, np.uint8))  # every pixel changed: none static
    assert np.isnan(meter.value) and meter.frames == 2
    assert meter.undefined_because.startswith('no pair of the 2 consecutive frames has a pixel that is static')
    meter.update(np.ones((2, 2)), np.full((2, 2, 3), 200, np.uint8))
    assert meter.value == 0.0 and meter.undefined_because is None
