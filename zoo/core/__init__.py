"""The attention core: every backbone's token mixing and embedding parts."""
from .attention import Attention
from .block import Block, LayerNorm6
from .layers import DropPath, Dropout, LayerScale, Mlp
from .patch_embed import PatchEmbed
from .pos_embed import LearnedPosEmbed, SinCosPosEmbed, resample_grid_embed, sincos_2d, square_grid
from .qkv import FusedQKV, SeparateQKV
from .tokens import PrefixTokens

__all__ = ['Attention', 'Block', 'DropPath', 'Dropout', 'FusedQKV', 'LayerNorm6', 'LayerScale', 'LearnedPosEmbed', 'Mlp',
           'PatchEmbed', 'PrefixTokens', 'SeparateQKV', 'SinCosPosEmbed', 'resample_grid_embed', 'sincos_2d',
           'square_grid']
