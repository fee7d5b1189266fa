"""Reference outputs of Video Depth Anything's streaming inference (DepthAnything/Video-Depth-Anything's
``video_depth_anything/video_depth_stream.py``: ``infer_video_depth_one``, one frame at a time, each frame's temporal
attention inputs cached and a window of 32 cached frames attended), so that
tests/layouts/test_video_depth_anything_stream.py checks this project's stream against their code without it.

The model is the small seeded one of tests/reference_data/vda_authors.py (their ``VideoDepthAnything`` head at width
32 on their DINOv2 at width 32, 2 heads, MLP ratio 2; every weight perturbed): its weights are loaded from
vda_authors.pt into their streaming class (the same modules and keys), not saved again. The video: 46 random uint8
frames of 28x42, run through ``infer_video_depth_one(frame, input_size=28, device='cpu', fp32=True)``. 46 frames,
more than a window: the window's recent frames slide from frame 31 on (frame 1 leaves it), and from frame 42 on its
long-range slot (their second kept frame, 41 frames back) holds a real frame, not a copy of the first. 28x42
(multiples of 14) with ``input_size`` 28: their resize (lower bound, keep the aspect ratio, multiple of 14) keeps the
size, so it only scales to [0, 1] and normalises with ImageNet's mean and std, and their final resize to the frame
size is the identity; the test normalises the frames the same way. Saved: the frames 'n h w 3' (uint8) and their
depth 'n h w'.

Made with the authors' repository at commit 4f5ae23172ba60fd7bc11ef671cca678842c7072 (easydict installed; xformers
absent: their attention then runs its explicit path), torch 2.15.0 CPU, OpenCV 5.1.0:

    git clone https://github.com/DepthAnything/Video-Depth-Anything /tmp/vda && git -C /tmp/vda checkout 4f5ae231
    pip install --target /tmp/ref_site --no-deps easydict
    PYTHONPATH=/tmp/ref_site python tests/reference_data/vda_stream_authors.py /tmp/vda
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from vda_authors import HEAD, small_dinov2  # this folder's: the script's own directory is on sys.path

HERE = Path(__file__).parent
WEIGHTS = HERE / 'vda_authors.pt'  # the small seeded model of vda_authors.py
REFERENCE = HERE / 'vda_stream_authors.pt'
VIDEO = (46, 28, 42, 3)  # frames, height, width, channels (uint8)


def main(repo: Path) -> None:
    sys.path.insert(0, str(repo))
    from video_depth_anything import dinov2, video_depth_stream

    video_depth_stream.DINOv2 = small_dinov2(dinov2)  # the small model of vda_authors.py, its weights loaded below
    model = video_depth_stream.VideoDepthAnything(**HEAD).eval()
    model.load_state_dict(torch.load(WEIGHTS, weights_only=True)['state'], strict=True)
    frames = torch.randint(0, 256, VIDEO, generator=torch.Generator().manual_seed(11), dtype=torch.uint8).numpy()
    depth = np.stack([model.infer_video_depth_one(frame, input_size=VIDEO[1], device='cpu', fp32=True)
                      for frame in frames])
    assert depth.shape == VIDEO[:3] and (depth > 0).mean() > 0.5, 'the depth is mostly zero'
    torch.save(dict(frames=torch.from_numpy(frames), depth=torch.from_numpy(depth),
                    made_with=dict(repo='DepthAnything/Video-Depth-Anything',
                                   commit='4f5ae23172ba60fd7bc11ef671cca678842c7072', torch=str(torch.__version__),
                                   weights=WEIGHTS.name)),
               REFERENCE)
    print(f"wrote {REFERENCE} ({REFERENCE.stat().st_size // 1024} KiB)")


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
