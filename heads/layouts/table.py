"""The task-model checkpoint layouts this project reads: one table, one row a layout (:class:`.detect.Layout`: name,
detect predicate, converter, the task models it applies to, who writes it). Every loader of a whole task model
(:func:`heads.models.task_checkpoint.load_task_checkpoint`, :func:`heads.from_pretrained_hf`, the official DPT and
Depth Anything loaders) tells the layout through it (:func:`.detect.detect_layout`).

Rows of checkpoint files (:data:`FILES`) detect by their keys, those of transformers folders (:data:`FOLDERS`) by
``config.json``'s ``model_type``; this project's own layout (:data:`ZOO`) is a file with keys of the model and in no
other file layout. Adding a layout is one row here (and its converter in a module of this package).
"""
from __future__ import annotations

from .detect import Checkpoint, Layout
from .eomt_authors import convert_authors_eomt_state, is_authors_eomt
from .hf import depth_anything_from_hf, dpt_from_hf
from .hf_eomt import convert_hf_eomt_dinov3_state, convert_hf_eomt_state
from .hf_mask2former import convert_mask2former_state
from .mmseg import is_mmseg_segmentor, segmentor_from_mmseg
from .moge import is_moge2, moge2_from_authors
from .official import depth_anything_from_official, dpt_from_official, is_official_depth_anything, is_official_dpt
from .upernet import upernet_from_hf
from .video_depth_anything import is_video_depth_anything, video_depth_anything_from_official


def _file(detect):
    """A checkpoint file's predicate: ``detect(state, name)`` on its keys; never a transformers folder."""
    return lambda checkpoint: checkpoint.config is None and detect(checkpoint.state, checkpoint.name)


def _folder(model_type: str):
    """A transformers folder's predicate: its ``config.json`` names ``model_type``."""
    return lambda checkpoint: checkpoint.config is not None and checkpoint.config.get('model_type') == model_type


SEGMENTOR, DEPTH, DENSE = ('Segmentor',), ('DepthEstimator',), ('Segmentor', 'DepthEstimator')

#: Checkpoint files written by other code, told by their keys.
FILES = (
    Layout('mmseg', _file(is_mmseg_segmentor), segmentor_from_mmseg, SEGMENTOR,
           "mmsegmentation's DPT or UperNet (Swin) EncoderDecoder"),
    Layout('isl-org DPT', _file(lambda state, name: is_official_dpt(state)), dpt_from_official, DENSE,
           "isl-org/DPT's DPTSegmentationModel / DPTDepthModel (ViT or DPT-Hybrid)"),
    Layout('Depth Anything V2', _file(lambda state, name: is_official_depth_anything(state)),
           depth_anything_from_official, DEPTH, "DepthAnything/Depth-Anything-V2's DepthAnythingV2"),
    Layout('Video Depth Anything', _file(lambda state, name: is_video_depth_anything(state)),
           video_depth_anything_from_official, ('VideoDepthEstimator',),
           "DepthAnything/Video-Depth-Anything's VideoDepthAnything (the metric models too)"),
    Layout('EoMT authors', _file(lambda state, name: is_authors_eomt(state)), convert_authors_eomt_state, ('EoMT',),
           "tue-mps/eomt's LightningModule (DINOv2 through timm, DINOv3 through transformers)"),
    Layout('MoGe-2', _file(lambda state, name: is_moge2(state)), moge2_from_authors, ('MoGe2',),
           "microsoft/MoGe's MoGeModel (v2; the 'model' of Ruicheng/moge-2-*'s model.pt)"),
)

#: transformers ``save_pretrained`` folders, told by ``config.json``'s ``model_type``.
FOLDERS = (
    Layout('transformers dpt', _folder('dpt'), dpt_from_hf, DENSE,
           "transformers' DPTForSemanticSegmentation / DPTForDepthEstimation"),
    Layout('transformers depth_anything', _folder('depth_anything'), depth_anything_from_hf, DEPTH,
           "transformers' DepthAnythingForDepthEstimation"),
    Layout('transformers upernet', _folder('upernet'), upernet_from_hf, SEGMENTOR,
           "transformers' UperNetForSemanticSegmentation (Swin)"),
    Layout('transformers mask2former', _folder('mask2former'), convert_mask2former_state, ('Mask2Former',),
           "transformers' Mask2FormerForUniversalSegmentation (Swin)"),
    Layout('transformers eomt', _folder('eomt'), convert_hf_eomt_state, ('EoMT',),
           "transformers' EomtForUniversalSegmentation"),
    Layout('transformers eomt_dinov3', _folder('eomt_dinov3'), convert_hf_eomt_dinov3_state, ('EoMT',),
           "transformers' EomtDinov3ForUniversalSegmentation"),
)


def _is_zoo(checkpoint: Checkpoint) -> bool:
    """This project's own layout: a file with at least one of the model's keys, in none of :data:`FILES`."""
    if checkpoint.config is not None:
        return False
    own = checkpoint.model.state_dict()
    return any(key in own for key in checkpoint.state) and not any(row.detect(checkpoint) for row in FILES)


#: This project's own layout (training here, tools/convert_weights.py): loaded as it is, into any model.
ZOO = Layout('zoo', _is_zoo, lambda state, model: state, ('Module',), "this project (its runner, convert_weights)")

#: Every task-model checkpoint layout, this project's first.
LAYOUTS = (ZOO, *FILES, *FOLDERS)


def named(*names: str) -> tuple[Layout, ...]:
    """The rows of :data:`LAYOUTS` called ``names`` (for a loader of one source's checkpoints)."""
    rows = {row.name: row for row in LAYOUTS}
    unknown = [name for name in names if name not in rows]
    if unknown:
        raise ValueError(f"no task-model checkpoint layout {', '.join(map(repr, unknown))}; known: {', '.join(rows)}")
    return tuple(rows[name] for name in names)
