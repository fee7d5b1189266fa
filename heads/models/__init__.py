"""Task models (mmengine BaseModel) and their data preprocessor."""
from .classifier import ImageClassifier
from .depth_estimator import DepthEstimator
from .preprocessor import DensePreprocessor
from .segmentor import Segmentor

__all__ = ['DensePreprocessor', 'DepthEstimator', 'ImageClassifier', 'Segmentor']
