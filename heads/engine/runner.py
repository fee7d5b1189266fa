"""mmengine's Runner with checkpoints that survive a kill or a full disk, and that load safely and strictly.

- Writes are atomic: a checkpoint is written to ``<name>.partial``, flushed to disk and renamed, then its SHA-256
  is written beside it (``<name>.sha256``), so a kill at any moment leaves either the previous files or the new
  one, never a truncated checkpoint. An old checkpoint (``max_keep_ckpts``, ``save_best``) is deleted only once
  its successor is complete (:class:`~heads.engine.checkpoints.checkpoint_hook.KeepUntilReplacedCheckpointHook`).
- A full disk removes the ``.partial`` and stops with :class:`DiskFullError`, saying which checkpoint is kept.
- ``--resume`` (no file given) takes the newest complete checkpoint of the work dir, whatever its name (the
  iteration recorded inside orders them; complete: its content matches its checksum, or without one it reads
  whole), falling back past damaged ones, which are moved aside (``NAME.damaged``) so that nothing the run
  writes replaces them; with checkpoint files but none complete it stops, listing them
  (:mod:`heads.engine.checkpoints.resume_search`). Files that are checkpoints neither by name (the run's
  template, a checksum sidecar, ``last_checkpoint``) nor by content are left alone, whatever their suffix.
  ``.partial`` files left by a kill are removed first.
- Training refuses ``train_cfg.max_iters`` / ``max_epochs`` below 1 (:mod:`heads.engine.config.values`).
- Reading goes through :func:`zoo.weights.io.read_file`: local files only (URLs are refused), weights-only
  unpickling (a pickle that would run code is refused, saying so), errors that name the file, and
  ``.safetensors`` weights for ``load_from``.
- Two runs of one config starting within one second in one process each log into their own work dir
  (:mod:`heads.engine.console.run_stamp`), not into the first one's.
- ``load_from`` reads this project's checkpoints and mmseg's DPT ones (:mod:`heads.layouts.mmseg`).
- ``load_from`` must fit the model, as in ``tools/test.py``: otherwise :class:`CheckpointMismatchError` names the
  keys. ``load_from_partial=True`` in the config loads the tensors that fit and logs the rest.
- A sharded model (:class:`~heads.engine.distributed.fsdp.FullyShardedModel`, ``--strategy fsdp``) is gathered by every
  process into full tensors that rank 0 writes, in the format of an unsharded run; it initialises itself before
  sharding, and its model and optimizer cut the full tensors they load to their shards.
"""
from __future__ import annotations

import copy
import errno
import re
from pathlib import Path

from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook
from mmengine.model import is_model_wrapper
from mmengine.runner import Runner

from zoo.runtime import apply_kernel_policy
from zoo.weights import CheckpointMismatchError
from zoo.weights.checksum import sidecar
from zoo.weights.durable import replace_durably
from zoo.weights.io import CheckpointError, check_local, read_file, resolve_weight_file

from ..models.task_checkpoint import load_task_checkpoint
from .checkpoints.checkpoint_hook import KeepUntilReplacedCheckpointHook
from .checkpoints.resume_search import (
    DAMAGED_SUFFIX,
    PARTIAL_SUFFIX,
    NoCompleteCheckpointError,
    incomplete_reason,
    latest_complete_checkpoint,
    move_aside,
    no_complete_message,
)
from .config.class_count import more_classes_message
from .config.values import check_train_length
from .console.essentials import show_essentials_on_console
from .console.run_stamp import unique_stamp
from .distributed.effective_batch import apply_effective_batch, world_size_of
from .distributed.fsdp import OptimizerStateMismatchError, gather_full, is_fully_sharded
from .switches.compile import compile_from_config

#: The config switch that lets ``load_from`` load only the tensors that fit the model.
PARTIAL_SWITCH = 'load_from_partial'


class DiskFullError(OSError):
    """No space left while writing a checkpoint; the message says what was removed and what is kept."""


def is_complete(path: Path) -> bool:
    """Whether ``path`` is a whole torch checkpoint (see
    :func:`~heads.engine.checkpoints.resume_search.incomplete_reason`)."""
    return incomplete_reason(Path(path)) is None


def remove_partials(work_dir) -> list[Path]:
    """Delete the ``.partial`` files an interrupted write left in ``work_dir`` (never complete); returns them."""
    stale = sorted(p for p in Path(work_dir).glob(f'*{PARTIAL_SUFFIX}*')
                   if p.is_file() and p.name.endswith((PARTIAL_SUFFIX, sidecar(PARTIAL_SUFFIX).name)))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


