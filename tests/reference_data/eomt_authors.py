"""Reference outputs of the EoMT authors' own code (tue-mps/eomt) for small seeded models, saved in the layouts the
authors publish, so that tests/layouts/test_eomt_authors.py checks this project's loading of their checkpoints
without their code (CI reaches no code host).

Three cases, each a model of the authors' ``models.eomt.EoMT`` (4 blocks of width 32, 2 heads, 16-pixel patches, 6
queries joining before the last 2 blocks, 5 classes; weights perturbed, LayerScale in 0.5..1.5):

- ``dinov2``: its encoder timm's ``vit_large_patch14_reg4_dinov2`` at those sizes (``models.vit.ViT`` with timm),
  built at 64x96; its ``network.*`` state dict as the authors' LightningModule holds it (with the loss's
  ``criterion.empty_weight``), as their published ``pytorch_model.bin`` files are;
- ``dinov3``: its encoder transformers' ``DINOv3ViTModel`` (4 registers, q/v biases; ``models.vit.ViT`` given a
  folder), built at 64x64 and also run at 64x96 (its rotary positions take any grid; ``grid_size`` set);
- ``dinov3_deltas``: the authors' delta weights (their DINOv3 releases): a file of differences to the model made
  from DINOv3's pretrained weights with everything outside the encoder zeroed, loaded by their LightningModule's own
  ``_zero_init_outside_encoder`` and ``_add_state_dicts`` (taken from training/lightning_module.py's source and run
  here: its imports need lightning, torchmetrics and wandb); the "pretrained" DINOv3 is saved as transformers writes
  its folder's weights.

Every case holds the input (pixels in 0..1), the masked-attention probabilities and, per setting (probabilities 1:
every masked block masked; 0: the annealed model as released, and as its state is saved), the authors' per-layer
mask and class logits.

Made with the authors' repository at commit 7bd19ddd621c5c6adedcd260458a34783cd4a45f and the versions its
requirements.txt pins for the encoders (transformers 4.56.1, timm 1.0.15; torch 2.15.0, CPU):

    git clone https://github.com/tue-mps/eomt /tmp/eomt && git -C /tmp/eomt checkout 7bd19ddd
    pip install --target /tmp/ref_site --no-deps transformers==4.56.1 timm==1.0.15 huggingface_hub==0.35.3 \\
        tokenizers==0.22.1 requests urllib3 idna charset_normalizer certifi
    PYTHONPATH=/tmp/ref_site python tests/reference_data/eomt_authors.py /tmp/eomt
"""
from __future__ import annotations

import ast
import logging
import sys
import tempfile
import types
from pathlib import Path

import torch
from torch import nn

REFERENCE = Path(__file__).with_name('eomt_authors.pt')
SIZES = dict(embed_dim=32, depth=4, num_heads=2)
HEAD = dict(num_classes=5, num_q=6, num_blocks=2)


def perturbed(model: nn.Module, seed: int) -> nn.Module:
    """Every parameter moved off its init; LayerScale (timm's ``gamma``, transformers' ``lambda1``) in 0.5..1.5."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(('.gamma', '.lambda1')):
                p.uniform_(0.5, 1.5)
            else:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def run(model: nn.Module, x: torch.Tensor) -> dict:
    """The authors' per-layer (mask, class) logits with the masked-attention probabilities at 1 and at 0."""
    out = {}
    for setting in (1.0, 0.0):
        model.attn_mask_probs.fill_(setting)
        with torch.no_grad():
            torch.manual_seed(1)
            masks, classes = model(x)
        out[str(setting)] = dict(masks=[m.clone() for m in masks], classes=[c.clone() for c in classes])
    return out  # the probabilities left at 0, as a released (annealed) model saves them


def lightning_state(model: nn.Module) -> dict:
    """The state dict as the authors' LightningModule (``self.network``, the loss's ``criterion``) saves it."""
    state = {f'network.{k}': v.clone() for k, v in model.state_dict().items()}
    state['criterion.empty_weight'] = torch.ones(HEAD['num_classes'] + 1)
    return state


