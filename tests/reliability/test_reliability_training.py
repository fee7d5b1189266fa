"""Issue 20, training: config mistakes caught before anything is built (hook keys, value types, unknown types), a
diverging run naming a checkpoint that was good, and a model with more classes than its data said once."""
from pathlib import Path

import pytest

import zoo
from heads.engine import DivergedError
from heads.engine.config.check import ConfigKeyError, ConfigTypeError
from zoo.option_types import OptionTypeError

ROOT = Path(__file__).resolve().parents[2]
import train as train_tool  # noqa: E402


@pytest.fixture(autouse=True)
def _in_project_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def options(work_dir, *extra):
    return ['configs/quickstart.py', '--work-dir', str(work_dir), '--cfg-options', *extra]


# ------------------------------------------------------------------------------------------ 5: hook keys
def test_a_misspelled_hook_key_is_named_before_building(tmp_path):
    with pytest.raises(ConfigKeyError, match=r"config key default_hooks\.checkpoint\.max_keep_ckpt is not accepted "
                                             r"by CheckpointHook .*max_keep_ckpts"):
        train_tool.main(options(tmp_path, 'default_hooks.checkpoint.max_keep_ckpt=2', 'train_cfg.max_iters=1',
                                'default_hooks.checkpoint.interval=1'))  # without the check: fails at the save
    assert not any(tmp_path.iterdir())  # before the runner made its work dir


# ------------------------------------------------------------------------------------------ 11: value types
@pytest.mark.parametrize('option, message', [
    ('model.decode_head.num_classes=abc', r"config key model\.decode_head\.num_classes: DPTSegHead "
                                          r"\(heads\.decode_heads\.dpt\) expects int, got 'abc' \(str\)"),
    ('model.backbone.depth=two', r"config key model\.backbone\.depth: vit_tiny_patch16_224 \(ViTBackbone\) expects "
                                 r"int, got 'two' \(str\)"),
    ('model.neck.hidden_channels=32', r"config key model\.neck\.hidden_channels: DPTNeck .* expects .*got 32 \(int\)"),
    ('optim_wrapper.optimizer.type=AdamWW', r"config key optim_wrapper\.optimizer\.type: 'AdamWW' is not a "
                                            r"registered type\. Did you mean AdamW"),
])
def test_a_value_of_the_wrong_type_is_named_before_building(tmp_path, option, message):
    with pytest.raises(ConfigTypeError, match=message):
        train_tool.main(options(tmp_path, option))
    assert not any(tmp_path.iterdir())


def test_backbone_options_are_type_checked_through_the_api_too():
    with pytest.raises(OptionTypeError, match=r"option depth expects int, got 'two' \(str\)"):
        zoo.create_backbone('vit_tiny_patch16_224', depth='two')
    with pytest.raises(OptionTypeError, match=r"option img_size expects int \| tuple\[int, int\], got 'big'"):
        zoo.create_backbone('cvt_13_224', img_size='big')


# ------------------------------------------------------------------------------------------ 6: the good checkpoint
SPIKE_CONFIG = """_base_ = ['{root}/configs/quickstart.py']
# a sane learning rate for four iterations, then one 300x too high: the loss spikes at iteration 6 and the
# weights are NaN at iteration 7; every checkpoint from iter_5 on holds finite but ruined weights
param_scheduler = [dict(type='MultiStepLR', by_epoch=False, milestones=[4], gamma=300.0)]
"""


@pytest.mark.slow
def test_divergence_names_a_checkpoint_saved_before_the_loss_spiked(tmp_path):
    config = tmp_path / 'spike.py'
    config.write_text(SPIKE_CONFIG.format(root=ROOT))
    args = [str(config), '--work-dir', str(tmp_path / 'run'), '--cfg-options', 'train_cfg.max_iters=12',
            'train_cfg.val_interval=12', 'default_hooks.checkpoint.interval=1',
            'default_hooks.checkpoint.max_keep_ckpts=-1', 'default_hooks.checkpoint.save_optimizer=False',
            'train_dataloader.batch_size=4',
            'train_dataloader.dataset.num_samples=16', 'val_dataloader.dataset.num_samples=2']
    with pytest.raises(DivergedError) as err:
        train_tool.main(args)
    message = str(err.value)
    assert 'The last good checkpoint is ' + str(tmp_path / 'run' / 'iter_4.pth') in message
    assert 'the newest one whose weights gave a steady, finite loss in the iteration after it was saved' in message
    assert 'not iter_5.pth (the loss after it was spiking: from iteration 6 on' in message
    assert f"--resume {tmp_path / 'run' / 'iter_4.pth'}" in message
    kept = sorted(p.name for p in (tmp_path / 'run').glob('iter_*.pth'))
    assert kept[:5] == [f'iter_{i}.pth' for i in range(1, 6)]  # nothing is deleted


# ------------------------------------------------------------------------------------------ 14: more classes
@pytest.mark.slow
def test_more_model_classes_than_dataset_classes_is_said_once(tmp_path):
    runner = train_tool.main(options(tmp_path, 'model.decode_head.num_classes=6', 'train_cfg.max_iters=2',
                                     'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=2',
                                     'train_dataloader.batch_size=2', 'train_dataloader.dataset.num_samples=4',
                                     'val_dataloader.dataset.num_samples=2'))
    assert runner.iter == 2  # a warning, not an error: extra classes can be meant for later data
    log = next(tmp_path.glob('*/*.log')).read_text()
    assert log.count('the model predicts 6 classes (model.decode_head.num_classes) but the training set '
                     'SyntheticScenes has 4 (sky, ground, box, disc)') == 1
