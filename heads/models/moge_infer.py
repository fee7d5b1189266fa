"""MoGe-2's post-processing (the authors' ``MoGeModel.infer``): from the affine-invariant point map to a metric
camera-space point map, depth and intrinsics.

The point map is right up to a z shift: the shift (and, unless the field of view is given, the focal length) is the
least-squares fit of the pinhole projection ``focal * xy / (z + shift)`` to the pixels' view-plane UV, over the valid
pixels of the map resampled (nearest) to 64x64. As the authors, it is solved over the shift alone with the focal in
closed form, by scipy's Levenberg-Marquardt from shift 0 with ``ftol=1e-3`` on float32 arrays (so the shift is theirs,
not a tighter optimum). The focal is relative to half the image diagonal; the intrinsics are normalised (principal
point 0.5, 0.5; fx, fy in image widths and heights).
"""
from __future__ import annotations

from functools import partial

import numpy as np
import torch
import torch.nn.functional as F

from .moge_uv import view_plane_uv


def _fit_shift(uv: np.ndarray, xyz: np.ndarray, focal: float | None) -> tuple[float, float]:
    """(shift, focal) minimising |focal * xy / (z + shift) - uv| over 'n 2' ``uv`` and 'n 3' ``xyz``; ``focal``
    given: the shift only."""
    from scipy.optimize import least_squares
    xy, z = xyz[:, :2], xyz[:, 2]

    def closed_form_focal(projected):
        return (projected * uv).sum() / np.square(projected).sum()

    def residual(shift):
        projected = xy / (z + shift)[:, None]
        f = closed_form_focal(projected) if focal is None else focal
        return (f * projected - uv).ravel()

    shift = least_squares(residual, x0=0, ftol=1e-3, method='lm')['x'].squeeze().astype(np.float32)
    if focal is None:
        focal = closed_form_focal(xy / (z + shift)[:, None])
    return float(shift), float(focal)


def recover_focal_shift(points: torch.Tensor, mask: torch.Tensor | None = None, focal: torch.Tensor | None = None,
                        size: tuple[int, int] = (64, 64)) -> tuple[torch.Tensor, torch.Tensor]:
    """Per image of 'b h w 3' ``points`` (``mask`` 'b h w' the pixels to fit, ``focal`` 'b' if known): the focal,
    relative to half the diagonal, and the z shift, each 'b'. Fewer than two valid pixels: focal 1, shift 0."""
    b, height, width, _ = points.shape
    uv = view_plane_uv(height, width, width / height, points.dtype, points.device)  # 2 h w
    points_lr = F.interpolate(points.permute(0, 3, 1, 2), size, mode='nearest').permute(0, 2, 3, 1).detach().cpu()
    uv_lr = F.interpolate(uv[None], size, mode='nearest')[0].permute(1, 2, 0).cpu().numpy()
    mask_lr = None if mask is None else (F.interpolate(mask.float()[:, None], size, mode='nearest')[:, 0] > 0).cpu()
    focals, shifts = [], []
    for i in range(b):
        xyz, pixels = points_lr[i].numpy(), uv_lr
        if mask_lr is not None:
            keep = mask_lr[i].numpy()
            xyz, pixels = xyz[keep], pixels[keep]
        if len(pixels) < 2:
            focals.append(1.0)
            shifts.append(0.0)
            continue
        shift, f = _fit_shift(pixels.reshape(-1, 2), xyz.reshape(-1, 3), None if focal is None else float(focal[i]))
        focals.append(f)
        shifts.append(shift)
    as_tensor = partial(torch.tensor, dtype=points.dtype, device=points.device)
    return (as_tensor(focals) if focal is None else focal.reshape(b)), as_tensor(shifts)


def normalised_intrinsics(fx: torch.Tensor, fy: torch.Tensor) -> torch.Tensor:
    """'b' focal lengths (in image widths, heights) -> 'b 3 3' with the principal point at (0.5, 0.5)."""
    k = torch.zeros(*fx.shape, 3, 3, dtype=fx.dtype, device=fx.device)
    k[..., 0, 0], k[..., 1, 1], k[..., 0, 2], k[..., 1, 2], k[..., 2, 2] = fx, fy, 0.5, 0.5, 1.0
    return k


def depth_to_points(depth: torch.Tensor, intrinsics: torch.Tensor) -> torch.Tensor:
    """'b h w' depth and 'b 3 3' normalised intrinsics -> 'b h w 3' camera-space points of the pixel centres."""
    _, height, width = depth.shape
    u = (torch.arange(width, dtype=depth.dtype, device=depth.device) + 0.5) / width
    v = (torch.arange(height, dtype=depth.dtype, device=depth.device) + 0.5) / height
    pixels = torch.stack([u[None, :].expand(height, width), v[:, None].expand(height, width),
                          torch.ones(height, width, dtype=depth.dtype, device=depth.device)], dim=-1)
    rays = pixels @ torch.linalg.inv(intrinsics).mT[:, None]  # b h w 3
    return rays * depth[..., None]


@torch.inference_mode()
def moge2_infer(model, image: torch.Tensor, num_tokens: int | None = None, resolution_level: int = 9,
                force_projection: bool = True, apply_mask: bool = True, fov_x: float | None = None) -> dict:
    """The authors' ``infer`` in float32: 'b 3 H W' (or '3 H W') images in [0, 1] -> ``points`` 'b H W 3' (metres,
    camera frame; masked-out pixels inf), ``depth`` 'b H W', ``intrinsics`` 'b 3 3' (normalised), ``mask`` 'b H W'
    (bool) and ``normal`` 'b H W 3' (zero where masked) when the model predicts them."""
    single = image.dim() == 3
    if single:
        image = image[None]
    height, width = image.shape[-2:]
    aspect = width / height
    if num_tokens is None:
        num_tokens = model.num_tokens(resolution_level)
    out = model(image, num_tokens=num_tokens)
    points, normal, mask, scale = (out.get(k) for k in ('points', 'normal', 'mask', 'metric_scale'))
    valid = None if mask is None else mask > 0.5
    diag = (1 + aspect ** 2) ** 0.5
    if fov_x is None:
        focal, shift = recover_focal_shift(points, valid)
    else:
        known = aspect / diag / torch.tan(torch.deg2rad(torch.as_tensor(fov_x, dtype=points.dtype)) / 2)
        focal = known.reshape(-1).expand(points.shape[0]).to(points.device)
        _, shift = recover_focal_shift(points, valid, focal=focal)
    intrinsics = normalised_intrinsics(focal / 2 * diag / aspect, focal / 2 * diag)
    points = points.clone()
    points[..., 2] += shift[:, None, None]
    if valid is not None:
        valid = valid & (points[..., 2] > 0)
    depth = points[..., 2].clone()
    if force_projection:
        points = depth_to_points(depth, intrinsics)
    if scale is not None:
        points = points * scale[:, None, None, None]
        depth = depth * scale[:, None, None]
    if apply_mask and valid is not None:
        points = torch.where(valid[..., None], points, torch.inf)
        depth = torch.where(valid, depth, torch.inf)
        normal = None if normal is None else torch.where(valid[..., None], normal, torch.zeros_like(normal))
    result = {k: v for k, v in dict(points=points, intrinsics=intrinsics, depth=depth, mask=valid,
                                    normal=normal).items() if v is not None}
    return {k: v[0] for k, v in result.items()} if single else result
