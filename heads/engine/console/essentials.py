"""What a run prints on the console: a summary of the run, progress and results. Everything else mmengine logs
(the environment, the whole config, the hook table, per-parameter optimizer options, deprecation notices about its
own internals) still goes to the run's log file, ``<work_dir>/<timestamp>/<timestamp>.log``."""
from __future__ import annotations

import logging

from mmengine.dist import get_world_size
from mmengine.model import is_model_wrapper

from zoo.lora import lora_modules, lora_summary

#: Starts of mmengine's messages that stay in the log file only.
LOG_FILE_ONLY = (
    'System environment:', '-' * 20, 'Config:', 'Hooks will be executed in the following order',
    'paramwise_options --', 'Distributed training is not used', 'Exp name:', 'Checkpoints will be saved to',
    '"FileClient" will be deprecated', '"HardDiskBackend" is the alias', 'Saving checkpoint at',
    'Load checkpoint from', 'kernel policy:', '--restart: moved',
)


#: Parts of mmengine's messages that stay in the log file only: one line per frozen parameter (a LoRA fine-tune's
#: summary line says how many are trained instead).
LOG_FILE_ONLY_PARTS = ('is skipped since its requires_grad=False',)


class ConsoleFilter(logging.Filter):
    """Drops the records of :data:`LOG_FILE_ONLY` and :data:`LOG_FILE_ONLY_PARTS` from the handler it is added to."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not message.lstrip().startswith(LOG_FILE_ONLY) and not any(p in message for p in LOG_FILE_ONLY_PARTS)


def show_essentials_on_console(logger: logging.Logger) -> None:
    """Add :class:`ConsoleFilter` to ``logger``'s console handlers (not to its file handler)."""
    for handler in logger.handlers:
        if type(handler) is logging.StreamHandler and not any(isinstance(f, ConsoleFilter) for f in handler.filters):
            handler.addFilter(ConsoleFilter())


def count(n: float) -> str:
    """3_456_789 -> '3.46 M'."""
    for unit, size in (('G', 1e9), ('M', 1e6), ('k', 1e3)):
        if n >= size:
            return f'{n / size:.3g} {unit}'
    return f'{n:g}'


def describe_model(cfg: dict) -> str:
    """'Segmentor (ZooBackbone vit_tiny_patch16_224, DPTNeck, DPTSegHead)' from a model config."""
    parts = []
    for key in ('backbone', 'classifier', 'neck', 'decode_head'):
        part = cfg.get(key)
        if isinstance(part, dict) and 'type' in part:
            parts.append(' '.join(str(v) for v in (part['type'], part.get('name')) if v))
    return f"{cfg.get('type', 'model')} ({', '.join(parts)})" if parts else str(cfg.get('type', 'model'))


def run_summary(runner) -> str:
    """One paragraph about the training run ``runner`` is starting: model, parameters, schedule, data, where the
    files go."""
    model = runner.model.module if is_model_wrapper(runner.model) else runner.model
    params = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    cfg = runner.cfg
    loop = runner.train_loop
    lines = [f"{runner.experiment_name}: {describe_model(cfg.get('model', {}))}, {count(params)} parameters"
             + (f' ({count(trainable)} trainable)' if trainable != params else '')]
    if lora_modules(model):  # a LoRA fine-tune: what it trains and the size of what it will save
        lines.append(f'  {lora_summary(model)}')
    batch = cfg.get('train_dataloader', {}).get('batch_size')
    schedule = f'{loop.max_iters} iterations' + (f' of batch {batch}' if batch else '')
    if get_world_size() > 1:
        schedule += f' per process, {get_world_size()} processes (distributed training)'
    if runner.iter:
        schedule += f', resuming after iteration {runner.iter}'
    interval = getattr(loop, 'val_interval', None)
    if runner.val_loop is not None and interval:
        schedule += f', validation every {interval}'
    lines.append(f'  schedule: {schedule}; {len(runner.train_dataloader.dataset)} training samples')
    note = getattr(runner, 'effective_batch_note', None)
    if note:
        lines.append(f'  {note}')
    lines.append(f'  work dir: {runner.work_dir} (checkpoints, predictions, TensorBoard); full log and config: '
                 f'{runner.logger.log_file}')
    return '\n'.join(lines)
