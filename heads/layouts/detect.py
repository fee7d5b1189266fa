"""Telling a task-model checkpoint's layout: the one row of a layout table (:data:`heads.layouts.table.LAYOUTS`)
whose ``detect`` says the checkpoint is in it, or a refusal that names the known layouts.

A row (:class:`Layout`) is a name, a ``detect(checkpoint) -> bool`` predicate on a :class:`Checkpoint` (the
state dict, the model it is for, a transformers folder's ``config.json``), a ``convert(state, model) -> state``
function into this project's keys, and the task models it applies to (class names, matched along the model's
class hierarchy). :func:`detect_layout` asks every row: none detecting is :class:`UnknownLayoutError`, more than one
:class:`AmbiguousLayoutError`, a row for other task models :class:`LayoutModelError`; each names the checkpoint, the
rows and what to do, and comes before anything is converted or loaded. :func:`convert_checkpoint` converts with the
row found.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from zoo.weights import CheckpointError, CheckpointLayoutError


@dataclass(frozen=True)
class Checkpoint:
    """What a row's ``detect`` reads: ``state`` (a state dict, training containers unwrapped), the ``model`` it is to
    load into, ``name`` (what messages call it: its path) and ``config``: a transformers folder's ``config.json``,
    None for a checkpoint file."""
    state: dict
    model: nn.Module
    name: str = 'state dict'
    config: dict | None = None


@dataclass(frozen=True)
class Layout:
    """One task-model checkpoint layout: ``name`` (what load reports and messages call it), ``detect`` (whether a
    :class:`Checkpoint` is in it), ``convert`` (its state dict in this project's keys for ``model``), ``models`` (the
    task models' class names it applies to; 'Module': any model) and ``source`` (who writes it, one phrase)."""
    name: str
    detect: Callable[[Checkpoint], bool]
    convert: Callable[[dict, nn.Module], dict]
    models: tuple[str, ...]
    source: str

    def applies_to(self, model: nn.Module) -> bool:
        """Whether ``model`` is (a subclass of) one of :attr:`models`."""
        return any(cls.__name__ in self.models for cls in type(model).__mro__)


class UnknownLayoutError(CheckpointError):
    """A checkpoint that no layout of the table detects: nothing of it is loaded."""


class AmbiguousLayoutError(CheckpointError):
    """A checkpoint that two or more layouts of the table detect: which keys mean what is not known."""


class LayoutModelError(CheckpointError):
    """A checkpoint in a layout of other task models than the one it is loaded into."""


def _known(layouts) -> str:
    return '; '.join(f"{row.name!r} ({row.source}; for {', '.join(row.models)})" for row in layouts)


def detect_layout(checkpoint: Checkpoint, layouts) -> Layout:
    """The one row of ``layouts`` that detects ``checkpoint`` and applies to its model (see the module docstring)."""
    found = [row for row in layouts if row.detect(checkpoint)]
    if not found:
        keys = [str(k) for k in list(checkpoint.state)[:5]]
        raise UnknownLayoutError(
            f"{checkpoint.name}: in none of the task-model checkpoint layouts read here ({len(checkpoint.state)} keys, "
            f"e.g. {', '.join(keys) or 'none'}); nothing was loaded. Layouts read here: {_known(layouts)}. Load a "
            f"checkpoint written in one of them, or add its layout as a row of heads.layouts.table.LAYOUTS")
    if len(found) > 1:
        raise AmbiguousLayoutError(
            f"{checkpoint.name}: in {len(found)} task-model checkpoint layouts at once "
            f"({', '.join(repr(row.name) for row in found)}), so what its keys mean is not known; nothing was loaded. "
            f"Rows of heads.layouts.table.LAYOUTS must detect disjoint checkpoints: narrow their detect predicates")
    row = found[0]
    if not row.applies_to(checkpoint.model):
        raise LayoutModelError(
            f"{checkpoint.name}: a checkpoint in the {row.name!r} layout ({row.source}), which holds a "
            f"{' or '.join(row.models)}, not a {type(checkpoint.model).__name__}; nothing was loaded. Build the model "
            f"the checkpoint is of (the config it was trained or released with) to load it")
    return row


def convert_checkpoint(checkpoint: Checkpoint, layouts) -> tuple[dict, Layout]:
    """``checkpoint``'s state in this project's keys for its model, and the row of ``layouts`` it was in
    (:func:`detect_layout`); a converter's finding of a damaged key names the checkpoint."""
    layout = detect_layout(checkpoint, layouts)
    try:
        return layout.convert(checkpoint.state, checkpoint.model), layout
    except CheckpointLayoutError as err:
        raise err.in_file(checkpoint.name) from None
