"""mmengine datasets for dense prediction (mmseg data-info conventions, no mmcv) and image classification.

Importing this package registers every dataset in :data:`heads.registry.DATASETS` (and, through
:mod:`heads.transforms`, every transform). Datasets build their own pipelines from config dicts, so they
work outside a Runner without a default scope.
"""
from .ade20k import ADE20K_CLASSES, ADE20K_PALETTE, ADE20KDataset
from .base import DenseDataset, build_pipeline
from .camvid import CAMVID_CLASSES, CAMVID_PALETTE, CamVidDataset
from .camvid_panoptic import CAMVID_THING_CLASSES, CamVidPanopticDataset
from .clips import VideoClipDataset, clip_collate
from .coco import CocoSegDataset, render_semantic_map
from .coco_detection import CocoDetectionDataset
from .coco_panoptic import CocoPanopticDataset
from .folder import FolderSegDataset
from .image_folder import ImageFolderDataset
from .rgbd import RGBDDepthDataset, RGBDFolderDataset
from .samplers import RepeatAugSampler
from .synthetic import SYNTHETIC_CLASSES, SYNTHETIC_PALETTE, SyntheticScenes, render_scene

__all__ = ['ADE20K_CLASSES', 'ADE20K_PALETTE', 'ADE20KDataset', 'CAMVID_CLASSES', 'CAMVID_PALETTE',
           'CAMVID_THING_CLASSES', 'CamVidDataset', 'CamVidPanopticDataset', 'CocoDetectionDataset',
           'CocoPanopticDataset', 'CocoSegDataset', 'DenseDataset', 'FolderSegDataset',
           'ImageFolderDataset', 'RGBDDepthDataset', 'RGBDFolderDataset', 'RepeatAugSampler',
           'SYNTHETIC_CLASSES', 'SYNTHETIC_PALETTE', 'SyntheticScenes', 'VideoClipDataset', 'build_pipeline',
           'clip_collate', 'render_scene', 'render_semantic_map']
