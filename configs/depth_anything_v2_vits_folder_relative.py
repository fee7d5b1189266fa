# Depth Anything V2 ViT-S relative depth on one's own RGB-D folder: depth_anything_v2_vits_folder.py (the folder
# layout, the data root from --data-root) with the relative recipe of depth_anything_v2_vits_7scenes_relative.py
# (ReLU head giving disparity, scale-and-shift-invariant loss on 1/depth, evaluated after scale-and-shift alignment
# in disparity). The folder's depth may then be known only up to scale (e.g. a stereo disparity inverted):
#   python tools/check_dataset.py DIR --depth-scale 1000 --depth-invalid 0 65535
#   python tools/depth_baseline.py configs/depth_anything_v2_vits_folder_relative.py --data-root DIR
#   python tools/train.py configs/depth_anything_v2_vits_folder_relative.py --data-root DIR
_base_ = ['depth_anything_v2_vits_folder.py']
model = dict(decode_head=dict(mode='relative', max_depth=1.0),
             loss=dict(_delete_=True, type='ScaleShiftInvariantLoss', alpha=0.5, scales=4))
val_evaluator = dict(type='DepthMetric', min_depth=1e-3, max_depth=10.0, alignment='scale_shift_disparity')
test_evaluator = val_evaluator
