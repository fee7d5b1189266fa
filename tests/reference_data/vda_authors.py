"""Reference outputs of Video Depth Anything's own code (DepthAnything/Video-Depth-Anything) for a small seeded model,
saved in the layout the authors publish (``model.state_dict()``: ``pretrained.*``, ``head.*``), so that
tests/layouts/test_video_depth_anything.py checks this project's model against their code without it (CI reaches no
code host).

The model is their ``VideoDepthAnything(encoder='vits', features=32, out_channels=[32, 32, 32, 32])`` (their DPT
head with its four temporal modules, clips of up to 32 frames) on their DINOv2 at width 32, 2 heads, MLP ratio 2
(12 blocks, patch 14, built at 518 as theirs; ``video_depth_anything.video_depth.DINOv2`` replaced by one of these
sizes). Every weight is perturbed (the temporal modules' ``proj_out`` starts at zero, which would hide them) and the
last conv's bias raised so that the ReLU'd depth is not all zero. Outputs: ``model(x)`` on clips 'b t 3 h w' of
normalised pixels (as their ``infer_video_depth`` feeds it): one clip of 4 frames at 70x70, two of 3 at 42x84.
Their long-video inference (``infer_video_depth``: 32-frame windows overlapping by 10, key frames, scale-shift
alignment) on 50 random frames of 42x56 (three windows), and the state-dict keys and shapes of the released sizes
(vits, vitb, vitl, relative and metric alike).

Made with the authors' repository at commit 4f5ae23172ba60fd7bc11ef671cca678842c7072 (easydict installed; xformers
absent: their attention then runs its explicit path), torch 2.15.0 CPU:

    git clone https://github.com/DepthAnything/Video-Depth-Anything /tmp/vda && git -C /tmp/vda checkout 4f5ae231
    pip install --target /tmp/ref_site --no-deps easydict
    PYTHONPATH=/tmp/ref_site python tests/reference_data/vda_authors.py /tmp/vda
"""
from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import torch

REFERENCE = Path(__file__).with_name('vda_authors.pt')
SIZES = dict(embed_dim=32, depth=12, num_heads=2, mlp_ratio=2)
HEAD = dict(encoder='vits', features=32, out_channels=[32, 32, 32, 32])
#: the released models' sizes (their run.py's model_configs)
FULL = (('vits', 64, [48, 96, 192, 384]), ('vitb', 128, [96, 192, 384, 768]), ('vitl', 256, [256, 512, 1024, 1024]))
VIDEO = (50, 42, 56, 3)  # frames, height, width, channels (uint8)
INPUTS = {'70x70': (1, 4, 3, 70, 70), '42x84': (2, 3, 3, 42, 84)}


def small_dinov2(dinov2):
    """A stand-in for their ``DINOv2(model_name)`` building their DINOv2 (their module ``dinov2``) at ``SIZES``, built
    at 518 as theirs; vda_stream_authors.py builds the same."""
    def build(model_name):
        return dinov2.DinoVisionTransformer(
            img_size=518, patch_size=14, init_values=1.0, ffn_layer='mlp', block_chunks=0, num_register_tokens=0,
            interpolate_antialias=False, interpolate_offset=0.1,
            block_fn=partial(dinov2.Block, attn_class=dinov2.MemEffAttention), **SIZES)
    return build


def main(repo: Path) -> None:
    sys.path.insert(0, str(repo))
    from video_depth_anything import dinov2, video_depth

    # the released sizes' keys and shapes (their own DINOv2 sizes, random weights)
    full = {}
    for encoder, features, widths in FULL:
        state = video_depth.VideoDepthAnything(encoder=encoder, features=features, out_channels=widths).state_dict()
        full[encoder] = {k: list(v.shape) for k, v in state.items()}
    video_depth.DINOv2 = small_dinov2(dinov2)
    torch.manual_seed(0)
    model = video_depth.VideoDepthAnything(**HEAD).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        model.head.scratch.output_conv2[2].bias.add_(0.5)
    inputs, outputs = {}, {}
    for size, shape in INPUTS.items():
        inputs[size] = torch.randn(shape, generator=torch.Generator().manual_seed(len(inputs) + 1))
        with torch.no_grad():
            outputs[size] = model(inputs[size])
        assert (outputs[size] > 0).float().mean() > 0.5, 'the depth is mostly zero: raise the last bias'
    # their long-video inference: 50 frames in 32-frame windows (three), keyframes and scale-shift alignment; frames
    # at 42x56 with input_size 42, so that their resize keeps the size (multiples of 14) and only normalises
    frames = torch.randint(0, 256, VIDEO, generator=torch.Generator().manual_seed(9), dtype=torch.uint8).numpy()
    video, _ = model.infer_video_depth(frames, 30, input_size=VIDEO[1], device='cpu', fp32=True)
    torch.save(dict(state={k: v.clone() for k, v in model.state_dict().items()}, inputs=inputs, outputs=outputs,
                    video=dict(frames=torch.from_numpy(frames), depth=torch.from_numpy(video)),
                    full_sizes=full,
                    made_with=dict(repo='DepthAnything/Video-Depth-Anything',
                                   commit='4f5ae23172ba60fd7bc11ef671cca678842c7072', torch=str(torch.__version__))),
               REFERENCE)
    print(f"wrote {REFERENCE} ({REFERENCE.stat().st_size // 1024} KiB)")


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
