"""Hungarian matching and the mask-classification loss against transformers' Mask2Former and EoMT criteria.

Both sides draw their random points from torch's global generator in the same order (the matcher's uniform points
per image, then the uncertainty candidates and uniform points of the mask losses, layer by layer), so seeding it
identically before each side makes them read the same points; the values then agree to float rounding."""
import pytest
import torch

from heads.losses.mask_classification import MaskClassificationLoss, dice_loss, uncertain_points
from heads.losses.mask_matching import MaskMatcher, gather_points, pairwise_dice, pairwise_sigmoid_ce, sample_points

NUM_CLASSES = 5
POINTS = 300


def fixed_batch(seed=0, layers=3):
    """Per layer class logits 'b q c+1' and mask logits 'b q 12 20' (non-square, coarser than the targets), and
    per image labels and masks at 48x80, derived from label maps (image 1 has an ignored band)."""
    g = torch.Generator().manual_seed(seed)
    outputs = [(torch.randn(2, 8, NUM_CLASSES + 1, generator=g) * 2, torch.randn(2, 8, 12, 20, generator=g) * 3)
               for _ in range(layers)]
    seg = torch.randint(0, NUM_CLASSES, (2, 6, 10), generator=g).repeat_interleave(8, 1).repeat_interleave(8, 2)
    seg[0][seg[0] == 4] = 2  # image 0 without class 4
    seg[1, :8] = 255
    labels, masks = [], []
    for s in seg:
        classes = s.unique()
        classes = classes[classes != 255]
        labels.append(classes)
        masks.append(s[None] == classes[:, None, None])
    return outputs, labels, masks


def hf_config():
    transformers = pytest.importorskip('transformers')
    return transformers.Mask2FormerConfig(num_labels=NUM_CLASSES, train_num_points=POINTS, oversample_ratio=3.0,
                                          importance_sample_ratio=0.75, no_object_weight=0.1, class_weight=2.0,
                                          mask_weight=5.0, dice_weight=5.0, use_pretrained_backbone=False)


def test_pairwise_costs_equal_the_elementwise_losses():
    g = torch.Generator().manual_seed(1)
    logits, targets = torch.randn(4, 50, generator=g) * 3, (torch.rand(3, 50, generator=g) > 0.5).float()
    for q in range(4):
        for t in range(3):
            bce = torch.nn.functional.binary_cross_entropy_with_logits(logits[q], targets[t])
            torch.testing.assert_close(pairwise_sigmoid_ce(logits, targets)[q, t], bce)
            torch.testing.assert_close(pairwise_dice(logits, targets)[q, t], dice_loss(logits[q:q + 1],
                                                                                        targets[t:t + 1])[0])
    p = logits[0].sigmoid()  # dice by hand: 1 - (2 sum(p y) + 1) / (sum p + sum y + 1)
    expected = 1 - (2 * (p * targets[0]).sum() + 1) / (p.sum() + targets[0].sum() + 1)
    torch.testing.assert_close(pairwise_dice(logits, targets)[0, 0], expected)


def test_sample_points_reads_pixel_centres():
    maps = torch.arange(12.0).view(1, 3, 4)
    centres = torch.tensor([[[0.5 / 4, 0.5 / 3], [3.5 / 4, 2.5 / 3], [1.5 / 4, 1.5 / 3]]])  # (x, y)
    torch.testing.assert_close(sample_points(maps, centres), torch.tensor([[0.0, 11.0, 5.0]]))


def test_gather_points_equal_grid_sample_values_and_gradients():
    """The deterministic path (CUDA under deterministic algorithms) against grid_sample, also at the borders and
    outside the map (zeros)."""
    maps = torch.randn(3, 7, 11, requires_grad=True)
    points = torch.cat([torch.rand(3, 50, 2), torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.02, 0.99],
                                                            [1.0, 0.0]]).expand(3, -1, -1)], dim=1)
    ours = gather_points(maps, points)
    theirs = sample_points(maps, points)  # grid_sample on the CPU
    torch.testing.assert_close(ours, theirs)
    weights = torch.randn_like(ours)
    grad_ours, = torch.autograd.grad((ours * weights).sum(), maps)
    grad_theirs, = torch.autograd.grad((theirs * weights).sum(), maps)
    torch.testing.assert_close(grad_ours, grad_theirs)


