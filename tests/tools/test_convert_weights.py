"""tools/convert_weights.py never writes over its input: converting a transformers folder into itself (or a file
into itself) is refused before anything is read or written, and every input keeps its bytes."""
import hashlib
import importlib.util
import os
from pathlib import Path

import pytest

transformers = pytest.importorskip('transformers')

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location('convert_tool', ROOT / 'tools' / 'convert_weights.py')
convert_tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(convert_tool)

TINY = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64, image_size=32,
            patch_size=16, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[8, 16, 32, 32],
            fusion_hidden_size=16, num_labels=3)


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob('*')) if p.is_file()}


@pytest.fixture
def hf_folder(tmp_path):
    folder = tmp_path / 'hf'
    transformers.DPTForSemanticSegmentation(transformers.DPTConfig(**TINY)).save_pretrained(folder)
    return folder


def refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        convert_tool.main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_hf_dpt_into_its_own_folder_is_refused_and_the_folder_kept(hf_folder, tmp_path, capsys):
    """`hf-dpt HF HF` replaced HF/model.safetensors by this project's layout; transformers then re-initialised
    every weight it no longer found, with only a warning."""
    before = digests(tmp_path)
    err = refused(['hf-dpt', str(hf_folder), str(hf_folder)], capsys)
    assert f'OUT_DIR {hf_folder} is the input HF_FOLDER' in err and 'Nothing was written' in err
    link = tmp_path / 'link'
    link.symlink_to(hf_folder, target_is_directory=True)
    assert 'is the input HF_FOLDER' in refused(['hf-dpt', str(hf_folder), str(link)], capsys)
    assert 'is the input HF_FOLDER' in refused(['hf-dpt', str(hf_folder), str(hf_folder / 'sub' / '..')], capsys)
    link.unlink()
    assert digests(tmp_path) == before


def test_hf_dpt_into_a_folder_whose_model_file_is_a_hard_link_of_the_input_is_refused(hf_folder, tmp_path, capsys):
    out = tmp_path / 'out'
    out.mkdir()
    os.link(hf_folder / 'model.safetensors', out / 'model.safetensors')
    before = digests(tmp_path)
    err = refused(['hf-dpt', str(hf_folder), str(out)], capsys)
    assert f"OUT_DIR/model.safetensors {out / 'model.safetensors'} is the input" in err
    assert digests(tmp_path) == before


def test_hf_dpt_into_another_folder_still_converts(hf_folder, tmp_path):
    before = digests(hf_folder)
    convert_tool.main(['hf-dpt', str(hf_folder), str(tmp_path / 'ours')])
    assert sorted(p.name for p in (tmp_path / 'ours').iterdir()) == ['config.py', 'model.safetensors']
    assert digests(hf_folder) == before


def test_timm_into_its_own_file_is_refused_and_the_file_kept(tmp_path, capsys):
    source = tmp_path / 'timm.safetensors'
    source.write_bytes(b'the weights of the user')
    alias = tmp_path / 'alias.safetensors'
    os.link(source, alias)
    for out in (source, alias):
        err = refused(['timm', 'vit_tiny_patch16_224', str(source), str(out)], capsys)
        assert 'is the input IN' in err
    assert source.read_bytes() == b'the weights of the user'
