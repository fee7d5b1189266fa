"""Task models (mmengine BaseModel) and their data preprocessor."""
from .depth_estimator import DepthEstimator
from .preprocessor import DensePreprocessor
from .segmentor import Segmentor

__all__ = ['DensePreprocessor', 'DepthEstimator', 'Segmentor']
