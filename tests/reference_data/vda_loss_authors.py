"""Reference values of Video Depth Anything's own training loss (DepthAnything/Video-Depth-Anything ``loss/loss.py``)
on small seeded clips, so that tests/dense/test_video_depth_loss.py checks this project's
:class:`heads.losses.VideoDepthLoss` against their code without it.

Cases (inputs 'b t h w': prediction, target, a bool mask with holes; values under the holes are random, as a
network's output and a target there are): their ``VideoDepthLoss()`` with its defaults on two clips of 4 frames;
the same on clips of 3 frames one of which has no valid pixel; ``VideoDepthLoss(trim=0.2, scales=3, stable_scale=5)``
(the trimmed path) on one clip of 5; their ``TemporalGradientMatchingLoss(trim=0.1, temp_grad_scales=3,
temp_grad_decay=0.5, diff_depth_th=0.2)`` alone on two clips of 6 (strides 1, 2 and 4). Targets drift slowly over a
clip, as a video's disparity does, so that the temporal threshold keeps most pixels. Saved: the inputs, their loss
values (total, spatial and stable terms) and the gradients of the total w.r.t. the prediction.

Made with the authors' repository at commit 4f5ae23172ba60fd7bc11ef671cca678842c7072, torch 2.15.0 CPU:

    git clone https://github.com/DepthAnything/Video-Depth-Anything /tmp/vda && git -C /tmp/vda checkout 4f5ae231
    python tests/reference_data/vda_loss_authors.py /tmp/vda
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

REFERENCE = Path(__file__).with_name('vda_loss_authors.pt')
#: name -> (b, t, h, w, the loss: 'video' with these VideoDepthLoss arguments, or 'temporal' with these
#: TemporalGradientMatchingLoss arguments)
CASES = {
    'defaults': (2, 4, 16, 20, 'video', {}),
    'empty_frame': (2, 3, 14, 18, 'video', {}),
    'trimmed': (1, 5, 16, 16, 'video', dict(trim=0.2, scales=3, stable_scale=5)),
    'temporal_strides': (2, 6, 12, 14, 'temporal',
                         dict(trim=0.1, temp_grad_scales=3, temp_grad_decay=0.5, diff_depth_th=0.2)),
}


def inputs(seed: int, b: int, t: int, h: int, w: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    base = torch.rand(b, 1, h, w, generator=g) + 0.2  # disparity of the first frame
    drift = 0.02 * torch.randn(b, t, h, w, generator=g).cumsum(1)
    target = base + drift
    pred = 0.7 * target + 0.3 + 0.1 * torch.randn(b, t, h, w, generator=g)  # a prediction roughly affine in it
    mask = torch.rand(b, t, h, w, generator=g) > 0.15
    mask[..., 2:5, 3:7] = False  # a hole
    garbage = 5 * torch.rand(b, t, h, w, generator=g)
    return dict(pred=torch.where(mask, pred, garbage), target=torch.where(mask, target, garbage.flip(-1)), mask=mask)


def main(repo: Path) -> None:
    sys.path.insert(0, str(repo / 'loss'))
    from loss import TemporalGradientMatchingLoss, VideoDepthLoss

    cases = {}
    for seed, (name, (b, t, h, w, kind, kwargs)) in enumerate(CASES.items()):
        x = inputs(seed, b, t, h, w)
        if name == 'empty_frame':
            x['mask'][1, 1] = False
        pred = x['pred'].clone().requires_grad_()
        if kind == 'video':
            out = VideoDepthLoss(**kwargs)(pred, x['target'], x['mask'])
            values = {k: v.detach() for k, v in out.items()}
            total = out['total_loss']
        else:
            total = TemporalGradientMatchingLoss(**kwargs)(pred, x['target'], x['mask'])
            values = dict(total_loss=total.detach())
        total.backward()
        assert torch.isfinite(pred.grad).all() and all(torch.isfinite(v) for v in values.values()), name
        cases[name] = dict(kind=kind, kwargs=kwargs, **x, values=values, grad=pred.grad.clone())
    torch.save(dict(cases=cases, made_with=dict(repo='DepthAnything/Video-Depth-Anything',
                                                commit='4f5ae23172ba60fd7bc11ef671cca678842c7072',
                                                torch=str(torch.__version__))), REFERENCE)
    print(f"wrote {REFERENCE} ({REFERENCE.stat().st_size // 1024} KiB)")
    for name, case in cases.items():
        print(name, {k: round(float(v), 6) for k, v in case['values'].items()})


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
