"""The attention core: every backbone's token mixing and embedding parts."""
from .attention import Attention
from .block import Block, LayerNorm6
from .conv_bn import ConvBN
from .execution import (
                        Checkpointable,
                        cpu_has_bf16_kernels,
                        keep_convs_fp32_on_cpu_autocast,
                        set_fused_attention,
                        set_grad_checkpointing,
)
from .grid import Grid
from .layers import (
                        ACTIVATIONS,
                        Dropout,
                        DropPath,
                        LayerScale,
                        Mlp,
                        QuickGELU,
                        activate,
                        activation_layer,
                        grad_free,
                        init_linear,
)
from .patch_embed import PatchEmbed
from .pooling import AttentionPool
from .pos_embed import LearnedPosEmbed, SinCosPosEmbed, resample_grid_embed, sincos_2d, square_grid
from .qkv import ConvQKV, FusedQKV, QVBiasQKV, SeparateQKV
from .rel_pos import RelPosBias, RelPosMlp, resize_offset_table
from .tokens import PrefixTokens
from .weight_decay import NoWeightDecay, no_weight_decay_of
from .windows import ShiftedWindowAttention

__all__ = ['ACTIVATIONS', 'Attention', 'AttentionPool', 'Block', 'Checkpointable', 'ConvBN', 'ConvQKV', 'DropPath',
           'Dropout', 'FusedQKV', 'Grid', 'LayerNorm6', 'LayerScale', 'LearnedPosEmbed', 'Mlp', 'NoWeightDecay',
           'PatchEmbed', 'PrefixTokens', 'QVBiasQKV', 'QuickGELU', 'RelPosBias', 'RelPosMlp', 'SeparateQKV',
           'ShiftedWindowAttention', 'SinCosPosEmbed',
           'activate', 'activation_layer', 'cpu_has_bf16_kernels', 'grad_free', 'init_linear',
           'keep_convs_fp32_on_cpu_autocast', 'no_weight_decay_of', 'resample_grid_embed', 'resize_offset_table',
           'set_fused_attention', 'set_grad_checkpointing', 'sincos_2d', 'square_grid']

# LeViT's parts: BN'd Linears, the offset-magnitude attention bias, q/k/v projections with wider values and strided
# queries.
from .linear_bn import BNLinear, LinearBN
from .offset_bias import AbsOffsetBias
from .qkv import SplitQKV, StridedQueryQKV

__all__ += ['AbsOffsetBias', 'BNLinear', 'LinearBN', 'SplitQKV', 'StridedQueryQKV']
