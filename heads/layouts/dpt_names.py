"""The DPT neck's names in each source that saves one, as renaming rules to ours, written once; and the pruning of
the blocks after a DPT's last tap, which every converter of a whole model applies.

Ours: ``neck.reassemble.{i}.{readout.project.0,proj,resample}``, ``neck.convs.{i}``,
``neck.fusion.{i}.{res{j}.conv{k},res{j}.bn{k},proj}`` with fusion block 0 the deepest level.
"""
from __future__ import annotations

import re

from zoo.weights.rename import rules


def isl_fusion_rules(prefix: str = '') -> list:
    """isl-org's DPT ``scratch`` under ``prefix`` (Depth Anything: ``depth_head.``) -> ours: ``layer{1..4}_rn`` the
    3x3 convs into the fusion width, ``refinenet{4..1}`` the fusion from the deepest level, ``resConfUnit{1,2}`` its
    residual units, ``out_conv`` its projection."""
    scratch = re.escape(prefix) + r'scratch\.'
    return [
        (rf'^{scratch}layer(\d)_rn\.', lambda m: f'neck.convs.{int(m[1]) - 1}.'),
        (rf'^{scratch}refinenet(\d)\.', lambda m: f'neck.fusion.{4 - int(m[1])}.'),
        *rules(r"""
            \.resConfUnit(\d)\.conv(\d)\.     -> .res\1.conv\2.
            \.resConfUnit(\d)\.bn(\d)\.       -> .res\1.bn\2.
            ^(neck\.fusion\.\d+)\.out_conv\.  -> \1.proj.
        """),
    ]


#: transformers' ``neck`` (``DPTNeck``, Depth Anything's ``DepthAnythingNeck``) and its ``head``.
HF_NECK_RULES = rules(r"""
    ^neck\.reassemble_stage\.readout_projects\.(\d+)\.0\.                      -> neck.reassemble.\1.readout.project.0.
    ^neck\.reassemble_stage\.layers\.(\d+)\.projection\.                       -> neck.reassemble.\1.proj.
    ^neck\.reassemble_stage\.layers\.(\d+)\.resize\.                           -> neck.reassemble.\1.resample.
    ^neck\.fusion_stage\.layers\.(\d+)\.projection\.                           -> neck.fusion.\1.proj.
    ^neck\.fusion_stage\.layers\.(\d+)\.residual_layer(\d)\.convolution(\d)\.  -> neck.fusion.\1.res\2.conv\3.
    ^neck\.fusion_stage\.layers\.(\d+)\.residual_layer(\d)\.batch_norm(\d)\.   -> neck.fusion.\1.res\2.bn\3.
    ^head\.                                                                    -> decode_head.
""")

_BLOCK = re.compile(r'^backbone\.blocks\.(\d+)\.')


def keep_backbone_blocks(state: dict, num_blocks: int, tap_norm: bool = True) -> dict:
    """Our keys without the blocks from ``num_blocks`` on (after the last tap: the backbone drops them) and, without
    ``tap_norm``, the final norm."""
    return {k: v for k, v in state.items() if not (_BLOCK.match(k) and int(_BLOCK.match(k)[1]) >= num_blocks)
            and (tap_norm or not k.startswith('backbone.norm.'))}
