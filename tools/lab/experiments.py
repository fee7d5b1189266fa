"""The four exercises a ViT course sets its students, on the built-in synthetic scenes (sky, ground, boxes, discs),
each a few CPU minutes; :func:`run` writes a table (``results.md``, ``results.json``) and plots. Every run is the
same small DPT (4-block ViT-Ti, 8x8 patches, 64x64 images, 8x8 tokens; AdamW, batch 8) trained from scratch with a
fixed seed; only the switch under study differs.

(a) ``registers``: 0 vs 4 register tokens; of the last block's CLS attention over the patches (averaged over heads
    and validation images), its entropy (nats; log 64 = 4.16 is uniform) and its roughness (mean absolute
    difference between neighbouring patches over the mean weight: 0 for a flat map; lower is smoother).
(b) ``norm``: pre-LN vs post-LN trained at a high constant rate with no warm-up: the loss curves.
(c) ``lora``: a LoRA adapter on one block's q/k/v with everything else frozen: which parameters get gradients.
(d) ``positions``: learned / sin-cos / RoPE (axial) / ALiBi / none: validation mIoU at the training size (64x64,
    8x8 tokens) and at 128x128 (16x16 tokens, a grid never seen in training).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from heads.models.preprocessor import IMAGENET_MEAN_255, IMAGENET_STD_255
from zoo.weights.durable import write_text_durably

SIZE, LARGE = (64, 64), (128, 128)
MEAN, STD = torch.tensor(IMAGENET_MEAN_255), torch.tensor(IMAGENET_STD_255)
NUM_CLASSES = 4
POSITIONS = {'learned': dict(), 'sincos': dict(pos_embed='sincos'),
             'rope': dict(pos_embed='none', rope=dict(kind='axial', temperature=100.0)),
             'alibi': dict(pos_embed='none', alibi=True), 'none': dict(pos_embed='none')}


def scenes(count: int, size, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalised images 'n 3 h w' and labels 'n h w' of ``count`` synthetic scenes."""
    from heads.datasets.synthetic import render_scene
    rendered = [render_scene(np.random.default_rng((seed, i)), size) for i in range(count)]
    images = torch.from_numpy(np.stack([r['img'] for r in rendered])).float()  # n h w 3
    images = ((images - MEAN) / STD).permute(0, 3, 1, 2).contiguous()
    return images, torch.from_numpy(np.stack([r['gt_seg_map'] for r in rendered])).long()


def small_dpt(**backbone_options) -> torch.nn.Module:
    from heads.registry import MODELS
    backbone = dict(type='ZooBackbone', name='vit_tiny_patch16_224', img_size=SIZE, patch_size=8, depth=4,
                    out_indices=(0, 1, 2, 3))
    backbone.update(backbone_options)
    return MODELS.build(dict(type='Segmentor', backbone=backbone,
                             neck=dict(type='DPTNeck', readout='ignore', hidden_channels=(16, 32, 64, 64),
                                       fusion_channels=32),
                             decode_head=dict(type='DPTSegHead', num_classes=NUM_CLASSES, in_channels=32)))


def train(model, data, iters: int, lr: float = 1e-3, warmup: int = 20, seed: int = 0) -> list[float]:
    """AdamW on random batches of 8 (linear warm-up over ``warmup`` iterations, then constant); the loss per
    iteration (NaN once it is not finite, and training stops)."""
    images, labels = data
    generator = torch.Generator().manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    losses = []
    model.train()
    for step in range(iters):
        for group in optimizer.param_groups:
            group['lr'] = lr * min(1.0, (step + 1) / warmup) if warmup else lr
        batch = torch.randint(len(images), (8,), generator=generator)
        loss = F.cross_entropy(model.predict_tensor(images[batch]), labels[batch])
        if not torch.isfinite(loss):
            losses.append(float('nan'))
            break
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def miou(model, data) -> float:
    """Mean IoU (%) over the classes present, on ``data``."""
    images, labels = data
    model.eval()
    from heads.evaluation.metrics import IoUMetric
    predictions = torch.cat([model.predict_tensor(images[i:i + 16]).argmax(1) for i in range(0, len(images), 16)])
    intersect, union, _, label_area = IoUMetric.intersect_and_union(predictions, labels, NUM_CLASSES)
    present = label_area > 0
    return float((intersect[present].double() / union[present]).mean() * 100)


