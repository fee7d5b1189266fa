"""Task models (mmengine BaseModel) and their data preprocessor."""
from .classifier import ImageClassifier
from .depth_estimator import DepthEstimator
from .detector import TorchvisionDetector
from .mae import MAEPretrainer
from .preprocessor import ClassificationPreprocessor, DensePreprocessor
from .segmentor import Segmentor

__all__ = ['ClassificationPreprocessor', 'DensePreprocessor', 'DepthEstimator', 'ImageClassifier', 'MAEPretrainer', 'Segmentor',
           'TorchvisionDetector']
