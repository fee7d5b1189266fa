"""Task models (mmengine BaseModel), their data preprocessors, the zoo backbone as a config part (:mod:`.backbone`)
and inference on images (:mod:`.predictor`)."""
from .classifier import ImageClassifier
from .depth_estimator import DepthEstimator
from .detector import TorchvisionDetector
from .eomt import EoMT
from .eomt_parts import MaskAnnealingHook
from .mae import MAEPretrainer
from .mask2former import Mask2Former
from .mask_classifier import MaskClassificationModel
from .moge import MoGe2
from .preprocessor import ClassificationPreprocessor, DensePreprocessor
from .segmentor import Segmentor
from .video_depth_anything import VideoDepthEstimator

__all__ = ['ClassificationPreprocessor', 'DensePreprocessor', 'DepthEstimator', 'EoMT', 'ImageClassifier',
           'MAEPretrainer', 'Mask2Former', 'MaskAnnealingHook', 'MaskClassificationModel', 'MoGe2', 'Segmentor',
           'TorchvisionDetector', 'VideoDepthEstimator']
