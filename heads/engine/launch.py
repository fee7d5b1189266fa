"""Turning command-line choices into an mmengine config: paths, resume, autocast, distributed on CPU."""
from __future__ import annotations

import gc
import os
from pathlib import Path

import torch
import torch.distributed as dist
from mmengine.config import Config

from .checkpoints.earlier_run import check_earlier_run
from .config.check import check_config_keys

DATALOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')
#: Hooks every run gets (added when a config does not list them): weights-only-loadable checkpoints, the torch
#: generator state in checkpoints for exact resumes, a stop at the first non-finite loss.
REQUIRED_HOOKS = ('SafeCheckpointHook', 'RngStateHook', 'NonFiniteLossHook')


def innermost_dataset(holder: dict) -> dict:
    """The dataset config of a dataloader config (or a dataset's config) that is wrapped by none: through wrappers'
    ``dataset`` (e.g. :class:`~heads.datasets.VideoClipDataset`'s) down to the one with the data; {} if none."""
    dataset = holder.get('dataset', {})
    while isinstance(dataset, dict) and 'data_root' not in dataset and isinstance(dataset.get('dataset'), dict):
        dataset = dataset['dataset']
    return dataset if isinstance(dataset, dict) else {}


def load_config(path, cfg_options=None, work_dir=None, data_root=None) -> Config:
    cfg = Config.fromfile(str(path))
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if data_root:
        for name in DATALOADERS:
            dataset = innermost_dataset(cfg.get(name) or {})
            if 'data_root' in dataset:
                dataset.data_root = data_root
    cfg.work_dir = work_dir or cfg.get('work_dir') or str(Path('work_dirs') / Path(path).stem)
    hooks = cfg.setdefault('custom_hooks', [])
    present = {h.get('type') for h in hooks}
    hooks.extend(dict(type=name) for name in REQUIRED_HOOKS if name not in present)
    backbone = cfg.get('model', {}).get('backbone')
    if isinstance(backbone, dict) and backbone.get('lora') and 'LoRAAdapterHook' not in present:
        hooks.append(dict(type='LoRAAdapterHook'))  # a LoRA fine-tune also writes its adapters alone
    check_config_keys(cfg.to_dict())
    return cfg


def enable_deterministic(cfg: Config) -> None:
    """Deterministic algorithms everywhere (mmengine's ``randomness.deterministic``), and the cuBLAS workspace
    setting CUDA needs for them. Bilinear/bicubic resizing then runs as matrix products (see
    :func:`zoo.core.resize.interpolate`), since CUDA has no deterministic backward for them."""
    cfg.randomness = dict(cfg.get('randomness') or {}, deterministic=True)
    cfg.randomness.setdefault('seed', 0)
    os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')


def enable_compile(cfg: Config) -> None:
    """torch.compile the backbone and neck when the runner builds the model (heads/engine/switches/compile.py)."""
    cfg.compile_parts = dict(parts=['backbone', 'neck'], dynamic=None)


def enable_autocast(cfg: Config, dtype: str = 'bfloat16') -> None:
    """Train under torch.autocast (bf16) on CPU or GPU through AutocastOptimWrapper."""
    cfg.optim_wrapper.type = 'AutocastOptimWrapper'
    cfg.optim_wrapper.dtype = dtype


def enable_resume(cfg: Config, checkpoint: str | None) -> None:
    """Resume from ``checkpoint``, or from the work dir's latest one when None ('auto')."""
    cfg.resume = True
    cfg.load_from = checkpoint


def keep_earlier_run(cfg: Config, restart: bool = False) -> str | None:
    """Before a run that does not resume is built: stop if its work dir holds an earlier run's checkpoints, or with
    ``restart`` move that run's files aside first (:mod:`heads.engine.checkpoints.earlier_run`); returns what was
    moved where, or None. Under torchrun only rank 0 moves (the others wait for it at the process group's start)."""
    if cfg.get('resume') or '://' in str(cfg.work_dir):
        return None
    if restart and int(os.environ.get('RANK', '0')) != 0:
        return None
    checkpoint = (cfg.get('default_hooks') or {}).get('checkpoint') or {}
    template = checkpoint.get('filename_tmpl') if isinstance(checkpoint, dict) else None
    return check_earlier_run(cfg.work_dir, [template] if template else [], restart)


