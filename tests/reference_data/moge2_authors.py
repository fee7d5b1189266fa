"""Reference outputs of MoGe-2's own code (microsoft/MoGe, ``moge.model.v2.MoGeModel``) for a small seeded model,
saved in the layout the authors publish (``model.state_dict()``: ``encoder.*``, ``neck.*``, ``points_head.*``,
``normal_head.*``, ``mask_head.*``, ``scale_head.*``), so that tests/layouts/test_moge2.py checks this project's
model against their code without it (CI reaches no code host).

The model is their ``MoGeModel`` with the released structure (``configs/train/v2.json``: a neck and three heads of
five levels, conv-transpose resamplers then a bilinear one, no norms, ``remap_output='exp'``) at small widths, on
their DINOv2 at width 32, 2 heads, MLP ratio 2, 4 blocks (patch 14, built at 112 to keep the file small: its
position table is resampled as at 518; registered as a hub entry ``dinov2_tiny`` of their ``dinov2.hub.backbones``),
all four blocks tapped. Every weight is perturbed (their DINOv2's ``mask_token`` starts at zero; it is unused) and
the mask head's last bias moved (``MASK_BIAS``) so that the mask has valid and invalid pixels.

Outputs: ``model(image, num_tokens)`` (images in [0, 1]) at 60x60 with 16 tokens (a 4x4 grid: the image is resized
down to 56x56, antialiased, as theirs) and at 36x60 with 15 tokens (aspect 5:3 -> a 3x5 grid: resized up to 42x70):
their token grid is ``round(sqrt(num_tokens / aspect))`` by ``round(sqrt(num_tokens * aspect))``, so both sizes give
whole grids; the outputs are resized back to the image. Their ``infer`` (``use_fp16=False``) on the 36x60 image:
focal and shift recovered (points, depth, intrinsics, mask), and with ``fov_x=60`` (depth, intrinsics).

Also the state-dict keys and shapes of the released sizes: ``vitl-normal`` from ``configs/train/v2.json`` and
``vitl`` (Ruicheng/moge-2-vitl, no normal head: vitl-normal's keys without ``normal_head.*``, checked here, not
stored); their parameter counts, 326.2M and 330.9M, are the README's 326M and 331M. ``vitb-normal`` and
``vits-normal`` are DERIVED (their model cards are not reachable): the ViT-L config with the backbone swapped, the
scale MLP and first-level widths at the backbone's width (107.5M and 36.9M against the README's 104M and 35M: so
these two are not confirmed).

Made with the authors' repository at commit 0744441 (utils3d at 3fab839, as their requirements.txt pins; xformers
absent: their attention then runs its explicit path), torch CPU:

    git clone https://github.com/microsoft/MoGe /tmp/moge && git -C /tmp/moge checkout 0744441
    git clone https://github.com/EasternJournalist/utils3d /tmp/utils3d && git -C /tmp/utils3d checkout 3fab839f
    pip install --target /tmp/ref_site --no-deps huggingface_hub   # imported by their v2.py
    PYTHONPATH=/tmp/utils3d:/tmp/ref_site python tests/reference_data/moge2_authors.py /tmp/moge
"""
from __future__ import annotations

import copy
import json
import sys
from functools import partial
from pathlib import Path

import torch

REFERENCE = Path(__file__).with_name('moge2_authors.pt')
SIZES = dict(embed_dim=32, depth=4, num_heads=2, mlp_ratio=2)
WIDTHS = [24, 16, 8, 8, 8]  # the levels' widths (theirs: 1024, 256, 128, 64, 32)
MASK_BIAS = -0.08


def small_config() -> dict:
    def stack(dim_in, out, blocks):
        return dict(dim_in=dim_in, dim_out=out, dim_res_blocks=WIDTHS, num_res_blocks=blocks,
                    res_block_in_norm='none', res_block_hidden_norm='none',
                    resamplers=['conv_transpose', 'conv_transpose', 'conv_transpose', 'bilinear'])
    head = partial(stack, WIDTHS, blocks=[0, 1, 1, 1, 0])
    return dict(encoder=dict(backbone='dinov2_tiny', intermediate_layers=[0, 1, 2, 3], dim_out=WIDTHS[0]),
                neck=stack([WIDTHS[0] + 2, 2, 2, 2, 2], None, [1, 2, 2, 2, 0]),
                points_head=head([None] * 4 + [3]), normal_head=head([None] * 4 + [3]),
                mask_head=head([None] * 4 + [1]), scale_head=dict(dims=[32, 16, 16, 1]), remap_output='exp')


