"""Sharded data-parallel training (``tools/train.py --strategy fsdp``): PyTorch's FSDP2 ``fully_shard`` under
mmengine's Runner, with checkpoints in the same format as every other run.

:class:`FullyShardedModel` is the model wrapper (mmengine's ``model_wrapper_cfg``), in the place of DDP:

- **Sharding**: each transformer block (every :class:`zoo.core.execution.Checkpointable` part: ViT, CrossViT and
  LeViT blocks) is its own FSDP unit, and the root takes the rest (embeddings, neck, head). Each process keeps
  1/W of every parameter (dim 0 cut in chunks of ceil(n / W), rank 0 taking the first), of its gradient and of
  the optimizer state built on it; a unit's full parameters exist only while it runs (all-gathered before its
  forward and again before its backward). A model without such blocks is one unit: its states are still sharded,
  its peak is not lowered.
- **Mixed precision** (``param_dtype`` / ``reduce_dtype``, e.g. ``'bfloat16'``): the dtype the gathered
  parameters are computed in and the dtype gradients are averaged in; the sharded parameters and the optimizer
  stay fp32. Default: fp32 for both. BatchNorm layers stay fp32 (units of their own; their running statistics
  are fp32 buffers, which torch's batch norm does not mix with bf16 weights), their outputs cast back to
  ``param_dtype``. ``--amp`` (autocast) works on top, as with DDP.
- **Activation checkpointing** (``activation_checkpointing=True``): the blocks recompute their activations in
  backward (the project's own switch, :func:`zoo.core.set_grad_checkpointing`; FSDP gathers a block's parameters
  before its backward, so the recomputation has them).
- **Initialisation**: the model's ``init_weights`` runs and rank 0's parameters and buffers are broadcast to the
  other processes *before* sharding (as DDP does), so every shard cuts the same tensor.
- **Checkpoints**: :func:`gather_full` turns the sharded model and optimizer states into full CPU tensors on
  rank 0 (a collective every process enters), with the keys and layout of an unsharded run: ``tools/test.py``,
  ``Predictor`` and ``load_from`` read them unchanged, and a DDP run can resume from them (and back). Loading goes
  the other way through hooks on ``load_state_dict`` (:func:`shard_full_tensors`): full tensors given to the
  sharded model or its optimizer are cut to this process's shard (every process reads the file), so the
  project's loader (key conversion, strict checks) and mmengine's resume run unchanged.

Buffers (BatchNorm statistics) are not sharded: each process keeps its own, as under DDP without
``broadcast_buffers``, and rank 0's go into the checkpoint. Gradient accumulation reduce-scatters every
micro-batch (the gradients stay sharded; DDP's ``no_sync`` has no counterpart here).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from mmengine.logging import print_log
from mmengine.registry import MODEL_WRAPPERS
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor
from torch.nn.modules.batchnorm import _BatchNorm

from zoo.core import set_grad_checkpointing
from zoo.core.execution import Checkpointable
from zoo.weights import CheckpointMismatchError

DTYPES = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}


def _dtype(name: str | None, key: str) -> torch.dtype | None:
    if name is None:
        return None
    if name not in DTYPES:
        raise ValueError(f"FullyShardedModel: {key}={name!r} is not one of {sorted(DTYPES)}")
    return DTYPES[name]


def shard_units(model: nn.Module) -> list[nn.Module]:
    """The parts of ``model`` that become FSDP units of their own, innermost first: its blocks
    (:class:`~zoo.core.execution.Checkpointable` modules); the root unit takes the rest."""
    return [m for m in reversed(list(model.modules())) if isinstance(m, Checkpointable) and m is not model]


#: In mmengine's own registry, not this project's child: Runner.wrap_model looks the type up with the root
#: registry's ``get``, which does not search children.
@MODEL_WRAPPERS.register_module()
class FullyShardedModel(nn.Module):
    """``module`` sharded over the default process group with FSDP2 (see the module docstring); mmengine's
    ``train_step`` / ``val_step`` / ``test_step`` as in its DDP wrapper. The sharded model is ``self.module``."""

    def __init__(self, module: nn.Module, param_dtype: str | None = None, reduce_dtype: str | None = None,
                 activation_checkpointing: bool = False, reshard_after_forward: bool = True):
        super().__init__()
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        if not dist.is_initialized():
            raise RuntimeError("FullyShardedModel shards the model over the processes of a distributed launch, and "
                               "none is initialised: run under torchrun with --launcher pytorch, e.g. torchrun "
                               "--nproc_per_node 2 tools/train.py CONFIG --launcher pytorch --strategy fsdp")
        _refuse_lora(module)
        if hasattr(module, 'init_weights'):  # mmengine's Runner would do it after wrapping (ZooRunner skips it)
            module.init_weights()
        device = next(module.parameters()).device
        for tensor in [*module.parameters(), *module.buffers()]:
            tensor.data = tensor.data.contiguous()  # FSDP2 shards contiguous tensors only (channels-last convs)
            dist.broadcast(tensor.data, src=0)
        if activation_checkpointing:
            set_grad_checkpointing(module)
        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        policy = MixedPrecisionPolicy(param_dtype=_dtype(param_dtype, 'param_dtype'),
                                      reduce_dtype=_dtype(reduce_dtype, 'reduce_dtype'))
        units = []  # innermost first: a unit's parameters are those no unit inside it took
        if policy.param_dtype not in (None, torch.float32):  # BatchNorm in fp32 (its statistics are), output cast
            norm_policy = MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=policy.reduce_dtype,
                                               output_dtype=policy.param_dtype)
            for norm in [m for m in module.modules() if isinstance(m, _BatchNorm) and m.affine]:
                fully_shard(norm, mesh=mesh, mp_policy=norm_policy, reshard_after_forward=reshard_after_forward)
                units.append(norm)
        for unit in shard_units(module):
            fully_shard(unit, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard_after_forward)
            units.append(unit)
        fully_shard(module, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard_after_forward)
        module.register_load_state_dict_pre_hook(_shard_model_state)
        self.module = module
        self.units = len(units) + 1
        self._memory_logged = False

    # ------------------------------------------------------------------------------------- mmengine's steps
    def train_step(self, data, optim_wrapper) -> dict:
        with optim_wrapper.optim_context(self):
            data = self.module.data_preprocessor(data, training=True)
            losses = self._run_forward(data, mode='loss')
        parsed_loss, log_vars = self.module.parse_losses(losses)
        optim_wrapper.update_params(parsed_loss)
        if not self._memory_logged and getattr(optim_wrapper, 'optimizer', None) and optim_wrapper.optimizer.state:
            self._memory_logged = True  # once, after the first step has built the optimizer state
            print_log(memory_line(*self.local_bytes(optim_wrapper.optimizer)), logger='current')
        return log_vars

    def val_step(self, data) -> list:
        return self.module.val_step(data)

    def test_step(self, data) -> list:
        return self.module.test_step(data)

    def _run_forward(self, data, mode: str):
        if isinstance(data, dict):
            return self.module(**data, mode=mode)
        if isinstance(data, (list, tuple)):
            return self.module(*data, mode=mode)
        raise TypeError(f"the data preprocessor's output should be a list, tuple or dict, not {type(data)}")

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    # ------------------------------------------------------------------------------------- state
    def accept_full_optimizer_state(self, optimizer: torch.optim.Optimizer) -> None:
        """Make ``optimizer.load_state_dict`` take the full (unsharded) state of a checkpoint."""
        if not getattr(optimizer, '_takes_full_state', False):
            optimizer.register_load_state_dict_pre_hook(_shard_optimizer_state)
            optimizer._takes_full_state = True

    def local_bytes(self, optimizer: torch.optim.Optimizer | None = None) -> tuple[int, int]:
        """:func:`held_bytes` of the sharded model."""
        return held_bytes(self.module, optimizer)


def held_bytes(module: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> tuple[int, int]:
    """(bytes this process holds, bytes an unsharded copy holds) of ``module``'s parameters and, given
    ``optimizer``, of its state tensors: for a sharded module, what FSDP keeps on this process against what DDP
    keeps on every process; for a plain one, both the same."""
    tensors = list(module.parameters())
    if optimizer is not None:
        tensors += [v for state in optimizer.state.values() for v in state.values()
                    if isinstance(v, torch.Tensor) and v.dim() > 0]
    local = sum(_local(t).numel() * t.element_size() for t in tensors)
    full = sum(t.numel() * t.element_size() for t in tensors)
    return local, full


def memory_line(local: int, full: int) -> str:
    """The log line of :meth:`FullyShardedModel.local_bytes` (rank 0's shards are the largest: dim 0 is cut in
    chunks of ceil(n / W), the last ones shorter)."""
    return (f"FSDP: parameters + optimizer state on rank {dist.get_rank()}: {local} bytes ({local / 2 ** 20:.2f} MiB); "
            f"unsharded, as on every DDP process: {full} bytes ({full / 2 ** 20:.2f} MiB); ratio {local / full:.3f}")


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def _refuse_lora(module: nn.Module) -> None:
    from zoo.lora import lora_modules
    if lora_modules(module):
        raise ValueError("FullyShardedModel: this model has LoRA adapters, whose separate adapter file is written "
                         "by rank 0 alone (LoRAAdapterHook), which cannot read sharded tensors; train LoRA "
                         "fine-tunes with DDP (--strategy ddp): the frozen base needs no optimizer state")


def gather_full(tree, keep: bool | None = None):
    """``tree`` (nested dicts / lists of tensors: a state dict, an optimizer state dict) with every DTensor
    replaced by the full tensor on the CPU. A collective: every process calls it on the same structure. The
    result is kept where ``keep`` (default: on rank 0); elsewhere the gathered tensors are dropped (None)."""
    keep = dist.get_rank() == 0 if keep is None else keep

    def full(value):
        if isinstance(value, DTensor):
            gathered = value.full_tensor()
            return gathered.cpu() if keep else None
        if isinstance(value, dict):
            return type(value)((k, full(v)) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return type(value)(full(v) for v in value)
        return value.cpu() if isinstance(value, torch.Tensor) and keep else value

    result = full(tree)
    return result if keep else None


def shard_full_tensors(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``value``, a full tensor, as the shard of it that this process keeps when ``like`` is a DTensor of the
    same shape (every process holds ``value``, so nothing is sent); anything else is returned unchanged."""
    if (isinstance(like, DTensor) and isinstance(value, torch.Tensor) and not isinstance(value, DTensor)
            and value.dim() > 0 and value.shape == like.shape):
        return distribute_tensor(value.to(like.device), like.device_mesh, like.placements, src_data_rank=None)
    return value


