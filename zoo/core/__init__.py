"""The attention core: every backbone's token mixing and embedding parts."""
from .attention import Attention
from .block import Block, LayerNorm6, vit_parts
from .conv_bn import ConvBN
from .execution import (
                        Checkpointable,
                        set_fused_attention,
                        set_grad_checkpointing,
)
from .grid import Grid
from .layers import (
                        ACTIVATIONS,
                        Dropout,
                        DropPath,
                        GELUTanh,
                        LayerScale,
                        Mlp,
                        PreNormLinear,
                        QuickGELU,
                        activate,
                        activation_layer,
                        grad_free,
                        init_linear,
)
from .linear import Linear
from .linear_bn import BNLinear, LinearBN
from .offset_bias import AbsOffsetBias
from .patch_embed import PatchEmbed
from .pooling import AttentionPool, ProbePool
from .pos_embed import (
    CroppedPosEmbed,
    LearnedPosEmbed,
    SinCosPosEmbed,
    resample_grid_embed,
    sincos_1d,
    sincos_2d,
    square_grid,
)
from .qkv import ConvQKV, FusedQKV, ProbeQKV, QVBiasQKV, SeparateInputsQKV, SeparateQKV, SplitQKV, StridedQueryQKV
from .rel_pos import RelPosBias, RelPosMlp, resize_offset_table
from .std_conv import MaxPool2dSame, StdConv2d, pad_same
from .tokens import PrefixTokens
from .weight_decay import NoWeightDecay, no_weight_decay_of
from .windows import ShiftedWindowAttention

__all__ = ['ACTIVATIONS', 'AbsOffsetBias', 'Attention', 'AttentionPool', 'BNLinear', 'Block', 'Checkpointable',
           'ConvBN', 'ConvQKV', 'CroppedPosEmbed', 'DropPath', 'Dropout', 'FusedQKV', 'GELUTanh', 'Grid',
           'LayerNorm6', 'LayerScale', 'LearnedPosEmbed', 'Linear', 'LinearBN', 'MaxPool2dSame', 'Mlp', 'NoWeightDecay',
           'PatchEmbed', 'PreNormLinear',
           'PrefixTokens', 'ProbePool', 'ProbeQKV', 'QVBiasQKV', 'QuickGELU', 'RelPosBias', 'RelPosMlp',
           'SeparateInputsQKV', 'SeparateQKV',
           'ShiftedWindowAttention', 'SinCosPosEmbed', 'SplitQKV', 'StdConv2d', 'StridedQueryQKV', 'activate',
           'activation_layer', 'grad_free', 'init_linear', 'no_weight_decay_of', 'pad_same', 'resample_grid_embed',
           'resize_offset_table', 'set_fused_attention', 'set_grad_checkpointing', 'sincos_1d', 'sincos_2d',
           'square_grid', 'vit_parts']
