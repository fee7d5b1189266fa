"""mmengine's CheckpointHook, except that an old checkpoint goes only once its successor is complete.

mmengine 0.10.7 deletes the oldest checkpoint (``max_keep_ckpts``) and the previous best one (``save_best``)
*before* writing the new one, so a kill or a full disk during the write can leave no checkpoint at all
(``max_keep_ckpts=1``). Here those deletions wait until the new file is written, renamed into place and
``last_checkpoint`` names it; when the write fails they do not happen. Removing a checkpoint also removes its
checksum sidecar. :class:`heads.engine.ZooRunner` uses this hook wherever a config asks for 'CheckpointHook'.
"""
from __future__ import annotations

from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook

from zoo.weights.checksum import sidecar

from ...registry import HOOKS


class _DeferredRemovals:
    """The hook's file backend, with ``remove``/``rmtree`` noted instead of done (everything else passes)."""

    def __init__(self, backend):
        self._backend = backend
        self.pending: list[tuple[str, str]] = []

    def remove(self, path) -> None:
        self.pending.append(('remove', path))

    def rmtree(self, path) -> None:
        self.pending.append(('rmtree', path))

    def __getattr__(self, name):
        return getattr(self._backend, name)


@HOOKS.register_module()
class KeepUntilReplacedCheckpointHook(CheckpointHook):
    """:class:`mmengine.hooks.CheckpointHook` whose deletions of old checkpoints wait for the new one (see the
    module docstring). Same arguments; its ``**kwargs`` go to ``Runner.save_checkpoint``, which takes none
    beyond those the hook passes, so a misspelled key is an error of the config check."""

    def _save_checkpoint_with_step(self, runner, step, meta):
        self._deferring(super()._save_checkpoint_with_step, runner, step, meta)

    def _save_best_checkpoint(self, runner, metrics) -> None:
        self._deferring(super()._save_best_checkpoint, runner, metrics)

    def _deferring(self, save, *args) -> None:
        backend = self.file_backend
        deferred = self.file_backend = _DeferredRemovals(backend)
        try:
            save(*args)
        finally:
            self.file_backend = backend
        for action, path in deferred.pending:  # the new checkpoint is complete: now the old ones may go
            if isinstance(backend, _DeferredRemovals):  # within a save_best: that save is not finished yet
                backend.pending.append((action, path))
                continue
            getattr(backend, action)(path)
            if action == 'remove' and '://' not in str(path) and is_main_process():
                sidecar(path).unlink(missing_ok=True)
