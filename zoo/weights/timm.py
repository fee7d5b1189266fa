"""timm's key layout -> this project's, per backbone family."""
from __future__ import annotations

# timm ViT/DeiT keep prefix tokens and the position table as bare parameters.
_VIT_RENAMES = {'cls_token': 'prefix.cls', 'dist_token': 'prefix.dist', 'reg_token': 'prefix.registers',
                'pos_embed': 'pos_embed.weight'}


def vit_from_timm(state: dict) -> dict:
    return {_VIT_RENAMES.get(k, k): v for k, v in state.items()}


FROM_TIMM = {'vit': vit_from_timm}
