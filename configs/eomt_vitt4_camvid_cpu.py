# EoMT on CamVid sized for a CPU, beside configs/dpt_vitt4_camvid_cpu.py (the same ViT-Ti with 4 blocks from scratch,
# images, augmentation and schedule): 50 queries join the tokens before the last 2 blocks, masks at stride 4; the
# masked attention anneals block by block (MaskAnnealingHook: block i from (i + 1) / 4 to (i + 2) / 4 of the run),
# so that evaluation runs without masks. Semantic results (class scores = softmax classes x sigmoid masks).
#   python tools/train.py configs/eomt_vitt4_camvid_cpu.py --data-root ../shared/data/camvid
_base_ = ['dpt_vitt4_camvid_cpu.py']
model = dict(
    _delete_=True,
    type='EoMT',
    backbone=dict(type='ZooBackbone', name='vit_tiny_patch16_224', depth=4, drop_path_rate=0.0),
    num_classes={{_base_.num_classes}}, num_queries=50, num_blocks=2,
    loss=dict(num_points=4096),  # of a 176x240 crop's 42240 pixels (the recipe's 12544 are for 640x640)
    data_preprocessor=dict(type='DensePreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           size_divisor=16, pad_val=0, seg_pad_val=255),  # DPT's, at EoMT's input multiple
    test_cfg=dict(tasks=('semantic',)))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'query': dict(decay_mult=0.0)}))
custom_hooks = [dict(type='SafeCheckpointHook'), dict(type='PredictionVisualizationHook'),
                dict(type='MaskAnnealingHook')]
