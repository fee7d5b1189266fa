"""The command-line tools as a user meets them: --help answers before torch is imported (so in about a second, not
the ~10 s of importing torch, torchvision and the packages), every option says what it does, the examples in the
help keep their lines, and the two look-up tools (list_models, print_config) answer with reference figures."""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = sorted(p.stem for p in (ROOT / 'tools').glob('*.py'))

HEAVY = ('torch', 'torchvision', 'matplotlib', 'zoo', 'transformers', 'timm')
PROBE = '''
import json, runpy, sys
sys.argv = [sys.argv[1], '--help']
sys.path.insert(0, 'tools')  # as `python tools/X.py` puts it first: the tools import their shared code, tools/lab
try:
    runpy.run_path(f'tools/{sys.argv[0]}.py', run_name='__main__')
except SystemExit as done:
    code = done.code
print(json.dumps({'code': code, 'loaded': sorted(m for m in %r if m in sys.modules)}))
''' % (HEAVY,)


@pytest.mark.parametrize('tool', TOOLS)
def test_help_imports_nothing_heavy(tool):
    done = subprocess.run([sys.executable, '-c', PROBE, tool], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {'code': 0, 'loaded': []}


def test_tools_run_as_scripts_from_any_folder_find_their_shared_code(tmp_path):
    """``python tools/X.py`` puts tools/ first on ``sys.path``, so a tool's ``from lab... import`` (tools/lab, not
    installed) works whatever the working folder; the probe above emulates that, this runs the real thing."""
    users = [tool for tool in TOOLS if '\nfrom lab.' in (ROOT / 'tools' / f'{tool}.py').read_text()]
    assert {'compare', 'evidence', 'export_model'} <= set(users)
    for tool in users:
        done = subprocess.run([sys.executable, str(ROOT / 'tools' / f'{tool}.py'), '--help'], cwd=tmp_path,
                              capture_output=True, text=True)
        assert done.returncode == 0 and 'usage:' in done.stdout, f'{tool}: {done.stderr[-500:]}'


#: Scripts and functions that run in processes pytest does not start (torchrun's, ``python tests/kill_switch.py``),
#: so without its ``pythonpath``: they put tools/ on their path themselves. This file's PROBE emulates a tool's start.
OWN_PROCESSES = {'tests/kill_switch.py', 'tests/training/test_distributed.py', 'tests/training/test_fsdp.py',
                 'tests/tools/test_tools_cli.py'}


def test_the_tests_find_the_tools_and_lab_by_configuration(pytestconfig):
    """pyproject.toml's pytest ``pythonpath`` puts tools/ on the tests' path, as ``python tools/X.py`` does for a
    tool: ``import train`` and ``from lab... import`` work in any test with no test module editing ``sys.path``."""
    assert [Path(p) for p in pytestconfig.getini('pythonpath')] == [ROOT / 'tools']
    assert str(ROOT / 'tools') in sys.path
    editing = sorted(str(path.relative_to(ROOT)) for path in (ROOT / 'tests').rglob('*.py')
                     if re.search(r'sys\.path(\.insert|\[:0\]).*tools', path.read_text(encoding='utf-8'))
                     and str(path.relative_to(ROOT)) not in OWN_PROCESSES)
    assert not editing, f'test modules putting tools/ on sys.path themselves: {editing}'


def parsers(parser):
    """``parser`` and its subcommands' parsers."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


@pytest.mark.parametrize('tool', TOOLS)
def test_every_option_has_help_and_examples_keep_their_lines(tool):
    module = __import__(tool)
    parser = module.build_parser()
    for p in parsers(parser):
        undocumented = [a.dest for a in p._actions if not a.help and a.dest != 'help']
        assert not undocumented, f'{tool}: options without help: {undocumented}'
    text = parser.format_help()
    examples = [line for line in module.__doc__.splitlines() if line.lstrip().startswith(('python ', 'torchrun '))]
    assert examples and all(line in text.splitlines() for line in examples), f'{tool}: examples mangled in --help'


def test_list_models_counts_parameters_as_the_papers_and_timm_do(capsys):
    import list_models
    rows = {r['name']: r for r in list_models.main(['vit_base_patch16_224', 'cvt_13_224', 'coatnet_0_224',
                                                    'crossvit_small_240', 'deit_small_patch16_224'])}
    # timm's model cards (ViT-B/16 86.6 M, DeiT-S 22.1 M, CrossViT-S 26.9 M), the papers (CvT-13 20 M, CoAtNet-0 25 M)
    expected = {'vit_base_patch16_224': 86.6, 'deit_small_patch16_224': 22.1, 'crossvit_small_240': 26.9,
                'cvt_13_224': 20.0, 'coatnet_0_224': 25.0}
    for name, params in expected.items():
        assert rows[name]['classifier_params_M'] == pytest.approx(params, abs=0.06), name
    assert rows['cvt_13_224']['out_strides'] == [4, 8, 16, 16] and rows['crossvit_small_240']['input'] == '240x240'
    assert len(capsys.readouterr().out.splitlines()) == 1 + len(expected)
    with pytest.raises(KeyError, match='did you mean vit_base_patch16_224'):
        list_models.main(['vit_bse_patch16_224'])


def test_print_config_shows_the_resolved_config_with_overrides(tmp_path, capsys):
    import print_config
    text = print_config.main(['configs/dpt_vitt4_camvid_cpu.py', '--cfg-options', 'train_cfg.max_iters=7',
                              '--data-root', '/data/camvid', '--out', str(tmp_path / 'resolved.py')])
    assert 'max_iters=7' in text and "data_root='/data/camvid'" in text and 'NonFiniteLossHook' in text
    from mmengine.config import Config
    resolved = Config.fromfile(str(tmp_path / 'resolved.py'))
    assert resolved.train_cfg.max_iters == 7 and resolved.model.backbone.name == 'vit_tiny_patch16_224'
    with pytest.raises(TypeError, match='max_iter'):  # the same key check as training
        print_config.main(['configs/quickstart.py', '--cfg-options', 'train_cfg.max_iter=7'])
