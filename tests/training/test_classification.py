"""Image-level training: ImageFolder data, the classifier task model, top-k accuracy, layer-wise lr decay, and a
short CPU run on patches of real CamVid images that beats predicting the majority class."""
import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.optim import build_optim_wrapper
from mmengine.registry import DefaultScope
from mmengine.structures import BaseDataElement

from heads.datasets import ImageFolderDataset
from heads.evaluation.metrics import AccuracyMetric
from heads.models import ImageClassifier
from heads.registry import MODELS

from ..reference import shared_data
from ..training_logs import logged

ROOT = Path(__file__).resolve().parents[2]
import make_patch_dataset  # noqa: E402
import train as train_tool  # noqa: E402

PIPELINE = [dict(type='LoadImage'), dict(type='PackDenseInputs')]


def image_folder(root: Path, counts: dict) -> Path:
    for name, count in counts.items():
        (root / 'train' / name).mkdir(parents=True)
        for i in range(count):
            cv2.imwrite(str(root / 'train' / name / f'{i}.png'), np.full((8, 8, 3), 10 * i, np.uint8))
    return root


def test_image_folder_labels_follow_the_class_order(tmp_path):
    root = image_folder(tmp_path, {'cat': 2, 'dog': 1})
    dataset = ImageFolderDataset(str(root), pipeline=PIPELINE)
    assert dataset.metainfo['classes'] == ('cat', 'dog') and len(dataset) == 3
    assert [dataset.get_data_info(i)['gt_label'] for i in range(3)] == [0, 0, 1]
    assert int(dataset[2]['data_samples'].gt_label) == 1
    named = ImageFolderDataset(str(root), classes=('dog', 'cat', 'bird'), pipeline=PIPELINE)  # bird: no folder
    assert [named.get_data_info(i)['gt_label'] for i in range(3)] == [0, 1, 1]


def test_image_folder_errors_name_the_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'nowhere/train does not exist.*ImageFolder'):
        ImageFolderDataset(str(tmp_path / 'nowhere'))
    (tmp_path / 'train' / 'empty_class').mkdir(parents=True)
    with pytest.raises(ValueError, match='holds no images'):
        ImageFolderDataset(str(tmp_path))


def test_top_k_accuracy_counts_labels_among_the_k_best_scores():
    torch.manual_seed(0)
    scores, labels = torch.rand(50, 7), torch.randint(0, 7, (50,))
    metric = AccuracyMetric(topk=(1, 3, 5))
    metric.process(None, [{'pred_score': s, 'gt_label': y} for s, y in zip(scores, labels)])
    result = metric.compute_metrics(metric.results)
    for k in (1, 3, 5):
        expected = 100 * (scores.topk(k, dim=1).indices == labels[:, None]).any(1).float().mean().item()
        assert result[f'top{k}'] == pytest.approx(expected)


def tiny_classifier(**kwargs):
    torch.manual_seed(0)
    return ImageClassifier(backbone=dict(name='vit_tiny_patch16_224', depth=4, img_size=32, patch_size=8),
                           num_classes=5, **kwargs)


def samples(labels=None, scores=None):
    out = []
    for i in range(len(labels if labels is not None else scores)):
        sample = BaseDataElement()
        if labels is not None:
            sample.gt_label = torch.tensor(labels[i])
        if scores is not None:
            sample.gt_score = scores[i]
        out.append(sample)
    return out


def test_classifier_loss_is_label_smoothed_cross_entropy():
    model, eps = tiny_classifier(label_smoothing=0.1), 0.1
    x, labels = torch.randn(3, 3, 32, 32), [0, 4, 2]
    log_p = model(x).log_softmax(-1)
    expected = -((1 - eps) * log_p[torch.arange(3), labels] + eps / 5 * log_p.sum(-1)).mean()
    torch.testing.assert_close(model(x, samples(labels), mode='loss')['loss_cls'], expected)
    mixed = torch.tensor([[0.7, 0.3, 0, 0, 0], [0, 0, 1.0, 0, 0], [0.2, 0, 0, 0, 0.8]])  # e.g. Mixup targets
    smoothed = (1 - eps) * mixed + eps / 5
    torch.testing.assert_close(model(x, samples(scores=mixed), mode='loss')['loss_cls'],
                               -(smoothed * log_p).sum(-1).mean())
    with pytest.raises(ValueError, match=r"labels \[7\] are outside the model's 5 classes"):
        model(x, samples([0, 7, 1]), mode='loss')


