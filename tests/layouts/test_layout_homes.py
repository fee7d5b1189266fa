"""Each checkpoint layout has one home: the DPT neck's names of each source are written in one module, and zoo's
backbone layouts name no part of a task model.

Read from the source: the string constants of each module's code (docstrings and comments are prose, not counted).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: A name each source gives a DPT neck part: isl-org's (also Depth Anything's), transformers', mmseg's.
DPT_NAMES = ('resConfUnit', 'refinenet', 'reassemble_stage', 'fusion_stage', 'residual_layer', 'res_conv_unit',
             'fusion_blocks')
#: This project's task-model key prefixes, which only heads may name.
TASK_KEYS = ('neck.', 'decode_head.', 'auxiliary_head.')


def _strings(path: Path) -> list[str]:
    """The string constants of ``path``'s code, without its docstrings."""
    tree = ast.parse(path.read_text(encoding='utf-8'))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def _modules(*packages: str) -> dict[str, list[str]]:
    return {str(path.relative_to(ROOT)): _strings(path) for package in packages
            for path in sorted((ROOT / package).rglob('*.py'))}


def test_each_sources_dpt_names_are_written_in_one_module():
    modules = _modules('zoo', 'heads')
    homes = {name: sorted(m for m, strings in modules.items() if any(name in s for s in strings)) for name in DPT_NAMES}
    assert all(len(found) == 1 for found in homes.values()), homes


def test_zoo_weights_name_no_task_model_key():
    named = {m: sorted({s for s in strings if any(key in s for key in TASK_KEYS)})
             for m, strings in _modules('zoo/weights').items()}
    named = {m: s for m, s in named.items() if s}
    assert not named, f"zoo.weights names task-model keys (their layouts belong in heads.layouts): {named}"


def test_rename_tables_read_one_rule_a_line():
    from zoo.weights.rename import rename_keys, rules
    table = rules(r"""
        ^cvt\.                    ->
        # a comment line
        ^layers\.(\d+)\.ln1\.     -> blocks.\1.norm1.  # a comment after a rule
    """)
    assert table == [(r'^cvt\.', ''), (r'^layers\.(\d+)\.ln1\.', r'blocks.\1.norm1.')]
    assert rename_keys({'cvt.layers.3.ln1.weight': 1}, table) == {'blocks.3.norm1.weight': 1}
    for bad in ('^a\\. blocks.', '^a\\. -> b c', '-> b'):
        with pytest.raises(ValueError, match="'PATTERN -> REPLACEMENT'"):
            rules(bad)


def test_task_model_key_renaming_lives_in_heads_layouts():
    """Issue 53.3: transformers' Mask2Former, EoMT and UperNet rename rules sat in heads/hf beside the config
    readers; every rename of a task model's keys is now a converter of a row of heads.layouts.table."""
    renaming = ('zoo.weights.rename', 'zoo.weights.layout_error', 'zoo.weights.swin', 'zoo.weights.dinov3')
    outside = {}
    for path in sorted((ROOT / 'heads').rglob('*.py')):
        if path.is_relative_to(ROOT / 'heads' / 'layouts'):
            continue
        tree = ast.parse(path.read_text(encoding='utf-8'))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        found = sorted(m for m in imported if m.startswith(renaming))
        if found:
            outside[str(path.relative_to(ROOT))] = found
    assert not outside, f"task-model keys renamed outside heads.layouts: {outside}"
