# Claim b's CNN teacher: torchvision's ResNet-18 from scratch on the same patches and schedule as the student.
_base_ = ['cls_vitt_camvid_patches.py']
model = dict(backbone=dict(_delete_=True, name='resnet18', source='torchvision'), pooling=None)
