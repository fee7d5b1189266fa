"""What produced a result: the settings a run of ``tools/compare.py`` or ``tools/evidence.py`` is recorded with, so
that a result is read back only for the settings it was made with, and runs of different settings never share a
mean or a table.

A run's settings are the digest of its fully resolved config (SHA-256 of the config as canonical JSON, with the
per-run keys that do not change what is trained left out: :data:`PER_RUN`, and the seed, recorded on its own), its
iterations, its seed, and the tool's options that change its result (``options``: e.g. whether costs are
measured, the settings of the prerequisite whose checkpoint it starts from). The canonical config is kept beside
the digest in the run's folder, so that a mismatch can name the keys that differ.
"""
from __future__ import annotations

import hashlib
import json

from heads.engine.config.diff import differing_keys

#: Keys whose values are the run's own paths or switches of how it is started, not what it trains.
PER_RUN = ('work_dir', 'resume', 'randomness.seed')
#: How many differing config keys a message lists.
SHOWN_KEYS = 8


class ProvenanceError(ValueError):
    """Results of different settings were about to share a mean or a table."""


def _plain(value):
    """A JSON-able stand-in for a config value JSON cannot hold (a class, a function: its dotted name)."""
    name = getattr(value, '__qualname__', None)
    return f'{getattr(value, "__module__", "")}.{name}' if name else repr(value)


def canonical_config(cfg, exclude=()) -> dict:
    """``cfg`` as plain JSON values (tuples as lists, classes by name) without :data:`PER_RUN` and ``exclude``
    (dotted keys; a key also drops everything under it)."""
    tree = json.loads(json.dumps(cfg.to_dict() if hasattr(cfg, 'to_dict') else dict(cfg), default=_plain))
    for key in (*PER_RUN, *exclude):
        *parents, last = key.split('.')
        node = tree
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return tree


def digest(tree) -> str:
    """SHA-256 of ``tree`` as canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(tree, sort_keys=True, separators=(',', ':')).encode()).hexdigest()


def settings(cfg, options: dict | None = None, exclude=()) -> dict:
    """The provenance record of a run of ``cfg``: config digest, iterations, seed, options, and the canonical
    config itself (``config``: stored in the run's folder, left out of result.json)."""
    config = canonical_config(cfg, exclude)
    train_cfg = cfg.get('train_cfg') or {}
    iters = train_cfg.get('max_iters', train_cfg.get('max_epochs'))
    return {'config_digest': digest(config), 'iters': iters, 'seed': (cfg.get('randomness') or {}).get('seed'),
            'options': json.loads(json.dumps(options or {}, default=_plain)), 'config': config}


def summary(record: dict) -> dict:
    """``record`` without its canonical config: what result.json carries."""
    return {k: v for k, v in record.items() if k != 'config'}


def differences(recorded: dict, expected: dict, recorded_config: dict | None = None) -> list[str]:
    """What differs between two provenance records, one phrase each ('iters 2, now 4', 'config keys a.b, c (...)');
    ``recorded_config``: the canonical config the recorded run stored, to name the config keys that differ."""
    found = []
    for key in ('iters', 'seed', 'options'):
        if recorded.get(key) != expected.get(key):
            found.append(f'{key} {json.dumps(recorded.get(key))}, now {json.dumps(expected.get(key))}')
    if recorded.get('config_digest') != expected.get('config_digest'):
        keys = sorted(differing_keys(recorded_config, expected['config'])) if recorded_config is not None \
            and 'config' in expected else []
        if keys:
            shown = ', '.join(keys[:SHOWN_KEYS]) + (f' and {len(keys) - SHOWN_KEYS} more' if len(keys) > SHOWN_KEYS
                                                    else '')
            found.append(f'config keys {shown}')
        else:
            found.append(f"config digest {str(recorded.get('config_digest'))[:12]}, now "
                         f"{str(expected.get('config_digest'))[:12]}")
    return found


def check_same_settings(runs: dict[str, dict]) -> None:
    """Raise ProvenanceError unless every run (label -> provenance record) has the settings of the first, the seed
    aside, and each its own seed: only such runs may share a mean."""
    (first_label, first), *rest = runs.items()
    problems = [f'{label} vs {first_label}: ' + '; '.join(found) for label, record in rest
                if (found := differences({**record, 'seed': None}, {**first, 'seed': None}))]
    seeds = [record.get('seed') for record in runs.values()]
    if len(set(map(json.dumps, seeds))) != len(seeds):
        problems.append(f'seeds {seeds} repeat')
    if problems:
        raise ProvenanceError('these runs were made with different settings and cannot share a mean:\n  '
                              + '\n  '.join(problems) + '\nDelete the runs of the settings you do not want and run '
                              'the tool again: it trains the missing ones.')

