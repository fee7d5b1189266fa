# Depth Anything V2 ViT-S metric depth on one's own RGB-D folder: depth_anything_v2_vits_7scenes.py's recipe
# (sigmoid x max_depth, SiLog, the encoder at a tenth of the head's learning rate) over RGBDFolderDataset:
#   DIR/rgb/<stem>.jpg|png, DIR/depth/<stem>.png (uint16 millimetres; .npy float metres with depth_scale=1),
#   optional DIR/mask/<stem>.png (non-zero = valid), DIR/train.txt and DIR/val.txt (the frame stems of each split).
# DIR comes from the command line (there is no default); check the folder first (docs/depth.md, "Recipes"):
#   python tools/check_dataset.py DIR --depth-scale 1000 --depth-invalid 0 65535
#   python tools/depth_baseline.py configs/depth_anything_v2_vits_folder.py --data-root DIR
#   python tools/train.py configs/depth_anything_v2_vits_folder.py --data-root DIR \
#       --cfg-options model.backbone.pretrained=depth_anything_v2_vits.pth
# Frames are resized to fit 640x480 (their aspect kept); outdoor scenes want max_depth=80 (model.max_depth,
# model.decode_head.max_depth, val_evaluator.max_depth), float-metre .npy depth
# train_dataloader.dataset.depth_scale=1.0 (and val_dataloader's).
_base_ = ['depth_anything_v2_vits_7scenes.py']
data_root = ''  # no default: --data-root DIR
scale = (640, 480)
train_pipeline = [dict(type='LoadImage'), dict(type='LoadAnnotations', seg=False, depth=True),
                  dict(type='RandomResize', scale=scale, keep_ratio=True), dict(type='RandomFlip', prob=0.5),
                  dict(type='PhotoMetricDistortion'), dict(type='PackDenseInputs')]
test_pipeline = [dict(type='LoadImage'), dict(type='Resize', scale=scale, keep_ratio=True),
                 dict(type='LoadAnnotations', seg=False, depth=True), dict(type='PackDenseInputs')]
dataset = dict(type='RGBDFolderDataset', data_root=data_root, depth_scale=1000.0, depth_invalid=(0, 65535),
               mask_dir='mask')
train_dataloader = dict(dataset=dict(dataset, list_file='train.txt', pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(dataset, list_file='val.txt', pipeline=test_pipeline))
test_dataloader = val_dataloader
predict_scale = scale
