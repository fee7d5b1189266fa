"""Turning command-line choices into an mmengine config: paths, resume, autocast, distributed on CPU."""
from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist
from mmengine.config import Config, DictAction  # noqa: F401  (DictAction re-exported for the tools)

DATALOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')


def load_config(path, cfg_options=None, work_dir=None, data_root=None) -> Config:
    cfg = Config.fromfile(str(path))
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if data_root:
        for name in DATALOADERS:
            if cfg.get(name) and 'data_root' in cfg[name].get('dataset', {}):
                cfg[name].dataset.data_root = data_root
    cfg.work_dir = work_dir or cfg.get('work_dir') or str(Path('work_dirs') / Path(path).stem)
    hooks = cfg.setdefault('custom_hooks', [])
    if not any(h.get('type') == 'SafeCheckpointHook' for h in hooks):
        hooks.append(dict(type='SafeCheckpointHook'))
    return cfg


def enable_autocast(cfg: Config, dtype: str = 'bfloat16') -> None:
    """Train under torch.autocast (bf16) on CPU or GPU through AutocastOptimWrapper."""
    cfg.optim_wrapper.type = 'AutocastOptimWrapper'
    cfg.optim_wrapper.dtype = dtype


def enable_resume(cfg: Config, checkpoint: str | None) -> None:
    """Resume from ``checkpoint``, or from the work dir's latest one when None ('auto')."""
    cfg.resume = True
    cfg.load_from = checkpoint


def setup_launcher(cfg: Config, launcher: str) -> None:
    """'pytorch' (torchrun): NCCL on GPUs as mmengine does; on CPU, gloo initialised here and DDP without
    device_ids (mmengine would call torch.cuda.set_device and pass device_ids, both of which fail on CPU)."""
    cfg.launcher = launcher
    if launcher == 'none' or torch.cuda.is_available():
        return
    if not dist.is_initialized():
        dist.init_process_group('gloo', rank=int(os.environ['RANK']), world_size=int(os.environ['WORLD_SIZE']))
    cfg.model_wrapper_cfg = dict(type='MMDistributedDataParallel', broadcast_buffers=False)
