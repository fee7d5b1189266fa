# DeiT hard distillation on CamVid patches: a DeiT-Ti student with a distillation token learns from the ViT
# classifier trained by cls_vitt_camvid_patches.py (any zoo classifier or torchvision model file works):
#   python tools/train.py configs/cls_vitt_camvid_patches.py --data-root data/camvid_patches
#   python tools/train.py configs/cls_deit_distilled_camvid_patches.py --data-root data/camvid_patches
_base_ = ['cls_vitt_camvid_patches.py']
model = dict(
    backbone=dict(_delete_=True, name='deit_tiny_distilled_patch16_224', depth=4, img_size=64, patch_size=8,
                  drop_path_rate=0.0),
    pooling=None,
    distillation=dict(kind='hard', alpha=0.5, tau=1.0, teacher=dict(
        name='vit_tiny_patch16_224', source='zoo', depth=4, img_size=64, patch_size=8,
        checkpoint='work_dirs/cls_vitt_camvid_patches/iter_300.pth')))
