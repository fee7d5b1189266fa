"""Every code snippet of README.md and docs/ works as pasted.

- Python blocks run, each on its own, in a folder holding the files they name (weights made by timm and
  transformers with random initialisation and saved in their own layouts, a transformers DPT folder, an image, a
  feature export made by the tool as the docs show). A block fenced ```` ```python requires=PKG ```` runs where PKG
  is installed and is skipped otherwise (detectron2 and mmdet, which this project does not depend on).
- Shell blocks: every `python tools/X.py ...` and `torchrun ... tools/X.py ...` command is parsed by that tool's
  own argument parser (an option renamed or removed fails here), and every config it names exists and loads
  through the project's config check. Running them needs the datasets, so they are not run here; the tools' own
  tests run them on the reference data.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import cv2
import pytest
import torch

import zoo.registry

from ..reference import sample_street

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md')), ROOT / 'configs' / 'README.md']
FENCE = re.compile(r'^```([^\n]*)\n(.*?)^```', re.S | re.M)


def blocks(kind: str) -> list[tuple[str, str, str]]:
    """(id 'FILE:LINE', info string, code) of every fenced block whose language is ``kind``; a bare fence counts
    as a shell block."""
    found = []
    for path in DOCUMENTS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            info = match.group(1).strip()
            language = info.split()[0] if info else 'bash'
            if language == kind:
                line = text[:match.start()].count('\n') + 1
                found.append((f'{path.relative_to(ROOT)}:{line}', info, match.group(2)))
    return found


PYTHON_BLOCKS = blocks('python')
SHELL_BLOCKS = blocks('bash')


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
    """A folder with every file the Python snippets name, made by the reference libraries and the tools."""
    timm = pytest.importorskip('timm')
    transformers = pytest.importorskip('transformers')
    from safetensors.torch import save_file
    folder = tmp_path_factory.mktemp('docs')
    torch.manual_seed(0)
    save_file(timm.create_model('vit_base_patch16_224').state_dict(), str(folder / 'vit_b16.safetensors'))
    torch.save(timm.create_model('deit_small_distilled_patch16_224').state_dict(), folder / 'deit_s_distilled.pth')
    # a transformers DPT segmentation folder with ADE20K's 150 classes (sizes shrunk from DPT-Large to keep CI short)
    config = transformers.DPTConfig(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128,
                                    image_size=384, patch_size=16, backbone_out_indices=[0, 1, 2, 3],
                                    neck_hidden_sizes=[16, 32, 64, 64], fusion_hidden_size=32, num_labels=150)
    transformers.DPTForSemanticSegmentation(config).save_pretrained(folder / 'dpt-large-ade')
    street = sample_street()
    shutil.copy(street, folder / 'street.jpg')
    # the shell commands the Python snippets build on, run as the docs show them
    old = Path.cwd()
    os.chdir(folder)
    try:
        import convert_weights
        convert_weights.main(['hf-dpt', 'dpt-large-ade/', 'work/'])
        (folder / 'val2017').mkdir()
        shutil.copy(street, folder / 'val2017' / '000000000139.jpg')
        (folder / 'annotations').mkdir()
        height, width = cv2.imread(str(street)).shape[:2]
        (folder / 'annotations' / 'instances_val2017.json').write_text(json.dumps({
            'images': [{'id': 139, 'file_name': '000000000139.jpg', 'height': height, 'width': width}],
            'annotations': [], 'categories': [{'id': 1, 'name': 'person'}]}))
        import export_features
        export_features.main(shlex.split(doc_command('tools/export_features.py --backbone vit_base_patch16_224'))[2:])
    finally:
        os.chdir(old)
    return folder


def doc_command(start: str) -> str:
    """The first shell command of the docs that starts with ``python START`` (continuation lines joined)."""
    commands = [c for _, _, code in SHELL_BLOCKS for c in commands_of(code)]
    return next(c for c in commands if c.startswith(f'python {start}'))


#: Snippets that run a ViT-B detector or an ONNX export (25-40 s each): the full suite only, not the fast lane.
SLOW_SNIPPET = ('build_detector(', 'export_onnx(')


@pytest.mark.parametrize('where, info, code', [
    pytest.param(*block, marks=pytest.mark.slow) if any(s in block[2] for s in SLOW_SNIPPET) else block
    for block in PYTHON_BLOCKS], ids=[b[0] for b in PYTHON_BLOCKS])
def test_python_snippet_runs_as_pasted(where, info, code, workspace, monkeypatch):
    for requirement in re.findall(r'requires=(\S+)', info):
        pytest.importorskip(requirement)
    monkeypatch.chdir(workspace)
    # a snippet's register_variant (docs/adding_a_backbone.md) stays in the snippet: the tests that list every
    # registered name and run later in this process (which ones depends on how the workers share the files) see
    # only the project's own names
    monkeypatch.setattr(zoo.registry, '_VARIANTS', dict(zoo.registry._VARIANTS))
    torch.manual_seed(0)
    exec(compile(code, where, 'exec'), {'__name__': '__snippet__'})


def commands_of(code: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments and blank lines left out."""
    joined = code.replace('\\\n', ' ')
    return [line.split('  #')[0].strip() for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith('#')]


def tool_invocations() -> list[tuple[str, str, list[str]]]:
    """(where, tool, arguments) of every tool command in the docs' shell blocks."""
    found = []
    for where, _, code in SHELL_BLOCKS:
        for command in commands_of(code):
            for part in command.split('&&'):
                words = shlex.split(part)
                tool = next((w for w in words if re.fullmatch(r'tools/\w+\.py', w)), None)
                if tool:
                    found.append((where, Path(tool).stem, words[words.index(tool) + 1:]))
    return found


INVOCATIONS = tool_invocations()


@pytest.mark.parametrize('where, tool, argv', INVOCATIONS, ids=[f'{w}:{t}' for w, t, _ in INVOCATIONS])
def test_shell_commands_parse_and_their_configs_load(where, tool, argv, monkeypatch):
    monkeypatch.chdir(ROOT)
    module = __import__(tool)
    module.build_parser().parse_args(argv)  # exits (fails the test) on an unknown option or a bad value
    configs = [a for a in argv if a.startswith('configs/') and a.endswith('.py')]
    from heads.engine.launch import load_config
    for config in configs:
        assert (ROOT / config).is_file(), f'{where}: {config} does not exist'
        load_config(config)


def test_every_documented_tool_exists_and_every_tool_is_documented():
    documented = {tool for _, tool, _ in INVOCATIONS}
    assert documented <= {p.stem for p in (ROOT / 'tools').glob('*.py')}
    undocumented = {p.stem for p in (ROOT / 'tools').glob('*.py')} - documented
    assert not undocumented, f'tools without an example in README.md or docs/: {sorted(undocumented)}'
