"""heads: what predicts — DPT necks, segmentation and depth heads, losses, task models, data, metrics and
the mmengine glue. Depends on :mod:`zoo`; nothing in :mod:`zoo` depends on it.

The DPT necks and heads, task models and training path arrive with their issues (see README's roadmap).
"""
