"""The three heads of issue 39 (UperNet, Mask2Former, EoMT) against transformers' models of them, in the same
process, on the same weights: transformers' model is built with random weights (seed 0) and saved with
``save_pretrained``; ours is that folder read through ``heads.from_pretrained_hf``. The outputs are compared first
(relative max difference: max |ours - theirs| / max |theirs|, the largest over the outputs); a pair that differs by
more than :data:`TOLERANCE` is refused, with no time. Otherwise both forwards are timed in interleaved rounds
(ours, theirs, theirs, ours, ...) under ``torch.inference_mode``; the time ratio is ours / theirs, the median of the
per-round ratios (< 1: ours faster).

Outputs compared, as a user calls each model: UperNet's semantic logits 'b c h w' (ours ``mode='tensor'``,
transformers' ``logits``); Mask2Former's and EoMT's class logits 'b q c+1' and mask logits 'b q h w'
(``class_queries_logits``, ``masks_queries_logits``).
"""
from __future__ import annotations

import math
import tempfile
from functools import partial
from pathlib import Path

import torch

from heads.hf.folder import from_pretrained_hf
from zoo.profiling import interleaved_rounds, median, seconds_of
from zoo.runtime import apply_kernel_policy

HEADS = ('upernet', 'mask2former', 'eomt')
TOLERANCE = 1e-4
STAGES = ['stage1', 'stage2', 'stage3', 'stage4']
#: Swin-T (the backbone of mmseg's and transformers' UperNet / Mask2Former Swin-T models) and a tiny Swin for tests
SWIN = {False: dict(embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], window_size=7),
        True: dict(embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 2, 2, 4], window_size=7)}
#: per head, per ``tiny``: the fields of transformers' config besides the backbone
FIELDS = {
    'upernet': {False: dict(hidden_size=512, num_labels=150, use_auxiliary_head=False),
                True: dict(hidden_size=16, num_labels=5, use_auxiliary_head=False)},
    'mask2former': {False: dict(num_labels=150),  # Mask2FormerConfig's defaults: 256 wide, 100 queries, 6 + 10 layers
                    True: dict(feature_size=32, mask_feature_size=32, hidden_dim=32, encoder_feedforward_dim=24,
                               encoder_layers=1, decoder_layers=2, num_attention_heads=2, dim_feedforward=24,
                               num_queries=6, num_labels=5)},
    'eomt': {False: dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, patch_size=16, num_queries=100,
                         num_blocks=4, num_labels=150),  # ViT-S/16, 4 registers, 2 upscaling blocks (defaults)
             True: dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, patch_size=16, num_queries=6,
                        num_blocks=2, num_labels=5, num_register_tokens=1)},
}
NAMES = {'upernet': 'UperNet, Swin-T', 'mask2former': 'Mask2Former, Swin-T', 'eomt': 'EoMT, ViT-S/16'}
DESCRIPTIONS = {
    'upernet': "transformers' UperNetForSemanticSegmentation: Swin-T (embed 96, depths 2/2/6/2, window 7), UPerHead "
               "512 channels, 150 classes, auxiliary head off on both (transformers' eval forward would run it)",
    'mask2former': "transformers' Mask2FormerForUniversalSegmentation: Swin-T (as UperNet's), Mask2FormerConfig's "
                   "defaults otherwise (256 wide pixel decoder with 6 deformable layers, 10 decoder layers, 100 "
                   "queries), 150 classes",
    'eomt': "transformers' EomtForUniversalSegmentation: ViT-S/16 (384 wide, 12 blocks, 6 heads, 4 registers), 100 "
            "queries through the last 4 blocks, 2 upscaling blocks, 150 classes; masked attention off (all "
            "probabilities 0) and on (all 1)",
}


def patch_size(head: str) -> int | None:
    """The input sides must be multiples of this (EoMT's patches), or None."""
    return FIELDS[head][False].get('patch_size')


def hf_model(head: str, size: tuple[int, int], tiny: bool = False):
    """transformers' model of ``head`` (random weights, seed 0, eval mode) for inputs of ``size`` (h, w)."""
    import transformers
    if head == 'eomt':
        if size[0] != size[1]:
            raise ValueError(f"EoMT: transformers' EomtForUniversalSegmentation runs only at its configured square "
                             f"size, got {size[0]}x{size[1]}: give a square size or leave eomt out")
        config, kind = transformers.EomtConfig(image_size=size[0], **FIELDS[head][tiny]), \
            transformers.EomtForUniversalSegmentation
    else:
        # Swin's image_size only sizes an absolute position table these Swins do not have (any input runs); an
        # int, as heads.hf reads it
        swin = transformers.SwinConfig(**SWIN[tiny], image_size=max(size), out_features=STAGES)
        config, kind = {'upernet': (transformers.UperNetConfig, transformers.UperNetForSemanticSegmentation),
                        'mask2former': (transformers.Mask2FormerConfig,
                                        transformers.Mask2FormerForUniversalSegmentation)}[head]
        config = config(backbone_config=swin, **FIELDS[head][tiny])
    torch.manual_seed(0)
    return kind(config).eval()