STRATEGIES = ('ddp', 'fsdp')
FSDP_WRAPPER = 'FullyShardedModel'


def end_launch() -> None:
    """Leave the process group a distributed run joined, and join gloo's threads before the interpreter exits.

    destroy_process_group alone leaves gloo's threads running: the runner's DDP wrapper sits in reference cycles
    that keep the group object alive until a garbage collection, which at exit may never come before C++ tears
    the threads down unjoined ('terminate called without an active exception', SIGABRT after a finished run;
    3 of 26 torchrun runs on a loaded 2-core AVX-512 EPYC, 2026-12-05). Collecting here ends them. Nothing when
    the run was not distributed."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        gc.collect()


def setup_launcher(cfg: Config, launcher: str, strategy: str = 'ddp') -> None:
    """'pytorch' (torchrun): NCCL on GPUs as mmengine does; on CPU, gloo initialised here and the model wrapped
    by DDP without device_ids (mmengine would call torch.cuda.set_device and pass ``device_ids=[LOCAL_RANK]``,
    both of which fail on CPU). A ``model_wrapper_cfg`` of the config is kept, completed for CPU.

    ``strategy='fsdp'``: the model is sharded over the processes instead (:mod:`heads.engine.distributed.fsdp`);
    options of the wrapper given in the config (``model_wrapper_cfg.param_dtype=bfloat16``, ...) are kept.

    DDP looks for parameters without gradient (``find_unused_parameters``) unless the config says otherwise:
    DPT's deepest fusion block has no skip input, so its first residual unit never takes part in the loss, and
    DDP without the search stops at the second iteration."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r} is not one of {STRATEGIES}")
    cfg.launcher = launcher
    if strategy == 'fsdp':
        _use_fsdp(cfg, launcher)
    if launcher == 'none':
        return
    cfg.setdefault('find_unused_parameters', True)
    if torch.cuda.is_available():
        return
    if not dist.is_initialized():
        dist.init_process_group('gloo', rank=int(os.environ['RANK']), world_size=int(os.environ['WORLD_SIZE']))
    cfg.model_wrapper_cfg = _cpu_model_wrapper_cfg(cfg.get('model_wrapper_cfg'), cfg.find_unused_parameters)


def _cpu_model_wrapper_cfg(wrapper_cfg, find_unused_parameters: bool) -> dict:
    """The config's model wrapper (default: mmengine's DDP, buffers not broadcast as mmengine does) with
    ``device_ids=None``: mmengine's Runner.wrap_model passes ``device_ids=[LOCAL_RANK]`` to every DDP subclass
    unless the config names them, and DDP refuses device ids for a CPU module."""
    wrapper_cfg = dict(wrapper_cfg or {})
    wrapper_cfg.setdefault('type', 'MMDistributedDataParallel')
    if 'DistributedDataParallel' in str(wrapper_cfg['type']):
        wrapper_cfg.setdefault('broadcast_buffers', False)
        wrapper_cfg.setdefault('find_unused_parameters', find_unused_parameters)
        wrapper_cfg['device_ids'] = None
    return wrapper_cfg


def _use_fsdp(cfg: Config, launcher: str) -> None:
    """``model_wrapper_cfg`` of type FullyShardedModel (its options in the config kept); refused without a
    distributed launch, or over another wrapper the config names."""
    if launcher == 'none':
        raise ValueError("--strategy fsdp shards the model over the processes of a distributed launch, and "
                         "--launcher is 'none' (one process, nothing to shard over). Launch it with torchrun: "
                         "torchrun --nproc_per_node 2 tools/train.py CONFIG --launcher pytorch --strategy fsdp")
    wrapper = dict(cfg.get('model_wrapper_cfg') or {})
    if wrapper.get('type', FSDP_WRAPPER) != FSDP_WRAPPER:
        raise ValueError(f"--strategy fsdp: the config's model_wrapper_cfg is {wrapper['type']!r}; remove it, or "
                         f"train without --strategy fsdp")
    cfg.model_wrapper_cfg = {**wrapper, 'type': FSDP_WRAPPER}
