"""The rule every tool that writes files keeps: an output is never one of the tool's inputs. Standard library only
(a tool checks its arguments before it imports torch).

Two paths are the same file when they resolve to one path (symbolic links followed, ``..`` removed) or, both
existing, ``os.path.samefile`` says so (hard links, bind mounts). A folder the tool writes into is checked by the
paths it writes there, and is refused outright when it is an input folder.
"""
from __future__ import annotations

import os
from pathlib import Path


def same_path(a, b) -> bool:
    """Whether ``a`` and ``b`` name the same file or folder (module doc)."""
    a, b = Path(a), Path(b)
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def clashes(outputs: dict[str, object], inputs: dict[str, object]) -> list[str]:
    """One line per output that is an input or another output: ``{'--out': path}`` against ``{'MODEL': path}``
    (None values are left out). Empty when every output is new to the tool's inputs."""
    outputs = {k: v for k, v in outputs.items() if v is not None}
    inputs = {k: v for k, v in inputs.items() if v is not None}
    found = []
    for out_name, out in outputs.items():
        for in_name, source in inputs.items():
            if same_path(out, source):
                alias = '' if str(out) == str(source) else f' ({out} and {source} are one file)'
                found.append(f"{out_name} {out} is the input {in_name}{alias}")
    names = list(outputs)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            if same_path(outputs[first], outputs[second]):
                found.append(f"{first} and {second} are the same file {outputs[first]}")
    return found


def refuse_outputs_that_are_inputs(error, outputs: dict[str, object], inputs: dict[str, object]) -> None:
    """Call ``error(message)`` (a parser's ``error``: it exits) when :func:`clashes` finds any, before anything is
    written; the message says that nothing was written and what to do."""
    found = clashes(outputs, inputs)
    if found:
        error('; '.join(found) + ': writing it would replace that input. Nothing was written; give the output '
              'another path.')


def files_in(folder) -> dict[str, Path]:
    """{'FOLDER/name': path} of the files directly in ``folder`` (none when it is not a folder), to be passed as
    inputs when a tool reads a whole folder."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {str(path): path for path in sorted(folder.iterdir()) if path.is_file()}