def test_prediction_scores_and_labels():
    model = tiny_classifier().eval()
    x = torch.randn(2, 3, 32, 32)
    out = model(x, samples([1, 2]), mode='predict')
    torch.testing.assert_close(torch.stack([s.pred_score for s in out]), model(x).softmax(-1))
    assert [int(s.pred_label) for s in out] == model(x).argmax(-1).tolist()


def lr_scales(model, backbone, rate=0.5):
    with DefaultScope.overwrite_default_scope('heads'):  # as configs set default_scope: this project's registries
        wrapper = build_optim_wrapper(model, dict(
            optimizer=dict(type='AdamW', lr=1.0, weight_decay=0.05), constructor='LayerDecayOptimWrapperConstructor',
            paramwise_cfg=dict(layer_decay_rate=rate, backbone=backbone)))
    return {g['name']: (g['lr'], g['weight_decay']) for g in wrapper.optimizer.param_groups}


def test_layer_decay_scales_each_block_by_depth():
    groups = lr_scales(tiny_classifier(), 'classifier')  # ViT with 4 blocks: L = 4, scale 0.5 ** (5 - layer)
    assert groups['classifier.patch_embed.proj.weight'] == (0.5 ** 5, 0.05)
    assert groups['classifier.prefix.cls'] == (0.5 ** 5, 0.0)  # no weight decay on tokens
    for i in range(4):
        assert groups[f'classifier.blocks.{i}.attn.qkv.weight'] == (0.5 ** (4 - i), 0.05)
        assert groups[f'classifier.blocks.{i}.norm1.weight'][1] == 0.0  # nor on norms and biases
    assert groups['classifier.norm.weight'][0] == 0.5  # registered after the last block: its layer
    assert groups['classifier.head.weight'] == (1.0, 0.05)


@pytest.mark.parametrize('name, overrides, blocks', [
    ('cvt_13_224', dict(depths=[1, 1, 2]), 4), ('coatnet_0_rw_224', dict(depths=[1, 1, 1, 1]), 4),
    ('crossvit_tiny_240', dict(depths=[[1, 1, 0], [1, 1, 0]], out_indices=[0, 0, 1, 1]), 2)])
def test_layer_decay_follows_depth_in_every_family_and_leaves_the_dense_head_alone(name, overrides, blocks):
    model = MODELS.build(dict(type='Segmentor', backbone=dict(type='ZooBackbone', name=name, **overrides),
                              neck=dict(type='DPTNeck', hidden_channels=(16, 16, 16, 16), fusion_channels=16),
                              decode_head=dict(type='DPTSegHead', num_classes=3, in_channels=16)))
    groups = lr_scales(model, 'backbone')
    backbone = [lr for key, (lr, _) in groups.items() if key.startswith('backbone.')]
    assert backbone == sorted(backbone)  # registration order is depth order: never decreasing
    assert math.isclose(backbone[0], 0.5 ** (blocks + 1)) and math.isclose(backbone[-1], 0.5)
    assert all(lr == 1.0 for key, (lr, _) in groups.items() if not key.startswith('backbone.'))


def test_layer_decay_exempts_what_the_model_declares_coatnet_position_tables_included():
    """The exemptions come from the modules that own the parameters (zoo.core.NoWeightDecay): CoAtNet's relative
    position tables ('attn.pos_bias.table') get no weight decay, as timm's no_weight_decay lists them."""
    model = MODELS.build(dict(type='Segmentor', backbone=dict(type='ZooBackbone', name='coatnet_0_rw_224',
                                                               depths=[1, 1, 1, 1]),
                              neck=dict(type='DPTNeck', hidden_channels=(16, 16, 16, 16), fusion_channels=16),
                              decode_head=dict(type='DPTSegHead', num_classes=3, in_channels=16)))
    groups = lr_scales(model, 'backbone')
    tables = [name for name in groups if name.endswith('pos_bias.table')]
    assert tables and all(groups[name][1] == 0.0 for name in tables)
    assert {name[len('backbone.'):] for name in tables} <= model.backbone.no_weight_decay()
    assert groups['backbone.stages.2.blocks.0.attn.qkv.weight'][1] == 0.05  # weights keep their decay