@torch.no_grad()
def cls_attention(model, images) -> torch.Tensor:
    """The last block's CLS attention over the patch tokens, renormalised, mean over heads: 'n h w'."""
    backbone = model.backbone.eval()
    attn = backbone.attention_maps(images)[-1]  # n heads tokens tokens
    p = backbone.num_prefix_tokens
    cls = attn[:, :, 0, p:]
    cls = cls / cls.sum(-1, keepdim=True)
    h, w = images.shape[-2] // backbone.patch_size, images.shape[-1] // backbone.patch_size
    return cls.mean(1).reshape(-1, h, w)


def entropy_and_roughness(maps: torch.Tensor, eps: float = 1e-12) -> tuple[float, float]:
    flat = maps.flatten(1)
    entropy = float(-(flat * (flat + eps).log()).sum(1).mean())
    steps = torch.cat([(maps[:, 1:] - maps[:, :-1]).abs().flatten(1), (maps[:, :, 1:] - maps[:, :, :-1]).abs()
                       .flatten(1)], dim=1)
    return entropy, float((steps.mean(1) / flat.mean(1)).mean())


def exercise_registers(iters, data, val):
    out = {}
    for registers in (0, 4):
        torch.manual_seed(0)
        model = small_dpt(reg_tokens=registers)
        losses = train(model, data, iters)
        maps = cls_attention(model, val[0][:32])
        entropy, roughness = entropy_and_roughness(maps)
        out[f'{registers} registers'] = dict(entropy=entropy, roughness=roughness, miou=miou(model, val),
                                             final_loss=float(np.mean(losses[-10:])), example=maps[0].tolist())
    return out


def exercise_norm(iters, data, val, lr=5e-3):
    out = {}
    for name, post in (('pre-LN', False), ('post-LN', True)):
        torch.manual_seed(0)
        model = small_dpt(post_norm=post, depth=8, out_indices=(1, 3, 5, 7))
        losses = train(model, data, iters, lr=lr, warmup=0)
        out[name] = dict(losses=losses, final_loss=float(np.nanmean(losses[-10:])), miou=miou(model, val), lr=lr)
    return out


def exercise_lora(data):
    from zoo.lora import apply_lora, lora_summary
    torch.manual_seed(0)
    model = small_dpt()
    apply_lora(model, targets='backbone.blocks.1.attn.qkv', rank=4, alpha=8)
    images, labels = data
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    for step in range(2):  # B starts at zero, so A's first gradient is zero: look at the second step
        optimizer.zero_grad()
        F.cross_entropy(model.train().predict_tensor(images[8 * step:8 * step + 8]), labels[8 * step:8 * step + 8]) \
            .backward()
        optimizer.step()
    with_grad = sorted(n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0)
    every = [n for n, _ in model.named_parameters()]
    return dict(with_gradient=with_grad, parameters=len(every), summary=lora_summary(model),
                only_adapters=with_grad == ['backbone.blocks.1.attn.qkv.lora_a', 'backbone.blocks.1.attn.qkv.lora_b'])


def exercise_positions(iters, data, val, val_large):
    out = {}
    for name, options in POSITIONS.items():
        torch.manual_seed(0)
        model = small_dpt(**options)
        losses = train(model, data, iters)
        out[name] = dict(miou=miou(model, val), miou_large=miou(model, val_large),
                         final_loss=float(np.mean(losses[-10:])))
    return out


