"""mmengine's Runner with checkpoints that survive a kill and load safely.

- Writes are atomic: a checkpoint is written to ``<name>.partial``, flushed to disk and renamed, so a kill at
  any moment leaves either the previous files or the new one, never a truncated checkpoint.
- ``--resume`` (no file given) takes the newest complete checkpoint of the work dir: the one ``last_checkpoint``
  names when it is whole, else the highest-numbered ``iter_*.pth`` / ``epoch_*.pth`` that is.
- Reading goes through :func:`zoo.weights.io.read_file`: weights-only unpickling (a pickle that would run code
  is refused, saying so), errors that name the file, and ``.safetensors`` weights for ``load_from``.
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

from mmengine.dist import is_main_process
from mmengine.model import is_model_wrapper
from mmengine.runner import Runner
from mmengine.runner.checkpoint import _load_checkpoint_to_model

from zoo.weights.io import CheckpointError, read_file, resolve_weight_file

from ..durable import replace_durably

PARTIAL_SUFFIX = '.partial'
_NUMBERED = re.compile(r'(?:iter|epoch)_(\d+)\.pth$')


def is_complete(path: Path) -> bool:
    """Whether ``path`` is a whole torch checkpoint (its zip directory, written last, is readable)."""
    return path.is_file() and zipfile.is_zipfile(path)


def latest_complete_checkpoint(work_dir) -> Path | None:
    """The checkpoint to resume from: ``last_checkpoint``'s target if complete, else the newest complete
    numbered one in ``work_dir``; None when there is none."""
    work_dir = Path(work_dir)
    pointer = work_dir / 'last_checkpoint'  # written in place by mmengine: trusted only when it names a whole file
    named = pointer.read_text().strip() if pointer.is_file() else ''
    if named and is_complete(Path(named)):
        return Path(named)
    numbered = sorted((int(m.group(1)), p) for p in work_dir.glob('*.pth') if (m := _NUMBERED.search(p.name)))
    return next((p for _, p in reversed(numbered) if is_complete(p)), None)


class ZooRunner(Runner):
    """:class:`mmengine.runner.Runner` with atomic checkpoint writes and safe, explained checkpoint reads."""

    def save_checkpoint(self, out_dir, filename, *args, **kwargs):
        local = '://' not in str(out_dir)
        super().save_checkpoint(out_dir, filename + PARTIAL_SUFFIX if local else filename, *args, **kwargs)
        if local and is_main_process():
            replace_durably(Path(out_dir) / (filename + PARTIAL_SUFFIX), Path(out_dir) / filename)

    def load_or_resume(self) -> None:
        if self._resume and self._load_from is None and not self._has_loaded:
            latest = latest_complete_checkpoint(self.work_dir)
            if latest is None:
                self.logger.warning(f"--resume: no complete checkpoint in {self.work_dir}; training from the start")
                self._resume = False
            else:
                self._load_from = str(latest)
        super().load_or_resume()

    def resume(self, filename, *args, **kwargs):
        if str(filename).endswith('.safetensors'):
            raise CheckpointError(
                f"cannot resume from {filename}: a .safetensors file holds weights only, while resuming needs "
                f"the optimizer, scheduler and iteration of a training checkpoint (.pth written by training); "
                f"to start a new run from these weights, pass it as load_from instead")
        return super().resume(filename, *args, **kwargs)

    def load_checkpoint(self, filename, map_location='cpu', strict=False, revise_keys=((r'^module.', ''),)):
        if '://' in str(filename):  # URLs and mmengine's schemes: mmengine's loaders
            return super().load_checkpoint(filename, map_location, strict, list(revise_keys))
        checkpoint = dict(read_file(resolve_weight_file(Path(filename))))
        if 'state_dict' not in checkpoint:  # a bare state dict (e.g. .safetensors)
            checkpoint = {'state_dict': checkpoint}
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        model = self.model.module if is_model_wrapper(self.model) else self.model
        checkpoint = _load_checkpoint_to_model(model, checkpoint, strict, revise_keys=list(revise_keys))
        self._has_loaded = True
        self.logger.info(f'Load checkpoint from {filename}')
        return checkpoint