@pytest.mark.slow
def test_short_run_on_camvid_patches_beats_the_majority_class(tmp_path, monkeypatch):
    """ViT-Ti (4 blocks, 8x8 patches) on 64x64 patches of every 6th CamVid image of each split (a patch is
    labelled by a class covering 75% of it): validation top-1 well above always answering the majority class."""
    monkeypatch.chdir(ROOT)
    counts = make_patch_dataset.main([str(shared_data('camvid')), str(tmp_path / 'patches'), '--size', '64',
                                      '--every', '6'])
    majority = 100 * max(counts['val'].values()) / sum(counts['val'].values())
    train_tool.main(['configs/cls_vitt_camvid_patches.py', '--data-root', str(tmp_path / 'patches'),
                     '--work-dir', str(tmp_path / 'work'), '--cfg-options', 'train_cfg.max_iters=150',
                     'train_cfg.val_interval=150', 'param_scheduler.1.end=150',
                     'default_hooks.checkpoint.interval=150'])
    _, metrics = logged(tmp_path / 'work')
    print(f"CamVid patches val top-1 {metrics['top1']:.1f} (majority class {majority:.1f}), "
          f"top-5 {metrics['top5']:.1f}")
    assert metrics['top1'] > majority + 15


# --------------------------------------------------------------------------------------------- distillation
def test_soft_distillation_is_kl_at_temperature_with_the_t_squared_factor():
    from heads.losses.distillation import distillation_loss
    torch.manual_seed(0)
    cls, dist, teacher, labels = torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 6), torch.tensor([0, 5, 2, 2])
    tau, alpha = 3.0, 0.4
    p_teacher = (teacher / tau).softmax(-1)
    kl = (p_teacher * (p_teacher.log() - (dist / tau).log_softmax(-1))).sum(-1).mean()
    ce = -cls.log_softmax(-1)[torch.arange(4), labels].mean()
    expected = (1 - alpha) * ce + alpha * tau ** 2 * kl
    torch.testing.assert_close(distillation_loss(cls, dist, teacher, labels, 'soft', alpha, tau), expected)


def test_hard_distillation_trains_the_dist_head_on_the_teacher_argmax():
    from heads.losses.distillation import distillation_loss
    torch.manual_seed(1)
    cls, dist, teacher, labels = torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 6), torch.tensor([1, 1, 3, 0])
    teacher_labels = teacher.argmax(-1)
    expected = 0.5 * -cls.log_softmax(-1)[torch.arange(4), labels].mean() + \
        0.5 * -dist.log_softmax(-1)[torch.arange(4), teacher_labels].mean()
    torch.testing.assert_close(distillation_loss(cls, dist, teacher, labels, 'hard'), expected)
    with pytest.raises(ValueError, match="one of \\('soft', 'hard'\\)"):
        distillation_loss(cls, dist, teacher, labels, 'medium')


def test_deit_student_with_a_torchvision_teacher_from_a_local_file(tmp_path):
    import torchvision
    from safetensors.torch import save_file

    from heads.losses.distillation import distillation_loss
    torch.manual_seed(0)
    reference = torchvision.models.resnet18(weights=None, num_classes=5).eval()
    save_file(reference.state_dict(), tmp_path / 'resnet18.safetensors')
    model = ImageClassifier(
        backbone=dict(name='deit_tiny_distilled_patch16_224', depth=2, img_size=32, patch_size=8), num_classes=5,
        distillation=dict(kind='hard', alpha=0.5, teacher=dict(
            name='resnet18', source='torchvision', checkpoint=str(tmp_path / 'resnet18.safetensors'))))
    x, labels = torch.randn(3, 3, 32, 32), [4, 0, 2]
    cls_logits, dist_logits = model.train()(x)
    with torch.no_grad():
        teacher_logits = reference(x)
    expected = distillation_loss(cls_logits, dist_logits, teacher_logits, torch.tensor(labels), 'hard')
    torch.testing.assert_close(model(x, samples(labels), mode='loss')['loss_distill'], expected)
    assert not any(key.startswith('_teacher') or 'layer4' in key for key in model.state_dict())
    assert all(p.requires_grad for p in model.parameters())  # the teacher's are not among them
    model.eval()
    features = model.classifier.forward_features(x)
    averaged = (model.classifier.head(features[:, 0]) + model.classifier.head_dist(features[:, 1])) / 2
    torch.testing.assert_close(model(x), averaged)  # inference: the mean of the two heads


