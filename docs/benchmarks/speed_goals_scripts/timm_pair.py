"""Ours and timm's classifier of the same name with the same weights (timm's random init, seed 0), ours routed by the
kernel policy as tools/benchmark.py routes it: the pair that ab_cpu_time.py and op_profile.py compare."""
import timm
import torch

import zoo
from zoo.runtime import apply_kernel_policy


def timm_pair(name: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(ours, timm's) ``name`` in eval mode, ours loaded with timm's weights."""
    torch.manual_seed(0)
    ours = zoo.create_classifier(name).eval()
    apply_kernel_policy(ours)
    ref = timm.create_model(name, pretrained=False).eval()
    zoo.load_pretrained(ours, ref.state_dict())
    return ours, ref