def graph_ops(tensor) -> set[str]:
    """The names of the backward nodes that ``tensor`` depends on."""
    seen, stack = {}, [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and id(node) not in seen:
            seen[id(node)] = node.name()
            stack.extend(next_fn for next_fn, _ in node.next_functions)
    return set(seen.values())


def test_sample_points_gathers_under_deterministic_algorithms(monkeypatch):
    import heads.losses.mask_matching as matching
    maps, points = torch.randn(2, 5, 5, requires_grad=True), torch.rand(2, 9, 2)
    assert 'GridSampler2DBackward0' in graph_ops(sample_points(maps, points))
    calls = []
    monkeypatch.setattr(matching, 'gather_points', lambda *args: calls.append(1) or gather_points(*args))
    monkeypatch.setattr(matching, 'NONDETERMINISTIC_BACKWARD', {'cpu'})  # as CUDA is treated
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        ops = graph_ops(sample_points(maps, points))
        assert 'GatherBackward0' in ops and 'GridSampler2DBackward0' not in ops and len(calls) == 1
        sample_points(maps.detach(), points)  # no gradient needed: grid_sample
        with torch.no_grad():
            sample_points(maps, points)
        assert len(calls) == 1
    finally:
        torch.use_deterministic_algorithms(deterministic)


def test_matching_prefers_the_query_that_predicts_the_target():
    masks = torch.zeros(2, 16, 16)
    masks[0, :8], masks[1, 8:] = 1, 1
    mask_logits = torch.full((1, 4, 16, 16), -10.0)
    mask_logits[0, 3] = masks[0] * 20 - 10  # query 3 draws target 0, query 1 target 1
    mask_logits[0, 1] = masks[1] * 20 - 10
    class_logits = torch.zeros(1, 4, 3)
    torch.manual_seed(0)
    (rows, cols), = MaskMatcher(num_points=200)(class_logits, mask_logits, [torch.tensor([0, 1])], [masks])
    assert dict(zip(cols.tolist(), rows.tolist())) == {0: 3, 1: 1}


def test_matching_chooses_queries_with_invalid_costs_last():
    masks = torch.zeros(1, 8, 8)
    masks[0, :4] = 1
    mask_logits = masks[None].expand(1, 3, 8, 8) * 20 - 10  # every query draws the target
    mask_logits[0, 0] = float('nan')  # query 0 is the best by class but its mask is invalid
    class_logits = torch.tensor([[[9.0, 0, 0], [0, 0, 0], [0, 0, 0]]])
    (rows, cols), = MaskMatcher(num_points=50)(class_logits, mask_logits, [torch.tensor([0])], [masks])
    assert rows.tolist() in ([1], [2]) and cols.tolist() == [0]


def test_matching_equals_transformers():
    from transformers.models.mask2former.modeling_mask2former import Mask2FormerHungarianMatcher
    outputs, labels, masks = fixed_batch()
    for class_logits, mask_logits in outputs:
        torch.manual_seed(3)
        ours = MaskMatcher(2.0, 5.0, 5.0, POINTS)(class_logits, mask_logits, labels, masks)
        torch.manual_seed(3)
        theirs = Mask2FormerHungarianMatcher(2.0, 5.0, 5.0, POINTS)(mask_logits, class_logits, masks, labels)
        for (rows, cols), (hf_rows, hf_cols) in zip(ours, theirs):
            assert rows.tolist() == hf_rows.tolist() and cols.tolist() == hf_cols.tolist()
    assert any(cols.tolist() != sorted(cols.tolist()) for _, cols in ours)  # not an identity-like assignment


def test_uncertain_points_keep_the_logits_nearest_zero():
    logits = torch.linspace(-5, 5, 64).view(1, 8, 8)
    torch.manual_seed(0)
    points = uncertain_points(logits, 40, 3.0, 0.75)
    assert points.shape == (1, 40, 2)
    values = sample_points(logits, points)[0]
    torch.manual_seed(0)
    candidates = sample_points(logits, torch.rand(1, 120, 2))[0]
    torch.testing.assert_close(values[:30].abs().sort().values, candidates.abs().sort().values[:30])


def weighted(losses, weights=(('loss_cross_entropy', 2.0), ('loss_mask', 5.0), ('loss_dice', 5.0))):
    return {key: value * next(w for name, w in weights if name in key) for key, value in losses.items()}


def test_loss_equals_transformers_mask2former_loss_with_aux_layers():
    from transformers.models.mask2former.modeling_mask2former import Mask2FormerLoss
    outputs, labels, masks = fixed_batch()
    aux = outputs[-1], outputs[:-1]
    leaves = [t.clone().requires_grad_() for pair in outputs for t in pair]
    theirs_leaves = [t.detach().clone().requires_grad_() for t in leaves]
    ours_fn = MaskClassificationLoss(NUM_CLASSES, num_points=POINTS)
    layers = [('', leaves[-2], leaves[-1])] + [(f'_{i}', leaves[2 * i], leaves[2 * i + 1]) for i in range(len(aux))]
    torch.manual_seed(7)
    ours = ours_fn(layers, labels, masks)
    criterion = Mask2FormerLoss(hf_config(), weight_dict={})
    torch.manual_seed(7)
    hf_aux = [{'class_queries_logits': theirs_leaves[2 * i], 'masks_queries_logits': theirs_leaves[2 * i + 1]}
              for i in range(len(aux))]
    theirs = weighted(criterion(theirs_leaves[-1], theirs_leaves[-2], [m.float() for m in masks], labels,
                                auxiliary_predictions=hf_aux))
    assert len(ours) == len(theirs) == 9
    for key, value in ours.items():
        torch.testing.assert_close(value, theirs[key.replace('loss_cls', 'loss_cross_entropy')], rtol=1e-5, atol=1e-6)
        assert value > 0.01
    sum(ours.values()).backward()
    sum(theirs.values()).backward()
    for mine, reference in zip(leaves, theirs_leaves):
        torch.testing.assert_close(mine.grad, reference.grad, rtol=1e-4, atol=1e-7)


def test_loss_equals_transformers_eomt_loss_layer_by_layer():
    """EomtLoss is Mask2FormerLoss under another name (same matcher, terms and sampling); EoMT supervises its
    intermediate predictions first and the final one last, each on its own, which loss_layers' order expresses."""
    transformers = pytest.importorskip('transformers')
    from transformers.models.eomt.modeling_eomt import EomtLoss
    outputs, labels, masks = fixed_batch(seed=5)
    config = transformers.EomtConfig(num_labels=NUM_CLASSES, train_num_points=POINTS)
    torch.manual_seed(11)
    ours = MaskClassificationLoss(NUM_CLASSES, num_points=POINTS)(
        [(f'_{i}', c, m) for i, (c, m) in enumerate(outputs)], labels, masks)
    torch.manual_seed(11)
    criterion = EomtLoss(config, weight_dict={})
    for i, (class_logits, mask_logits) in enumerate(outputs):
        theirs = weighted(criterion(mask_logits, class_logits, [m.float() for m in masks], labels))
        torch.testing.assert_close(ours[f'loss_cls_{i}'], theirs['loss_cross_entropy'], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ours[f'loss_mask_{i}'], theirs['loss_mask'], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ours[f'loss_dice_{i}'], theirs['loss_dice'], rtol=1e-5, atol=1e-6)


def semantic_targets(seg):
    labels = [s.unique() for s in seg]
    return labels, [(s[None] == lab[:, None, None]).float() for s, lab in zip(seg, labels)]


@torch.no_grad()
def test_loss_equals_transformers_mask2former_model_loss():
    """The loss of transformers' whole model on a batch (its final and auxiliary predictions; eval mode, so that the
    forward draws no random numbers) equals ours on its outputs under the same seed."""
    transformers = pytest.importorskip('transformers')
    swin = transformers.SwinConfig(image_size=64, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2],
                                   window_size=4, out_features=['stage1', 'stage2', 'stage3', 'stage4'])
    config = transformers.Mask2FormerConfig(
        backbone_config=swin, num_labels=NUM_CLASSES, num_queries=8, hidden_dim=32, mask_feature_size=32,
        feature_size=32, encoder_layers=1, decoder_layers=3, num_attention_heads=2, dim_feedforward=64,
        encoder_feedforward_dim=64, train_num_points=POINTS, use_pretrained_backbone=False)
    model = transformers.Mask2FormerForUniversalSegmentation(config).eval()
    labels, masks = semantic_targets(torch.randint(0, NUM_CLASSES, (2, 64, 96)))
    x = torch.randn(2, 3, 64, 96)
    torch.manual_seed(2)
    out = model(x, mask_labels=masks, class_labels=labels, output_auxiliary_logits=True)
    layers = [('', out.class_queries_logits, out.masks_queries_logits)] + [
        (f'_{i}', aux['class_queries_logits'], aux['masks_queries_logits'])
        for i, aux in enumerate(out.auxiliary_logits)]
    torch.manual_seed(2)
    ours = MaskClassificationLoss(NUM_CLASSES, num_points=POINTS)(layers, labels, masks)
    assert len(ours) == 3 * len(layers) and len(layers) > 1
    torch.testing.assert_close(sum(ours.values()), out.loss, rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_loss_equals_transformers_eomt_model_loss():
    """EoMT supervises the prediction before each of its last blocks, then the final one: its model's loss equals
    ours over the same layers in that order (eval mode: every block masked, so the forward draws nothing)."""
    transformers = pytest.importorskip('transformers')
    config = transformers.EomtConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, image_size=64,
                                     patch_size=8, num_blocks=2, num_queries=8, num_labels=NUM_CLASSES,
                                     train_num_points=POINTS, num_register_tokens=1)
    model = transformers.EomtForUniversalSegmentation(config).eval()
    predictions, predict = [], model.predict
    model.predict = lambda hidden: predictions.append(predict(hidden)) or predictions[-1]  # records each layer's
    labels, masks = semantic_targets(torch.randint(0, NUM_CLASSES, (2, 64, 64)))
    x = torch.randn(2, 3, 64, 64)
    torch.manual_seed(4)
    out = model(x, mask_labels=masks, class_labels=labels)
    layers = [(f'_{i}', class_logits, mask_logits) for i, (mask_logits, class_logits) in enumerate(predictions)]
    assert len(layers) == 3 and torch.equal(layers[-1][1], out.class_queries_logits)
    torch.manual_seed(4)
    ours = MaskClassificationLoss(NUM_CLASSES, num_points=POINTS)(layers, labels, masks)
    torch.testing.assert_close(sum(ours.values()), out.loss, rtol=1e-5, atol=1e-5)


