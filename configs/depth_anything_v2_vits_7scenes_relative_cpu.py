# Depth Anything V2 ViT-S relative depth on 7-Scenes (kitchen) sized for a CPU: the relative recipe
# (depth_anything_v2_vits_7scenes_relative.py) with the CPU-sized schedule and images of
# depth_anything_v2_vits_7scenes_cpu.py (from scratch, 168x126, batch 8, the encoder at the head's learning rate).
# Measured beside the metric run (docs/benchmarks/depth_recipes_intel_xeon.md), scored after scale-and-shift
# alignment in disparity: val AbsRel 0.169 at 100 iterations, 0.167 at 200 (d1 0.727, RMSE 0.340) against 0.280
# (d1 0.472, RMSE 0.482) for the mean-depth predictor so aligned (each image's harmonic-mean depth).
#   python tools/train.py configs/depth_anything_v2_vits_7scenes_relative_cpu.py \
#       --data-root ../shared/data/depth-7scenes
_base_ = ['depth_anything_v2_vits_7scenes_cpu.py']
model = dict(decode_head=dict(mode='relative', max_depth=1.0),
             loss=dict(_delete_=True, type='ScaleShiftInvariantLoss', alpha=0.5, scales=4))
val_evaluator = dict(type='DepthMetric', min_depth=1e-3, max_depth=10.0, alignment='scale_shift_disparity')
test_evaluator = val_evaluator
