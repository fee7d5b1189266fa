"""Repeated augmentation (Hoffer et al. 2020; DeiT's RASampler) for iteration-based training."""
from __future__ import annotations

import itertools

import torch
from mmengine.dist import get_dist_info, sync_random_seed
from torch.utils.data import Sampler

from ..registry import DATA_SAMPLERS


@DATA_SAMPLERS.register_module()
class RepeatAugSampler(Sampler):
    """An endless sampler in which every image of an epoch comes ``num_repeats`` times in a row (so each copy gets
    its own random augmentation, on another process when there are several), an epoch keeping the dataset's
    length: each epoch draws a fresh seeded permutation, repeats each index ``num_repeats`` times, keeps the first
    ``len(dataset)`` entries (rounded up to a multiple of the world size) and gives rank ``r`` entries ``r, r + W,
    ...``. Like mmengine's InfiniteSampler, for ``IterBasedTrainLoop``."""

    def __init__(self, dataset, num_repeats: int = 3, shuffle: bool = True, seed: int | None = None):
        if num_repeats < 1:
            raise ValueError(f"num_repeats must be >= 1, got {num_repeats}")
        self.rank, self.world_size = get_dist_info()
        self.dataset, self.num_repeats, self.shuffle = dataset, num_repeats, shuffle
        self.seed = sync_random_seed() if seed is None else seed

    def epoch_indices(self, epoch: int) -> list[int]:
        """This rank's indices in ``epoch``."""
        n = len(self.dataset)
        generator = torch.Generator().manual_seed(self.seed + epoch)
        order = torch.randperm(n, generator=generator) if self.shuffle else torch.arange(n)
        repeated = order.repeat_interleave(self.num_repeats)
        total = -(-n // self.world_size) * self.world_size
        return repeated[:total][self.rank::self.world_size].tolist()

    def __iter__(self):
        for epoch in itertools.count():
            yield from self.epoch_indices(epoch)

    def __len__(self) -> int:
        return -(-len(self.dataset) // self.world_size)

    def set_epoch(self, epoch: int) -> None:
        """Epochs advance by themselves (endless sampler); kept for mmengine's hooks."""
