# Claim a's hybrid: dpt_vitt4_camvid.py with only the backbone swapped for a small CvT (convolutional token
# embedding and depthwise-conv q/k/v projections) whose DPT model has the ViT-Ti-4 one's GMACs (docs/evidence.md).
_base_ = ['dpt_vitt4_camvid.py']
model = dict(backbone=dict(_delete_=True, type='ZooBackbone', name='cvt_13_224', pretrained=None, drop_path_rate=0.0,
                           depths=(1, 1, 2), embed_dims=(32, 96, 192), num_heads=(1, 2, 3)))