def build_pair(head: str, size: tuple[int, int], tiny: bool = False):
    """(ours, transformers') for ``head``: ours read from transformers' save_pretrained folder (the same weights),
    its layers routed as the runner routes them (``zoo.runtime.apply_kernel_policy``)."""
    reference = hf_model(head, size, tiny)
    with tempfile.TemporaryDirectory() as folder:
        reference.save_pretrained(folder)
        ours = from_pretrained_hf(Path(folder))
    apply_kernel_policy(ours)
    return ours.eval(), reference


def outputs_ours(head: str, model, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    out = model(x, mode='tensor')
    return (out,) if head == 'upernet' else tuple(out)


def outputs_hf(head: str, model, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    out = model(pixel_values=x)
    return (out.logits,) if head == 'upernet' else (out.class_queries_logits, out.masks_queries_logits)


def set_masks(ours, reference, on: bool) -> None:
    """EoMT's masked attention in every one of the last blocks (probability 1) or in none (0), in both models."""
    probs = [1.0 if on else 0.0] * ours.num_blocks
    ours.set_mask_probabilities(probs)
    reference.attn_mask_probs.copy_(torch.tensor(probs))


def relative_difference(got, want) -> float:
    """max |got - want| / max |want| over paired outputs, the largest; inf where a pair's shapes differ."""
    worst = 0.0
    for a, b in zip(got, want, strict=True):
        if a.shape != b.shape:
            return math.inf
        worst = max(worst, float((a - b).abs().max() / b.abs().max()))
    return worst


def measure(label: str, ours_call, reference_call, rounds: int, tolerance: float = TOLERANCE) -> dict:
    """One row: the outputs compared (the calls' first run, also the warm-up), then, where they agree within
    ``tolerance``, seconds per call of each (median over ``rounds`` interleaved rounds) and the time ratio ours /
    reference (median of the per-round ratios). A pair that differs gets ``refused`` and no time."""
    with torch.inference_mode():
        difference = relative_difference(ours_call(), reference_call())
        row = {'head': label, 'difference': difference}
        if not difference <= tolerance:  # also NaN
            return {**row, 'refused': f'outputs differ by {difference:.1e} of their scale (> {tolerance:g})'}
        times = interleaved_rounds([partial(seconds_of, ours_call), partial(seconds_of, reference_call)], rounds)
    return {**row, 'ours_s': median(times[0]), 'hf_s': median(times[1]),
            'ratio': median([o / r for o, r in zip(*times)]), 'rounds': rounds, 'ours_rounds': times[0],
            'hf_rounds': times[1]}


def benchmark_head(head: str, size: tuple[int, int], batch: int, rounds: int, tiny: bool = False,
                   eomt_masks=(False, True)) -> list[dict]:
    """The rows of ``head`` (EoMT: one per setting of ``eomt_masks``), on one random batch (seed 0)."""
    ours, reference = build_pair(head, size, tiny)
    torch.manual_seed(0)
    x = torch.randn(batch, 3, *size)
    label = NAMES[head] + (' (tiny)' if tiny else '')
    ours_call, reference_call = partial(outputs_ours, head, ours, x), partial(outputs_hf, head, reference, x)
    if head != 'eomt':
        return [measure(label, ours_call, reference_call, rounds)]
    rows = []
    for on in eomt_masks:
        set_masks(ours, reference, on)
        rows.append(measure(f"{label}, masks {'on' if on else 'off'}", ours_call, reference_call, rounds))
    return rows


COLUMNS = ('head', 'ours s', 'transformers s', 'time ratio ours / transformers', 'rounds', 'max rel diff')


def table(rows: list[dict]) -> list[str]:
    """Markdown lines: a row per measurement; a refused pair shows why instead of times."""
    lines = ['| ' + ' | '.join(COLUMNS) + ' |', '|' + '---|' * len(COLUMNS)]
    for row in rows:
        if 'refused' in row:
            cells = [row['head'], '-', '-', f"refused: {row['refused']}", '-', f"{row['difference']:.1e}"]
        else:
            cells = [row['head'], f"{row['ours_s']:.3f}", f"{row['hf_s']:.3f}", f"{row['ratio']:.3f}",
                     str(row['rounds']), f"{row['difference']:.1e}"]
        lines.append('| ' + ' | '.join(cells) + ' |')
    return lines
