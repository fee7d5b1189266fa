"""Writing a LoRA fine-tune's adapters as their own small file beside the checkpoints (:mod:`zoo.lora`)."""
from __future__ import annotations

from pathlib import Path

from mmengine.dist import is_main_process
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from zoo.lora import lora_modules, save_adapters

from ...registry import HOOKS


@HOOKS.register_module()
class LoRAAdapterHook(Hook):
    """With every checkpoint (as it is written) and at the end of training, the model's adapters to
    ``<work_dir>/<filename>`` (safetensors; load with ``zoo.lora.load_adapters``). Added to every run whose model
    has LoRA layers.

    Written as checkpoints are: to ``<filename>.partial``, flushed to disk, renamed over the previous file and
    its SHA-256 written beside it (:func:`zoo.lora.save_adapters`), so that a failed or interrupted
    write leaves the previous file whole; the error then stops the run, as a failed checkpoint write does."""
    priority = 'LOW'

    def __init__(self, filename: str = 'lora_adapters.safetensors'):
        self.filename = filename

    def _save(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if is_main_process() and lora_modules(model):
            path = Path(runner.work_dir) / self.filename
            try:
                size = save_adapters(model, path)
            except BaseException:
                runner.logger.error(f"LoRA adapters not written: {path} is kept as it was"
                                    f"{'' if path.exists() else ' (none yet)'}")
                raise
            runner.logger.info(f"LoRA adapters written to {path} ({size / 1024:.1f} KiB)")

    def before_save_checkpoint(self, runner, checkpoint) -> None:
        self._save(runner)  # mmengine 0.10 has no after_save_checkpoint: this point is what every checkpoint calls

    def after_train(self, runner) -> None:
        self._save(runner)