def released_configs(repo: Path) -> dict:
    """The released sizes' configs: vitl from configs/train/v2.json; vitb and vits derived (module docstring)."""
    vitl = json.loads((repo / 'configs' / 'train' / 'v2.json').read_text())['model']
    configs = {'vitl-normal': vitl, 'vitl': {k: v for k, v in vitl.items() if k != 'normal_head'}}
    for name, backbone, width in (('vitb-normal', 'dinov2_vitb14', 768), ('vits-normal', 'dinov2_vits14', 384)):
        cfg = copy.deepcopy(vitl)
        cfg['encoder'].update(backbone=backbone, dim_out=width)
        cfg['scale_head']['dims'] = [width, width, width, 1]
        for part in ('neck', 'points_head', 'normal_head', 'mask_head'):
            cfg[part]['dim_res_blocks'][0] = width
            cfg[part]['dim_in'][0] = width + 2 if part == 'neck' else width
        configs[name] = cfg
    return configs


def main(repo: Path) -> None:
    sys.path.insert(0, str(repo))
    from moge.model.dinov2.hub import backbones
    from moge.model.dinov2.models import vision_transformer as vits
    from moge.model.v2 import MoGeModel

    def dinov2_tiny(pretrained=False):
        return vits.DinoVisionTransformer(
            img_size=112, patch_size=14, init_values=1.0, ffn_layer='mlp', block_chunks=0, num_register_tokens=0,
            interpolate_antialias=False, interpolate_offset=0.1,
            block_fn=partial(vits.Block, attn_class=vits.MemEffAttention), **SIZES)
    backbones.dinov2_tiny = dinov2_tiny

    full = {}
    for name, cfg in released_configs(repo).items():
        if name != 'vitl':  # vitl: vitl-normal without normal_head.* (checked here)
            state = MoGeModel(**cfg).state_dict()
            full[name] = {k: list(v.shape) for k, v in state.items()}
    vitl = {k: list(v.shape) for k, v in MoGeModel(**released_configs(repo)['vitl']).state_dict().items()}
    assert vitl == {k: v for k, v in full['vitl-normal'].items() if not k.startswith('normal_head.')}
    torch.manual_seed(0)
    model = MoGeModel(**small_config()).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        model.mask_head.output_blocks[-1].bias.add_(MASK_BIAS)  # a mask with pixels on both sides of 0.5
    inputs, outputs = {}, {}
    for size, (h, w, tokens) in {'60x60': (60, 60, 16), '36x60': (36, 60, 15)}.items():
        image = torch.rand(1, 3, h, w, generator=torch.Generator().manual_seed(len(inputs) + 1))
        with torch.no_grad():
            out = model(image, num_tokens=tokens)
        inputs[size] = dict(image=image, num_tokens=tokens)
        outputs[size] = {k: v.clone() for k, v in out.items()}
        valid = (out['mask'] > 0.5).float().mean()
        assert 0.2 < valid < 0.8, f'{size}: {valid:.2f} of the mask is valid: change MASK_BIAS'
    # their infer (float32) on the non-square image: focal and shift recovered; then with a known field of view
    image, tokens = inputs['36x60']['image'], inputs['36x60']['num_tokens']
    out = model.infer(image, num_tokens=tokens, use_fp16=False)
    infer = {'recovered': {k: out[k].clone() for k in ('points', 'depth', 'intrinsics', 'mask')}}
    out = model.infer(image, num_tokens=tokens, use_fp16=False, fov_x=60.0)
    infer['fov_x=60'] = {k: out[k].clone() for k in ('depth', 'intrinsics')}
    torch.save(dict(state={k: v.clone() for k, v in model.state_dict().items()}, config=small_config(),
                    inputs=inputs, outputs=outputs, infer=infer, full_sizes=full,
                    made_with=dict(repo='microsoft/MoGe', commit='0744441', torch=str(torch.__version__))),
               REFERENCE)
    print(f"wrote {REFERENCE} ({REFERENCE.stat().st_size // 1024} KiB)")


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
