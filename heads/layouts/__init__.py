"""Whole task-model checkpoint layouts: other code's keys -> this project's task models (``backbone.*``, ``neck.*``,
``decode_head.*``, ``pixel_decoder.*``, ...), in one table.

:mod:`.table` holds the table (``LAYOUTS``), one row a layout: its name, a ``detect`` predicate, its converter and the
task models it applies to (:class:`.detect.Layout`). Every loader of a whole task model tells a checkpoint's layout
through it (:func:`.detect.detect_layout`): :func:`heads.models.task_checkpoint.load_task_checkpoint` (``load_from``,
``tools/test.py``, ``heads.Predictor``), :func:`heads.from_pretrained_hf`, the official DPT and Depth Anything loaders.
Exactly one row must detect a checkpoint: none, or two, is refused naming the layouts, before anything is loaded.

Layouts (the rows of ``LAYOUTS``, in its order):

- ``zoo``: this project's own (its runner's checkpoints, ``tools/convert_weights.py``'s output), loaded as it is;
- ``mmseg``: mmsegmentation's DPT segmentor (:mod:`.mmseg`) or UperNet with a Swin (:mod:`.mmseg_upernet`);
- ``isl-org DPT``: the authors' DPT and DPT-Hybrid (:mod:`.official`);
- ``Depth Anything V2``: the authors' Depth Anything V2, the metric-depth models too (:mod:`.official`);
- ``Video Depth Anything``: the authors' Video Depth Anything, the metric models too (:mod:`.video_depth_anything`);
- ``EoMT authors``: tue-mps/eomt's own checkpoints, ``network.*`` keys, DINOv2 or DINOv3 encoders (:mod:`.eomt_authors`;
  their DINOv3 delta files once added to DINOv3's weights);
- ``MoGe-2``: microsoft/MoGe's MoGe-2 (``MoGeModel`` v2, the ``model`` of its ``model.pt``; :mod:`.moge`);
- ``transformers dpt``: ``DPTFor*`` folders (:mod:`.hf`);
- ``transformers depth_anything``: ``DepthAnythingForDepthEstimation`` folders (:mod:`.hf`);
- ``transformers upernet``: ``UperNetForSemanticSegmentation`` (Swin) folders (:mod:`.upernet`);
- ``transformers mask2former``: ``Mask2FormerForUniversalSegmentation`` (Swin) folders (:mod:`.hf_mask2former`);
- ``transformers eomt``: ``EomtForUniversalSegmentation`` folders (:mod:`.hf_eomt`);
- ``transformers eomt_dinov3``: ``EomtDinov3ForUniversalSegmentation`` folders (:mod:`.hf_eomt`).

:mod:`.dpt_names` writes the DPT neck's names of each source once (and the block pruning they share). Backbone
layouts (per source, per family) live in :mod:`zoo.weights`; these converters call them for the backbone part and
rename the rest.

Adding a layout (a depth model's, say) is one row:

1. its converter ``convert(state, model) -> state`` (this project's keys for ``model``) in a module of this package,
   renaming with :func:`zoo.weights.rename.rules` tables and the backbone through :mod:`zoo.weights`;
2. one ``Layout(name, detect, convert, models, source)`` in :mod:`.table`: in ``FILES`` for a checkpoint file, told
   by its keys (a predicate that no checkpoint of another row meets: e.g. every key under the layout's own prefixes),
   or in ``FOLDERS`` for a transformers folder, told by ``config.json``'s ``model_type`` (its config reader then goes
   in :data:`heads.hf.folder.KINDS`);
3. its name in the list above, and a test that loads a checkpoint in it (``tests/layouts/test_layout_table.py``
   checks both).
"""