def test_loss_without_targets_is_the_no_object_loss_and_backpropagates():
    class_logits = torch.randn(2, 4, NUM_CLASSES + 1, requires_grad=True)
    mask_logits = torch.randn(2, 4, 6, 6, requires_grad=True)
    empty = [torch.zeros(0, dtype=torch.int64)] * 2
    losses = MaskClassificationLoss(NUM_CLASSES, num_points=20)([('', class_logits, mask_logits)], empty,
                                                                [torch.zeros(0, 24, 24)] * 2)
    no_object = torch.full((2, 4), NUM_CLASSES)
    torch.testing.assert_close(losses['loss_cls'], 2.0 * torch.nn.functional.cross_entropy(
        class_logits.transpose(1, 2), no_object))
    assert losses['loss_mask'] == 0 and losses['loss_dice'] == 0
    sum(losses.values()).backward()
    assert mask_logits.grad is not None and class_logits.grad.abs().sum() > 0


def test_bad_targets_are_named():
    loss = MaskClassificationLoss(NUM_CLASSES, num_points=20)
    layers = [('', torch.randn(1, 4, NUM_CLASSES + 1), torch.randn(1, 4, 6, 6))]
    with pytest.raises(ValueError, match=r'labels must be in \[0, 5\)'):
        loss(layers, [torch.tensor([5])], [torch.ones(1, 6, 6)])
    with pytest.raises(ValueError, match="same n"):
        loss(layers, [torch.tensor([1, 2])], [torch.ones(1, 6, 6)])