class ZooRunner(Runner):
    """:class:`mmengine.runner.Runner` with durable checkpoint writes and safe, strict, explained reads (see the
    module docstring)."""

    @classmethod
    def from_cfg(cls, cfg) -> ZooRunner:
        """mmengine's, with the config's ``effective_batch_size`` made up by gradient accumulation on this run's
        processes (:mod:`heads.engine.distributed.effective_batch`), stated in the log."""
        cfg = copy.deepcopy(cfg)
        note = apply_effective_batch(cfg, world_size_of(cfg))
        runner = super().from_cfg(cfg)
        runner.effective_batch_note = note
        if note:
            runner.logger.info(note)
        return runner

    def setup_env(self, env_cfg) -> None:
        super().setup_env(env_cfg)
        self._timestamp = unique_stamp(self._timestamp)  # before mmengine names the run's instances by it

    def build_logger(self, *args, **kwargs):
        logger = super().build_logger(*args, **kwargs)
        show_essentials_on_console(logger)  # the environment, config and hook table go to the log file only
        return logger

    def wrap_model(self, model_wrapper_cfg, model):
        self.logger.info(apply_kernel_policy(model))  # this machine's CPU kernels (zoo.runtime), before compiling
        compile_from_config(model, self.cfg.get('compile_parts'))  # before DDP wraps it (switches/compile.py)
        wrapped = super().wrap_model(model_wrapper_cfg, model)
        if is_fully_sharded(wrapped):
            self.logger.info(f"FSDP: the model is sharded over {self.world_size} processes in {wrapped.units} units")
        return wrapped

    def _init_model_weights(self) -> None:
        if not is_fully_sharded(self.model):  # a sharded model was initialised and broadcast before sharding
            super()._init_model_weights()

    def build_optim_wrapper(self, optim_wrapper):
        optim_wrapper = super().build_optim_wrapper(optim_wrapper)
        if is_fully_sharded(self.model):
            for optimizer in _optimizers(optim_wrapper):
                self.model.accept_full_optimizer_state(optimizer)
        return optim_wrapper

    # ------------------------------------------------------------------------------------------- writing
    def register_default_hooks(self, hooks=None) -> None:
        hooks = dict(hooks or {})
        checkpoint = hooks.get('checkpoint', dict(type='CheckpointHook', interval=1))
        if isinstance(checkpoint, dict) and checkpoint.get('type') in ('CheckpointHook', CheckpointHook):
            hooks['checkpoint'] = {**checkpoint, 'type': KeepUntilReplacedCheckpointHook}
        super().register_default_hooks(hooks)

    def save_checkpoint(self, out_dir, filename, *args, **kwargs):
        if is_fully_sharded(self.model):
            save_optimizer = kwargs.get('save_optimizer', args[1] if len(args) > 1 else True)
            self._gathered = self._gather_sharded_state(save_optimizer)
        try:
            self._save_checkpoint(out_dir, filename, *args, **kwargs)
        finally:
            self._gathered = None
        for hook in self._hooks:  # mmengine 0.10 has the hook point in its Hook docs but never calls it
            if callable(getattr(hook, 'after_save_checkpoint', None)):
                hook.after_save_checkpoint(self, Path(out_dir) / filename)

    def _gather_sharded_state(self, save_optimizer: bool) -> dict:
        """The sharded model's (and optimizer's) full state, gathered by every process, kept on rank 0: what an
        unsharded run writes under ``state_dict`` and ``optimizer``."""
        gathered = {'state_dict': gather_full(self.model.module.state_dict())}
        if save_optimizer:
            gathered['optimizer'] = gather_full(self.optim_wrapper.state_dict())
        return gathered

    def call_hook(self, fn_name: str, **kwargs) -> None:
        if fn_name == 'before_save_checkpoint' and getattr(self, '_gathered', None):
            kwargs['checkpoint'].update(self._gathered)  # the full tensors in place of this process's shards
        super().call_hook(fn_name, **kwargs)

    def _save_checkpoint(self, out_dir, filename, *args, **kwargs):
        if '://' in str(out_dir):  # a remote store: mmengine's writer, no rename to make atomic
            return super().save_checkpoint(out_dir, filename, *args, **kwargs)
        partial, final = Path(out_dir) / (filename + PARTIAL_SUFFIX), Path(out_dir) / filename
        try:
            super().save_checkpoint(out_dir, partial.name, *args, **kwargs)
            if is_main_process():
                replace_durably(partial, final, checksum=True)
        except OSError as err:
            if is_main_process():
                partial.unlink(missing_ok=True)
                sidecar(partial).unlink(missing_ok=True)
            if err.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError(err.errno, self._disk_full_message(final)) from err
            raise

    def _disk_full_message(self, final: Path) -> str:
        kept = latest_complete_checkpoint(final.parent)
        size = f" (the last one took {kept.stat().st_size / 2 ** 20:.1f} MiB)" if kept else ''
        keeps = (f"kept: {kept} and every checkpoint before it" if kept
                 else "no earlier checkpoint exists; nothing else was written")
        return (f"disk full: no space left on the device of {final.parent} while writing checkpoint {final.name}; "
                f"removed its incomplete {final.name}{PARTIAL_SUFFIX}, {keeps}. Free space there{size} and "
                f"continue with --resume")

    # ------------------------------------------------------------------------------------------- training
    def train(self):
        check_train_length(self.cfg.get('train_cfg'))
        if self._train_loop is not None:  # else mmengine's own error
            message = more_classes_message(self.model, self.train_loop.dataloader.dataset)
            if message:
                self.logger.warning(message)
        return super().train()

    # ------------------------------------------------------------------------------------------- reading
    def load_or_resume(self) -> None:
        if self._resume and self._load_from is None and not self._has_loaded:
            if is_main_process():
                stale = remove_partials(self.work_dir)
                if stale:
                    self.logger.info(f"--resume: removed {len(stale)} incomplete file(s) an interrupted write "
                                     f"left: {', '.join(p.name for p in stale)}")
            skipped: list[tuple[Path, str]] = []
            passed: list[Path] = []
            latest = latest_complete_checkpoint(self.work_dir, skipped, self._checkpoint_templates(), passed)
            if passed:
                self.logger.info(f"--resume: not checkpoints by name or content, left as they are: "
                                 f"{', '.join(p.name for p in passed)}")
            if latest is None and skipped:
                raise NoCompleteCheckpointError(no_complete_message(self.work_dir, skipped))
            for path, reason in skipped:
                moved = move_aside(path) if is_main_process() else path.with_name(path.name + DAMAGED_SUFFIX)
                self.logger.warning(f"--resume: skipping {path.name}: {reason}; kept as {moved.name}")
            if latest is None:
                self.logger.warning(f"--resume: no checkpoint in {self.work_dir}; training from the start")
                self._resume = False
            else:
                self.logger.info(f"--resume: resuming from {latest}, the newest complete checkpoint")
                self._load_from = str(latest)
        super().load_or_resume()

    def _checkpoint_templates(self) -> list[str]:
        """The names the run's checkpoint hooks write (``filename_tmpl``), for finding its checkpoints."""
        return [h.filename_tmpl for h in self.hooks if isinstance(h, CheckpointHook) and h.filename_tmpl]

    def resume(self, filename, *args, **kwargs):
        check_local(filename)
        if str(filename).endswith('.safetensors'):
            raise CheckpointError(
                f"cannot resume from {filename}: a .safetensors file holds weights only, while resuming needs "
                f"the optimizer, scheduler and iteration of a training checkpoint (.pth written by training); "
                f"to start a new run from these weights, pass it as load_from instead")
        self._resuming = True
        try:
            return super().resume(filename, *args, **kwargs)
        except OptimizerStateMismatchError as err:
            raise OptimizerStateMismatchError(
                f"--resume: the optimizer state of checkpoint {filename} does not fit this run's optimizer: {err}. "
                f"Resume with the config it was trained with (model, optimizer, paramwise_cfg), or start from its "
                f"weights with load_from") from None
        finally:
            self._resuming = False

    def load_checkpoint(self, filename, map_location='cpu', strict=False, revise_keys=((r'^module.', ''),)):
        path = resolve_weight_file(filename)  # refuses URLs: nothing is downloaded at run time
        checkpoint = dict(read_file(path))
        if 'state_dict' not in checkpoint:  # a bare state dict (e.g. .safetensors)
            checkpoint = {'state_dict': checkpoint}
        self.checkpoint_being_read = path  # for the hooks' messages (RngStateHook)
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        model = self.model.module if is_model_wrapper(self.model) else self.model
        state = dict(checkpoint['state_dict'])
        for pattern, replacement in revise_keys:
            state = {re.sub(pattern, replacement, k): v for k, v in state.items()}
        resuming = getattr(self, '_resuming', False)
        partial = not resuming and bool(self.cfg.get(PARTIAL_SWITCH, False))
        try:
            report = load_task_checkpoint(model, state, strict=not partial, name=str(path))  # ours or mmseg's
        except CheckpointMismatchError as err:
            hint = ("resume with the config this checkpoint was trained with" if resuming else
                    f"to start from the tensors that fit and leave the rest at their initialisation, set "
                    f"{PARTIAL_SWITCH}=True in the config (--cfg-options {PARTIAL_SWITCH}=True)")
            raise CheckpointMismatchError(f"{'--resume' if resuming else 'load_from'}: {err}\n{hint}") from None
        left = report.missing + report.mismatched
        if partial and (left or report.unexpected):
            self.logger.warning(f"load_from: partial load of {path} ({PARTIAL_SWITCH}=True): left at their "
                                f"initialisation {left[:12]}{' ...' if len(left) > 12 else ''}; not in the model "
                                f"{report.unexpected[:12]}{' ...' if len(report.unexpected) > 12 else ''}")
        self._has_loaded = True
        self.logger.info(f'Load checkpoint from {path}' + (' (mmseg layout)' if report.format == 'mmseg' else ''))
        return checkpoint


def _optimizers(optim_wrapper) -> list:
    """The torch optimizers of an OptimWrapper or an OptimWrapperDict."""
    if hasattr(optim_wrapper, 'optim_wrappers'):
        return [w.optimizer for w in optim_wrapper.optim_wrappers.values()]
    return [optim_wrapper.optimizer]
