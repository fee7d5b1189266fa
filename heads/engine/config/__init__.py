"""Config mistakes named before anything is built or trained, and comparing configs: keys, types and registered
types checked against the components (:mod:`.check`), counts that must be positive whole numbers (:mod:`.values`),
a model predicting more classes than its training set has (:mod:`.class_count`), the keys two configs differ in
(:mod:`.diff`)."""
from .check import ConfigKeyError, ConfigTypeError, check_config_keys
from .class_count import more_classes_message
from .diff import differing_keys, flatten
from .values import ConfigValueError, check_train_length, positive_int

__all__ = ['ConfigKeyError', 'ConfigTypeError', 'ConfigValueError', 'check_config_keys', 'check_train_length',
           'differing_keys', 'flatten', 'more_classes_message', 'positive_int']
