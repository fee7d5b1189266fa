"""Whole task-model checkpoint layouts: other code's keys -> this project's task models (``backbone.*``, ``neck.*``,
``decode_head.*``), one module per source.

- :mod:`.official`: the authors' code (isl-org/DPT, DPT-Hybrid; DepthAnything/Depth-Anything-V2);
- :mod:`.hf`: transformers (``DPTFor*``, ``DepthAnythingForDepthEstimation``);
- :mod:`.mmseg`: mmsegmentation's DPT segmentor, and telling it from this project's layout;
- :mod:`.dpt_names`: the DPT neck's names each source uses, written once, and the block pruning they share.

Backbone layouts (per source, per family) live in :mod:`zoo.weights`; these converters call them for the backbone
part and rename the rest.
"""
