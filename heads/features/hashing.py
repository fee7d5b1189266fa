"""A fingerprint of a module's weights, recorded in a feature export to tell whether its weights changed."""
from __future__ import annotations

import hashlib

import torch
from torch import nn


def weights_hash(module: nn.Module) -> str:
    """``'sha256:<hex>'`` over ``module.state_dict()``: for each key in sorted order, the key, the dtype, the
    shape and the raw bytes of the tensor (on CPU, contiguous). Equal weights give equal hashes on any device."""
    digest = hashlib.sha256()
    state = module.state_dict()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        digest.update(f"{key}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return f"sha256:{digest.hexdigest()}"
