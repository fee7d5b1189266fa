"""What machine a record was made on, and its kind: the name of the store file its records go to.

A kind is what makes figures comparable: the CPU model's maker and family, its widest vector ISA (``avx2``,
``avx512``, ``amx``) and its core count, or the GPU's name, e.g. ``cpu-amd-epyc-avx512-2c``, ``gpu-nvidia-h200``.
Figures of two kinds never share a median.
"""
from __future__ import annotations

import os
import platform
import re
from pathlib import Path

#: The widest ISA first: a CPU is named by the first of these its flags list.
ISAS = (('amx_tile', 'amx'), ('avx512f', 'avx512'), ('avx2', 'avx2'))


def cpu_info(text: str | None = None) -> dict:
    """``{'cpu': model name, 'isa': 'amx' | 'avx512' | 'avx2' | 'other', 'cores': n}`` from /proc/cpuinfo's ``text``
    (read when None; other systems: what platform says, ISA 'other')."""
    if text is None:
        path = Path('/proc/cpuinfo')
        text = path.read_text() if path.exists() else ''
    fields = [line.split(':', 1) for line in text.splitlines() if ':' in line]
    name = next((v.strip() for k, v in fields if k.strip() == 'model name'), platform.processor() or 'unknown')
    flags = set(next((v.split() for k, v in fields if k.strip() == 'flags'), ()))
    isa = next((short for flag, short in ISAS if flag in flags), 'other')
    return {'cpu': name, 'isa': isa, 'cores': os.cpu_count() or 1}


def gpu_name() -> str | None:
    """The first CUDA device's name, or None (torch is imported only if a tool already did)."""
    import sys
    torch = sys.modules.get('torch')
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(0)


def slug(text: str) -> str:
    """'AMD EPYC 9R14 96-Core Processor' -> 'amd-epyc-9r14-96-core-processor'."""
    return re.sub(r'[^a-z0-9]+', '-', text.lower()).strip('-')


def cpu_family(name: str) -> str:
    """The maker and family of a CPU model name: 'AMD EPYC 7R13 Processor' -> 'amd-epyc',
    'Intel(R) Xeon(R) Platinum 8488C' -> 'intel-xeon'; else the first two words."""
    words = slug(re.sub(r'\((R|TM)\)', '', name, flags=re.I)).split('-')
    return '-'.join(words[:2]) or 'unknown'


def kind(info: dict) -> str:
    """The store file's name for a machine ``info`` (:func:`machine`)."""
    if info.get('gpu'):
        return 'gpu-' + slug(info['gpu'])
    return f"cpu-{cpu_family(info['cpu'])}-{info['isa']}-{info['cores']}c"


def machine(device: str = 'cpu') -> dict:
    """This machine: its CPU (:func:`cpu_info`) and, for ``device='cuda'``, the GPU the record's figures ran on."""
    info = cpu_info()
    info['gpu'] = gpu_name() if device == 'cuda' else None
    return info
