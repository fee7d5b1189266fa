"""What every task model here shares: mmengine's BaseModel with the whole batch's losses in the log."""
from __future__ import annotations

import torch
import torch.distributed as dist
from mmengine.model import BaseModel


class TaskModel(BaseModel):
    """:class:`mmengine.model.BaseModel` whose logged loss values are averaged over the processes of a distributed
    run, so that the log shows the loss of the whole batch (mmengine logs rank 0's own); the loss to optimise stays
    this process's (DDP averages the gradients)."""

    def parse_losses(self, losses: dict) -> tuple[torch.Tensor, dict]:
        loss, log_vars = super().parse_losses(losses)
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            values = torch.stack([value.detach().float() for value in log_vars.values()])
            dist.all_reduce(values)
            log_vars = type(log_vars)(zip(log_vars, values / dist.get_world_size()))
        return loss, log_vars
