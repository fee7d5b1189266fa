"""Random-number state in checkpoints, so that a resumed run draws the same dropout / DropPath masks.

mmengine resumes the data side by replaying the sampler and pipeline up to the checkpoint's iteration (the
pipeline's numpy draws repeat with it), but the torch generator that the model draws from starts afresh. The
hook stores the torch (CPU and CUDA) generator states with each checkpoint and puts them back right before
the first iteration after a resume, after mmengine's replay of the data. With them it stores the process's
timed kernel choice (:func:`zoo.runtime.conv_grad.choice`), which the resumed process then takes instead of timing
again: a timing near its margin could choose the other kernel, whose sums round differently. For the same reason
the processes of a distributed CPU run all take rank 0's choice (each would otherwise time its own, and a
checkpoint records rank 0's only).

What a resume reads is checked before anything is set: a malformed generator state (not the dict this hook
writes, a missing key, a tensor of another type or size) is a :class:`RngStateError` naming the checkpoint and
the key; a kernel choice other than 'gemm' / 'onednn' / None only costs speed, so it is a warning and the
kernels are timed afresh. A checkpoint loaded to start a new run (``load_from``) has its state ignored, unread.
"""
from __future__ import annotations

import torch
from mmengine.dist import broadcast_object_list, get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from zoo.runtime import conv_grad
from zoo.weights import CheckpointError

from ...registry import HOOKS

KEY = 'torch_rng_state'
KERNEL_KEY = 'conv_weight_grad'
KERNELS = (None, 'gemm', 'onednn')


class RngStateError(CheckpointError):
    """A checkpoint's stored generator state that cannot be restored (the message names the file and the key)."""


def recorded_iteration(checkpoint) -> int | None:
    """``meta.iter`` of a checkpoint when it is a whole number, else None."""
    meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
    value = meta.get('iter') if isinstance(meta, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _generator_state(value, where: str, size: int) -> torch.Tensor:
    if not (isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1):
        shown = (f"a {value.dtype} tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor)
                 else f"{type(value).__name__} {str(value)[:60]!r}")
        raise ValueError(f"{where} must be a 1-D torch.uint8 tensor, got {shown}")
    if size and value.numel() != size:
        raise ValueError(f"{where} holds {value.numel()} bytes where a torch generator state has {size}")
    return value


def _check_cpu_state(value: torch.Tensor) -> None:
    """Raise ValueError unless torch's CPU generator takes ``value`` (tried on a generator of its own)."""
    try:
        torch.Generator().set_state(value)
    except RuntimeError as err:
        raise ValueError(f"{KEY}['cpu'] is not a state torch's generator takes ({err})") from None


def parse_rng_state(state, name: str) -> tuple[torch.Tensor, list[torch.Tensor], object]:
    """(cpu state, cuda states, kernel choice as recorded) of a checkpoint's ``torch_rng_state``; raises
    :class:`RngStateError` naming ``name`` and the key when the generator states are malformed."""
    try:
        if not isinstance(state, dict):
            raise ValueError(f"{KEY} must be a dict with 'cpu' and 'cuda', got {type(state).__name__}")
        for key in ('cpu', 'cuda'):
            if key not in state:
                raise ValueError(f"{KEY} has no '{key}' (it has {sorted(map(str, state))[:6]})")
        cpu = _generator_state(state['cpu'], f"{KEY}['cpu']", torch.get_rng_state().numel())
        _check_cpu_state(cpu)
        if not isinstance(state['cuda'], (list, tuple)):
            raise ValueError(f"{KEY}['cuda'] must be a list of tensors, got {type(state['cuda']).__name__}")
        cuda = [_generator_state(v, f"{KEY}['cuda'][{i}]", 0) for i, v in enumerate(state['cuda'])]
    except ValueError as err:
        raise RngStateError(
            f"cannot resume the random-number state of checkpoint {name}: {err}. RngStateHook writes "
            f"{{'cpu': torch.get_rng_state(), 'cuda': [...], '{KERNEL_KEY}': ...}}: the checkpoint was damaged or "
            f"edited. Resume from another checkpoint, or delete its '{KEY}' entry to resume without the exact "
            f"random draws (dropout and DropPath masks then differ from an uninterrupted run)") from None
    return cpu, cuda, state.get(KERNEL_KEY)


@HOOKS.register_module()
class RngStateHook(Hook):
    """Saves the torch generator states (and the convolution kernel choice) in checkpoints and restores them when
    training resumes."""

    priority = 'VERY_LOW'

    def __init__(self):
        self._pending: tuple[int | None, object, str] | None = None
        self._pinned = False

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint[KEY] = {'cpu': torch.get_rng_state(),
                           'cuda': torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
                           KERNEL_KEY: conv_grad.decided()}

    def before_train(self, runner) -> None:
        """Distributed training on CPU: every process takes rank 0's kernel choice for the run (a resumed run's
        recorded choice, read by every process from the same file, still replaces it at the first iteration)."""
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if get_world_size() < 2 or any(p.device.type != 'cpu' for p in model.parameters()):
            return
        agreed = [conv_grad.choice() if get_rank() == 0 else None]  # rank 0 alone times the kernels
        broadcast_object_list(agreed)
        conv_grad.pin(agreed[0])
        self._pinned = True

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if KEY in checkpoint:
            name = str(getattr(runner, 'checkpoint_being_read', None) or 'being resumed')
            self._pending = (recorded_iteration(checkpoint), checkpoint[KEY], name)

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        if self._pending is None:
            return
        iteration, state, name = self._pending
        self._pending = None
        if iteration is None or iteration != runner.iter:  # weights loaded to start a new run (load_from)
            return
        cpu, cuda, kernel = parse_rng_state(state, name)
        if kernel is None or (isinstance(kernel, str) and kernel in KERNELS):
            if kernel:
                conv_grad.pin(kernel)
                self._pinned = True
        else:
            runner.logger.warning(
                f"checkpoint {name}: its recorded convolution kernel choice {KEY}['{KERNEL_KEY}'] is "
                f"{str(kernel)[:60]!r}, not one of {KERNELS[1:]}: the kernels are timed afresh (a speed matter; "
                f"the resumed run may round differently from an uninterrupted one)")
        torch.set_rng_state(cpu)
        if cuda and torch.cuda.is_available():
            try:
                torch.cuda.set_rng_state_all(cuda)
            except RuntimeError as err:
                raise RngStateError(f"cannot resume the random-number state of checkpoint {name}: "
                                    f"{KEY}['cuda'] is not a state CUDA's generators take ({err})") from err

    def after_run(self, runner) -> None:
        if self._pinned:  # the choice belongs to the resumed run, not to later runs of this process
            conv_grad.pin(None)
            self._pinned = False