def authors_methods(repo: Path) -> dict:
    """The LightningModule's ``_zero_init_outside_encoder`` and ``_add_state_dicts``, compiled from its source."""
    tree = ast.parse((repo / 'training' / 'lightning_module.py').read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == 'LightningModule')
    wanted = [n for n in cls.body if isinstance(n, ast.FunctionDef)
              and n.name in ('_zero_init_outside_encoder', '_add_state_dicts')]
    namespace = {'torch': torch, 'logging': logging}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), 'lightning_module.py', 'exec'), namespace)
    return {n.name: namespace[n.name] for n in wanted}


def main(repo: Path) -> None:
    sys.path.insert(0, str(repo))
    import timm
    import transformers
    from models import vit as vit_module
    from models.eomt import EoMT

    create = timm.create_model
    vit_module.timm = types.SimpleNamespace(create_model=lambda name, **kw: create(name, **kw, **SIZES))
    cases = {}

    # DINOv2 through timm, at a non-square native size
    torch.manual_seed(0)
    encoder = vit_module.ViT((64, 96), 16, 'vit_large_patch14_reg4_dinov2', ckpt_path='not downloaded')
    model = perturbed(EoMT(encoder, **HEAD), 1).eval()
    x = torch.rand(2, 3, 64, 96, generator=torch.Generator().manual_seed(2))
    outputs = {'64x96': run(model, x)}
    cases['dinov2'] = dict(state=lightning_state(model), inputs={'64x96': x}, outputs=outputs)

    # DINOv3 through transformers, built at 64x64, run there and at 64x96
    config = transformers.DINOv3ViTConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                                          num_attention_heads=2, patch_size=16, num_register_tokens=4, image_size=64)
    with tempfile.TemporaryDirectory() as folder:
        torch.manual_seed(3)
        pretrained = perturbed(transformers.DINOv3ViTModel(config), 4).eval()
        pretrained.save_pretrained(folder)
        dinov3_file = {k: v.clone() for k, v in pretrained.state_dict().items()}
        encoder = vit_module.ViT((64, 64), 16, folder)
        model = perturbed(EoMT(encoder, **HEAD), 5).eval()
        inputs = {'64x64': torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(6)),
                  '64x96': torch.rand(2, 3, 64, 96, generator=torch.Generator().manual_seed(7))}
        outputs = {}
        for size, x in inputs.items():
            model.encoder.backbone.patch_embed.grid_size = (x.shape[2] // 16, x.shape[3] // 16)
            outputs[size] = run(model, x)
        model.encoder.backbone.patch_embed.grid_size = (4, 4)
        full = lightning_state(model)
        cases['dinov3'] = dict(state=full, inputs=inputs, outputs=outputs)

        # the same trained weights as the authors' deltas to the pretrained DINOv3, loaded their way
        methods = authors_methods(repo)
        holder = nn.Module()
        holder.network = EoMT(vit_module.ViT((64, 64), 16, folder), **HEAD).eval()
        methods['_zero_init_outside_encoder'](holder)
        current = {k: v.clone() for k, v in holder.state_dict().items()}
        deltas = {k: full[k] - current[k] for k in current}
        deltas['criterion.empty_weight'] = full['criterion.empty_weight']
        ckpt = {k: v for k, v in deltas.items() if 'criterion.empty_weight' not in k}  # their _load_ckpt
        holder.load_state_dict(methods['_add_state_dicts'](holder, current, ckpt))
        x = inputs['64x64']
        cases['dinov3_deltas'] = dict(state=deltas, dinov3=dinov3_file, inputs={'64x64': x},
                                      outputs={'64x64': run(holder.network, x)})

    cases['made_with'] = dict(repo='tue-mps/eomt', commit='7bd19ddd621c5c6adedcd260458a34783cd4a45f',
                              transformers=str(transformers.__version__), timm=str(timm.__version__),
                              torch=str(torch.__version__))
    torch.save(cases, REFERENCE)
    print(f"wrote {REFERENCE} ({REFERENCE.stat().st_size // 1024} KiB)")


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