def test_distillation_config_takes_a_teacher_trained_here(tmp_path, monkeypatch):
    """The teacher named by configs/cls_deit_distilled_camvid_patches.py is an ImageClassifier checkpoint of this
    project (keys 'classifier.*' in mmengine's wrapper): its weights arrive in the teacher."""
    from heads.engine.launch import load_config
    monkeypatch.chdir(ROOT)
    trained = ImageClassifier(backbone=dict(name='vit_tiny_patch16_224', depth=4, img_size=64, patch_size=8),
                              num_classes=11)
    torch.save({'meta': {'iter': 300}, 'state_dict': trained.state_dict()}, tmp_path / 'iter_300.pth')
    cfg = load_config('configs/cls_deit_distilled_camvid_patches.py',
                      {'model.distillation.teacher.checkpoint': str(tmp_path / 'iter_300.pth')})
    student = MODELS.build(cfg.model)
    teacher = student._teacher[0]
    assert all(torch.equal(teacher.state_dict()[k], v) for k, v in trained.classifier.state_dict().items())
    assert type(student.classifier).__name__ == 'DistilledClassifier'


# --------------------------------------------------------------------------------------------- augmentation
def mixed(mixing: dict, labels) -> list[tuple[torch.Tensor, torch.Tensor, int, int]]:
    """(image, mixed label row, its index, its partner's) for a batch of constant images (image i is all i + 1, so
    where each output pixel came from can be read off its value) through a ClassificationPreprocessor with
    ``mixing``; torchvision pairs each sample with the previous one in the batch."""
    from heads.models import ClassificationPreprocessor
    pre = ClassificationPreprocessor(num_classes=4, mean=(0, 0, 0), std=(1, 1, 1), size_divisor=1, **mixing)
    inputs = [torch.full((3, 16, 16), float(i + 1)) for i in range(len(labels))]
    out = pre({'inputs': inputs, 'data_samples': samples(labels)}, training=True)
    return [(image, sample.gt_score, i, (i - 1) % len(labels))
            for i, (image, sample) in enumerate(zip(out['inputs'], out['data_samples']))]


def label_row(labels, own: int, partner: int, partner_share: float) -> torch.Tensor:
    row = torch.zeros(4)
    row[labels[own]] += 1 - partner_share
    row[labels[partner]] += partner_share
    return row


def test_mixup_mixes_images_and_labels_with_one_coefficient():
    torch.manual_seed(0)
    labels = [0, 1, 2, 3]
    for image, row, i, partner in mixed(dict(mixup_alpha=1.0), labels):
        lam = (image.mean().item() - (partner + 1)) / ((i + 1) - (partner + 1))  # image = lam x_i + (1-lam) x_p
        torch.testing.assert_close(row, label_row(labels, i, partner, 1 - lam), atol=1e-5, rtol=0)
        assert torch.allclose(image, image.flatten()[0])  # MixUp blends whole images


def test_cutmix_labels_are_mixed_by_the_pasted_area():
    torch.manual_seed(3)
    labels = [3, 1, 0, 2]
    for image, row, i, partner in mixed(dict(cutmix_alpha=1.0), labels):
        pasted = (image[0] == partner + 1).float().mean().item()  # share of pixels from the partner
        assert ((image[0] == i + 1) | (image[0] == partner + 1)).all()
        torch.testing.assert_close(row, label_row(labels, i, partner, pasted), atol=1e-6, rtol=0)


