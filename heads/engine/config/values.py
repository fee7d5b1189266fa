"""Config values that must be positive whole numbers (``effective_batch_size``, ``train_cfg.max_iters`` /
``max_epochs``), checked before a run builds or trains anything, with one message naming the key and what is
allowed."""
from __future__ import annotations


class ConfigValueError(ValueError):
    """A config key whose value is of the right kind of thing but not allowed (the message names the key)."""


def positive_int(value, key: str, meaning: str, none_means: str | None = None) -> None:
    """Raise :class:`ConfigValueError` unless ``value`` is an int >= 1 (bools, floats such as 4.0, strings and
    lists are refused: a count is written as a whole number); None passes when ``none_means`` says what it does."""
    if value is None and none_means:
        return
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return
    allowed = f"a whole number >= 1 ({meaning})" + (f", or None ({none_means})" if none_means else '')
    raise ConfigValueError(f"config key {key} must be {allowed}; got {value!r} ({type(value).__name__}). Set it "
                           f"in the config or with --cfg-options {key}=N")


def check_train_length(train_cfg) -> None:
    """``train_cfg.max_iters`` / ``max_epochs``, where given, are >= 1: a loop of 0 or fewer trains nothing and
    would end with exit 0 as if it had."""
    if not train_cfg:
        return
    for key, meaning in (('max_iters', 'the iterations to train'), ('max_epochs', 'the epochs to train')):
        if key in train_cfg:
            positive_int(train_cfg[key], f'train_cfg.{key}', meaning)