def plot(results: dict, out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    written = []
    if 'registers' in results:
        fig, axes = plt.subplots(1, 2, figsize=(6, 3))
        for ax, (name, r) in zip(axes, results['registers'].items()):
            ax.imshow(np.array(r['example']), cmap='viridis')
            ax.set_title(f"{name}\nentropy {r['entropy']:.2f}, roughness {r['roughness']:.2f}", fontsize=8)
            ax.axis('off')
        fig.suptitle('last block: CLS attention over the 8x8 patches', fontsize=9)
        written.append(_save(fig, out / 'registers_attention.png'))
    if 'norm' in results:
        fig, ax = plt.subplots(figsize=(5, 3))
        for name, r in results['norm'].items():
            ax.plot(r['losses'], label=name)
        ax.set(xlabel='iteration', ylabel='training loss', yscale='log',
               title=f"no warm-up, constant lr {next(iter(results['norm'].values()))['lr']:g}")
        ax.legend()
        written.append(_save(fig, out / 'norm_loss_curves.png'))
    if 'positions' in results:
        fig, ax = plt.subplots(figsize=(5, 3))
        names = list(results['positions'])
        x = np.arange(len(names))
        ax.bar(x - 0.2, [results['positions'][n]['miou'] for n in names], 0.4, label='64x64 (training size)')
        ax.bar(x + 0.2, [results['positions'][n]['miou_large'] for n in names], 0.4, label='128x128')
        ax.set_xticks(x, names)
        ax.set(ylabel='validation mIoU (%)', title='positions: training size vs larger')
        ax.legend(fontsize=8)
        written.append(_save(fig, out / 'positions_miou.png'))
    return written


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def table(results: dict) -> str:
    lines = []
    if 'registers' in results:
        lines += ['| (a) registers | CLS attention entropy (nats) | roughness | val mIoU |', '|---|---|---|---|']
        lines += [f"| {n} | {r['entropy']:.3f} | {r['roughness']:.3f} | {r['miou']:.1f} |"
                  for n, r in results['registers'].items()] + ['']
    if 'norm' in results:
        lines += ['| (b) no warm-up | final training loss | val mIoU | diverged |', '|---|---|---|---|']
        lines += [f"| {n} | {r['final_loss']:.3f} | {r['miou']:.1f} | "
                  f"{'yes' if any(math.isnan(v) for v in r['losses']) else 'no'} |" for n, r in results['norm'].items()]
        lines += ['']
    if 'lora' in results:
        r = results['lora']
        lines += ['| (c) LoRA on block 1 q/k/v | |', '|---|---|',
                  f"| parameters with a gradient | {', '.join(r['with_gradient'])} (of {r['parameters']}) |",
                  f"| only the adapter | {'yes' if r['only_adapters'] else 'NO'} |",
                  f"| summary | {r['summary']} |", '']
    if 'positions' in results:
        lines += ['| (d) positions | val mIoU 64x64 | val mIoU 128x128 | final training loss |', '|---|---|---|---|']
        lines += [f"| {n} | {r['miou']:.1f} | {r['miou_large']:.1f} | {r['final_loss']:.3f} |"
                  for n, r in results['positions'].items()]
    return '\n'.join(lines) + '\n'


def run(out, exercises=('registers', 'norm', 'lora', 'positions'), iters: int = 200, train_count: int = 512,
        val_count: int = 64, log=print) -> dict:
    """Run the chosen exercises, write ``results.json``, ``results.md`` and the plots under ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data, val = scenes(train_count, SIZE, seed=0), scenes(val_count, SIZE, seed=1)
    results = {}
    if 'registers' in exercises:
        results['registers'] = exercise_registers(iters, data, val)
        log('(a) registers done')
    if 'norm' in exercises:
        results['norm'] = exercise_norm(iters, data, val)
        log('(b) pre-LN vs post-LN done')
    if 'lora' in exercises:
        results['lora'] = exercise_lora(data)
        log(f"(c) LoRA: gradients reach {results['lora']['with_gradient']}")
    if 'positions' in exercises:
        results['positions'] = exercise_positions(iters, data, val, scenes(val_count, LARGE, seed=1))
        log('(d) positions done')
    write_text_durably(out / 'results.json', json.dumps(results, indent=1))
    write_text_durably(out / 'results.md', table(results))
    plot(results, out)
    log(table(results))
    return results
