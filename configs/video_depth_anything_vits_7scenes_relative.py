# Video Depth Anything ViT-S fine-tuned for relative depth on 7-Scenes (kitchen): Depth Anything V2's relative recipe
# (depth_anything_v2_vits_7scenes_relative.py: the DINOv2 ViT-S/14 encoder, the relative ReLU head giving disparity,
# AdamW with the encoder at a tenth of the head's learning rate, evaluation after scale-and-shift alignment in
# disparity) with the temporal modules of Video Depth Anything in the neck (heads/necks/video_depth_anything.py),
# trained on clips of 32 consecutive frames (the released models' length; one clip a batch, '(b t) 3 H W') with the
# authors' loss, VideoDepthLoss (heads/losses/video_depth.py): per frame a trimmed scale-and-shift-invariant loss with
# multi-scale gradient matching, over each clip temporal gradient matching (weight 10). A clip's frames share one
# random augmentation (heads/datasets/clips.py). Validated on clips of 20 (the 40 validation frames in two clips).
# GPU memory at 640x480 is not measured here: with too little, lower both clip lengths
# (train_dataloader.dataset.frames, model.frames).
# Start from the authors' Video Depth Anything checkpoint, a Depth Anything V2 checkpoint's encoder (the authors
# start from Depth Anything V2), DINOv2 weights or from scratch (pretrained=None):
#   python tools/train.py configs/video_depth_anything_vits_7scenes_relative.py \
#       --data-root ../shared/data/depth-7scenes --cfg-options load_from=video_depth_anything_vits.pth
#   python tools/train.py configs/video_depth_anything_vits_7scenes_relative.py \
#       --data-root ../shared/data/depth-7scenes --cfg-options model.backbone.pretrained=depth_anything_v2_vits.pth
_base_ = ['depth_anything_v2_vits_7scenes_relative.py']
frames = 32
val_frames = 20
model = dict(type='VideoDepthEstimator', frames=frames, neck=dict(type='VideoDepthAnythingNeck'),
             loss=dict(_delete_=True, type='VideoDepthLoss'))
train_dataloader = dict(
    batch_size=1, collate_fn=dict(type='heads.clip_collate'),
    dataset=dict(_delete_=True, type='VideoClipDataset', frames=frames, step=1,
                 dataset={{_base_.train_dataloader.dataset}}))
val_dataloader = dict(
    batch_size=1, collate_fn=dict(type='heads.clip_collate'),
    dataset=dict(_delete_=True, type='VideoClipDataset', frames=val_frames,
                 dataset={{_base_.val_dataloader.dataset}}))
test_dataloader = val_dataloader
