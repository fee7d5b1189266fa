# Claim b's distilled student: DeiT-Ti (4 blocks, with a distillation token), hard distillation (alpha 0.5) from the
# ResNet-18 teacher of cls_resnet18_camvid_patches.py, which tools/evidence.py trains first and whose checkpoint it
# sets here (the default below is where it lands).
_base_ = ['cls_vitt_camvid_patches.py']
teacher = 'work_dirs/evidence/distillation/prerequisite/seed0/iter_150.pth'
model = dict(
    backbone=dict(_delete_=True, name='deit_tiny_distilled_patch16_224', depth=4, img_size=64, patch_size=8,
                  drop_path_rate=0.0),
    pooling=None,
    distillation=dict(kind='hard', alpha=0.5, tau=1.0,
                      teacher=dict(name='resnet18', source='torchvision', checkpoint=teacher)))
