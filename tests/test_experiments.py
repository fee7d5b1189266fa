"""tools/experiment.py (heads.experiments): the exercises run end to end, on a few scenes and iterations, and
write their table and plots; the LoRA exercise finds gradients on the adapter only."""
import json

import torch

from heads import experiments


def test_roughness_and_entropy_are_what_they_say():
    flat = torch.full((1, 4, 4), 1 / 16)
    entropy, roughness = experiments.entropy_and_roughness(flat)
    assert abs(entropy - torch.log(torch.tensor(16.0)).item()) < 1e-5 and roughness == 0.0
    spike = torch.zeros(1, 4, 4)
    spike[0, 1, 1] = 1.0
    entropy, roughness = experiments.entropy_and_roughness(spike)
    # 4 neighbour steps of 1 among 24, over the mean weight 1/16
    assert abs(entropy) < 1e-5 and abs(roughness - 4 / 24 * 16) < 1e-5


def test_exercises_write_their_table_and_plots(tmp_path):
    results = experiments.run(tmp_path, exercises=('registers', 'lora', 'positions'), iters=2, train_count=16,
                              val_count=4, log=lambda *_: None)
    assert results['lora']['only_adapters']
    assert results['lora']['with_gradient'] == ['backbone.blocks.1.attn.qkv.lora_a',
                                                'backbone.blocks.1.attn.qkv.lora_b']
    assert set(results['positions']) == {'learned', 'sincos', 'rope', 'alibi', 'none'}
    assert all(0 <= r['miou'] <= 100 and 0 <= r['miou_large'] <= 100 for r in results['positions'].values())
    assert json.loads((tmp_path / 'results.json').read_text()).keys() == results.keys()
    table = (tmp_path / 'results.md').read_text()
    assert '| rope |' in table and '| 4 registers |' in table
    assert (tmp_path / 'positions_miou.png').stat().st_size > 0 and (tmp_path / 'registers_attention.png').exists()