def _shard_model_state(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                       error_msgs) -> None:
    """``load_state_dict`` pre-hook of the sharded root: full tensors become this process's shards."""
    targets = module.state_dict(keep_vars=True)
    for key in list(state_dict):
        name = key[len(prefix):] if key.startswith(prefix) else None
        if name in targets:
            state_dict[key] = shard_full_tensors(state_dict[key], targets[name])


class OptimizerStateMismatchError(CheckpointMismatchError):
    """A checkpoint's optimizer state that does not fit the sharded run's optimizer (other parameter groups, or
    a state tensor of another shape than its parameter); the runner adds the checkpoint's name."""


def _parameters_by_id(optimizer, state_dict) -> dict:
    """The optimizer's parameters by the ids of a saved state (by position, as ``Optimizer.state_dict`` writes
    them), after checking the state fits them (:class:`OptimizerStateMismatchError`)."""
    sizes = [len(group['params']) for group in optimizer.param_groups]
    saved = [len(group.get('params', ())) for group in state_dict.get('param_groups', ())]
    if sizes != saved:
        raise OptimizerStateMismatchError(
            f"it has parameter groups of {saved} parameters where this run's optimizer has {sizes}")
    params = [p for group in optimizer.param_groups for p in group['params']]
    by_id = dict(zip([i for group in state_dict['param_groups'] for i in group['params']], params))
    for i, values in state_dict.get('state', {}).items():
        param = by_id.get(i)
        for key, value in values.items() if param is not None else ():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != param.shape:
                raise OptimizerStateMismatchError(
                    f"its state {i}.{key} has shape {tuple(value.shape)} where parameter {i} of this run's "
                    f"optimizer has {tuple(param.shape)}")
    return by_id


def _shard_optimizer_state(optimizer, state_dict):
    """``load_state_dict`` pre-hook of the optimizer: the full states of a checkpoint become shards like the
    parameters they belong to. A state that does not fit is :class:`OptimizerStateMismatchError` (left as it is,
    it would fail at the first step: "mixed torch.Tensor and DTensor")."""
    by_id = _parameters_by_id(optimizer, state_dict)
    state = {i: {k: shard_full_tensors(v, by_id[i]) if i in by_id else v for k, v in values.items()}
             for i, values in state_dict['state'].items()}
    return {**state_dict, 'state': state}


def is_fully_sharded(model: nn.Module) -> bool:
    return isinstance(model, FullyShardedModel)
