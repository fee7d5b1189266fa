# Depth Anything V2 ViT-S fine-tuned for relative depth on 7-Scenes (kitchen): the metric recipe's model
# (depth_anything_v2_vits_7scenes.py) with the relative head (ReLU, disparity up to scale and shift, as the released
# relative models), trained with MiDaS' scale-and-shift-invariant loss on disparity (the estimator turns the metric
# ground truth into 1/depth on its valid pixels), the encoder at a tenth of the head's learning rate, and evaluated
# after per-image least-squares scale-and-shift alignment in disparity (DepthMetric alignment
# 'scale_shift_disparity', the MiDaS / Depth Anything zero-shot protocol). Start from a relative checkpoint's
# encoder, DINOv2 weights or from scratch (pretrained=None):
#   python tools/train.py configs/depth_anything_v2_vits_7scenes_relative.py --data-root ../shared/data/depth-7scenes \
#       --cfg-options model.backbone.pretrained=depth_anything_v2_vits.pth
_base_ = ['depth_anything_v2_vits_7scenes.py']
model = dict(decode_head=dict(mode='relative', max_depth=1.0),
             loss=dict(_delete_=True, type='ScaleShiftInvariantLoss', alpha=0.5, scales=4))
val_evaluator = dict(type='DepthMetric', min_depth=1e-3, max_depth=10.0, alignment='scale_shift_disparity')
test_evaluator = val_evaluator
