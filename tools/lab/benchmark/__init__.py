"""Measurements behind ``tools/benchmark.py`` and ``tools/compare.py``: zoo models against their references (timm,
transformers) in the same process (:mod:`.reference`), whole dense models from configs (:mod:`.dense`), backbones
compared under one experiment (:mod:`.compare`), and the Markdown tables they write (:mod:`.tables`)."""
