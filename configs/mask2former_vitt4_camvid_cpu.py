# Mask2Former on CamVid sized for a CPU, beside configs/dpt_vitt4_camvid_cpu.py (the same ViT-Ti with 4 blocks from
# scratch, images, augmentation, optimizer and schedule): the ViT's last map through ViTDet's simple feature pyramid
# (strides 4..32, 64 wide), a 64-wide pixel decoder (2 deformable layers over strides 8/16/32, one FPN step to 4)
# and a masked-attention decoder (50 queries, 3 layers, one per level). A hierarchical backbone's stage maps go to the
# pixel decoder as they are, so tools/compare.py --heads can swap the backbone. Semantic results (class scores =
# softmax classes x sigmoid masks):
#   python tools/train.py configs/mask2former_vitt4_camvid_cpu.py --data-root ../shared/data/camvid
_base_ = ['dpt_vitt4_camvid_cpu.py']
model = dict(
    _delete_=True,
    type='Mask2Former',
    data_preprocessor={{_base_.model.data_preprocessor}},  # DPT's (its strides reach 32, as the pyramid's)
    backbone=dict(type='ZooBackbone', name='vit_tiny_patch16_224', depth=4, drop_path_rate=0.0),
    pixel_decoder=dict(type='Mask2FormerPixelDecoder', channels=64, mask_channels=64, num_layers=2, num_heads=4,
                       ffn_channels=256),
    decoder=dict(type='Mask2FormerTransformerDecoder', num_classes={{_base_.num_classes}}, channels=64,
                 mask_channels=64, num_queries=50, num_layers=3, num_heads=4, ffn_channels=256),
    loss=dict(num_points=4096),  # of a 176x240 crop's 42240 pixels (the recipe's 12544 are for 512x512)
    test_cfg=dict(tasks=('semantic',)))
# no decay on the queries' embeddings and the level embeddings, as mmseg's recipe (configs/mask2former_swint_ade20k.py)
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'query': dict(decay_mult=0.0),
                                                     'level_embed': dict(decay_mult=0.0)}))
