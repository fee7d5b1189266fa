"""The fast lane (``python -m pytest -m "not slow"``, README) still touches the whole project: every module under
zoo/, heads/ and tools/lab/ imports, every tool's --help test and one contract test of every backbone class are left
unmarked, so marking a test slow (pyproject's ``slow`` marker) cannot quietly drop a family or a tool from the lane."""
import importlib
from pathlib import Path

import pytest

import zoo
from zoo.registry import get_variant

from ..backbones import test_backbone_contract
from ..tools import test_tools_cli

ROOT = Path(__file__).resolve().parents[2]
#: zoo and heads from the checkout's root, lab from tools/ (where the tools, and the tests by pyproject's pythonpath,
#: import it from)
MODULES = sorted('.'.join(p.relative_to(folder).with_suffix('').parts).removesuffix('.__init__')
                 for folder, package in ((ROOT, 'zoo'), (ROOT, 'heads'), (ROOT / 'tools', 'lab'))
                 for p in (folder / package).rglob('*.py'))


def is_slow(test, param=None) -> bool:
    """Whether ``test`` (a test function of a module) or its parameter set ``param`` is marked slow."""
    module = importlib.import_module(test.__module__)
    marks = [*getattr(module, 'pytestmark', []), *getattr(test, 'pytestmark', []), *getattr(param, 'marks', ())]
    return any(getattr(mark, 'name', None) == 'slow' for mark in (marks if isinstance(marks, list) else [marks]))


@pytest.mark.parametrize('module', MODULES)
def test_every_module_imports(module):
    importlib.import_module(module)


def test_every_tool_s_help_is_in_the_fast_lane():
    tools = sorted(p.stem for p in (ROOT / 'tools').glob('*.py'))
    assert test_tools_cli.TOOLS == tools
    for test in (test_tools_cli.test_help_imports_nothing_heavy,
                 test_tools_cli.test_every_option_has_help_and_examples_keep_their_lines):
        assert not is_slow(test), f'{test.__name__} is marked slow: the fast lane would not run any tool'


def test_every_backbone_class_keeps_a_contract_test_in_the_fast_lane():
    test = test_backbone_contract.test_backbone_meets_the_contract
    assert not is_slow(test)
    (params,) = [mark.args[1] for mark in test.pytestmark if mark.name == 'parametrize']
    fast = {p for p in params if not is_slow(test, p)}  # plain names: pytest.param(...) sets are the marked ones
    classes = {get_variant(name).classes['backbone'] for name in zoo.list_backbones()}
    kept = {get_variant(name).classes['backbone'] for name in fast}
    assert classes - kept == set(), f'no fast contract test builds {sorted(c.__name__ for c in classes - kept)}'