def test_torchvision_transforms_move_the_image_only():
    from heads.registry import TRANSFORMS
    rand_augment = TRANSFORMS.build(dict(type='TorchvisionTransform', transform='RandAugment', num_ops=2,
                                         magnitude=9))
    image = np.random.RandomState(0).randint(0, 255, (32, 48, 3), dtype=np.uint8)
    torch.manual_seed(0)
    out = rand_augment({'img': image.copy()})['img']
    assert out.shape == image.shape and out.dtype == np.uint8 and not np.array_equal(out, image)
    erase = TRANSFORMS.build(dict(type='TorchvisionTransform', transform='RandomErasing', p=1.0, value=0))
    assert (erase({'img': np.full((32, 48, 3), 200, np.uint8)})['img'] == 0).any()
    with pytest.raises(ValueError, match='moves the image only'):
        rand_augment({'img': image, 'gt_seg_map': np.zeros((32, 48), np.uint8), 'seg_fields': ['gt_seg_map']})
    with pytest.raises(ValueError, match="no 'RandAugmint'"):
        TRANSFORMS.build(dict(type='TorchvisionTransform', transform='RandAugmint'))


def test_repeated_augmentation_gives_each_image_several_times_across_processes():
    from heads.datasets import RepeatAugSampler
    dataset = list(range(10))
    single = RepeatAugSampler(dataset, num_repeats=3, seed=0)
    epoch = single.epoch_indices(0)
    assert len(epoch) == 10 and all(epoch[i] == epoch[i + 1] == epoch[i + 2] for i in (0, 3, 6))
    ranks = []
    for rank in (0, 1):
        sampler = RepeatAugSampler(dataset, num_repeats=2, seed=0)
        sampler.rank, sampler.world_size = rank, 2
        ranks.append(sampler.epoch_indices(0))
    assert ranks[0] == ranks[1] and len(ranks[0]) == 5  # copy k of an image on rank k: the same image, in step
    assert single.epoch_indices(1) != epoch  # a new permutation every epoch
    assert [i for _, i in zip(range(25), single)][:10] == epoch


@pytest.mark.slow
def test_deit_recipe_config_trains(tmp_path, monkeypatch):
    """RandAugment, erasing, Mixup/CutMix and repeated augmentation wired through tools/train.py: a few steps."""
    monkeypatch.chdir(ROOT)
    image_folder(tmp_path / 'data', {'Sky': 6, 'Road': 6})
    runner = train_tool.main(['configs/cls_vitt_camvid_patches_deit_aug.py', '--data-root', str(tmp_path / 'data'),
                              '--work-dir', str(tmp_path / 'work'), '--cfg-options', 'train_cfg.max_iters=2',
                              'train_cfg.val_interval=100', 'default_hooks.checkpoint.interval=2',
                              'train_dataloader.batch_size=4', 'val_dataloader.dataset.split=train',
                              'default_hooks.logger.interval=1'])
    assert type(runner.train_dataloader.sampler).__name__ == 'RepeatAugSampler'
    losses, _ = logged(tmp_path / 'work')
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses.values())


def test_attention_pooling_is_a_learned_query_over_the_patch_tokens():
    from zoo.core import AttentionPool
    model = tiny_classifier(pooling='attention').eval()
    vit = model.classifier
    x = torch.randn(2, 3, 32, 32)
    tokens = vit.forward_features(x)[:, 1:]  # b n d, patch tokens only
    pool = vit.attn_pool
    keys = torch.cat([pool.query.expand(2, -1, -1), tokens], dim=1)  # the query attends to itself and the tokens
    q = pool.attn.qkv.q(pool.query).expand(2, -1, -1)  # b 1 d
    k, v = pool.attn.qkv.k(keys), pool.attn.qkv.v(keys)  # b (1 + n) d
    heads = pool.attn.num_heads
    split = lambda t: t.reshape(t.shape[0], t.shape[1], heads, -1).transpose(1, 2)  # noqa: E731 b h n e
    weights = (split(q) @ split(k).transpose(-2, -1) * pool.attn.scale).softmax(-1)  # b h 1 n
    pooled = pool.attn.proj((weights @ split(v)).transpose(1, 2).reshape(2, -1))
    torch.testing.assert_close(model(x), vit.head(vit.fc_norm(pooled)), rtol=1e-4, atol=1e-5)
    assert isinstance(pool, AttentionPool) and tuple(weights.shape[-2:]) == (1, 1 + tokens.shape[1])
