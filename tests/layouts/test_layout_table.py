"""Issue 53.3: task-model checkpoint layouts have one home, :data:`heads.layouts.table.LAYOUTS`, and are told
through it. Its rows are the layouts :mod:`heads.layouts` documents, each loaded by a test of its own; the transformers
folders' rows are the model types :func:`heads.from_pretrained_hf` reads; a checkpoint no row detects, one that two
rows detect and one for another task model are refused naming the layouts, with nothing loaded."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

import heads
import zoo
from heads.hf.folder import KINDS
from heads.layouts.detect import (
    AmbiguousLayoutError,
    Checkpoint,
    Layout,
    LayoutModelError,
    UnknownLayoutError,
    detect_layout,
)
from heads.layouts.table import FOLDERS, LAYOUTS, named
from heads.models.dpt_official import load_official_dpt
from heads.models.task_checkpoint import load_task_checkpoint

from .test_mmseg_recipe import mmseg_state, tiny_cfg

HERE = Path(__file__).resolve().parent

#: Each layout -> the test that loads a checkpoint in it (file::function under tests/layouts) and checks the result.
LOADED_BY = {
    'zoo': 'test_mmseg_layout_detection.py::test_a_swin_dpt_checkpoint_is_this_projects_layout_and_loads_exactly',
    'mmseg': 'test_upernet_mmseg.py::test_an_mmseg_upernet_swin_checkpoint_loads_with_equal_outputs',
    'isl-org DPT': 'test_dpt_hybrid.py::test_official_dpt_hybrid_layout_loads_to_the_same_outputs',
    'Depth Anything V2': 'test_depth_anything.py::test_official_layout_loads_to_the_same_depth',
    'Video Depth Anything': 'test_video_depth_anything.py::test_the_authors_checkpoint_gives_their_depth',
    'EoMT authors': 'test_eomt_authors.py::test_the_authors_checkpoint_gives_their_logits',
    'MoGe-2': 'test_moge2.py::test_the_authors_checkpoint_gives_their_outputs',
    'transformers dpt': 'test_dpt_hf_parity.py::test_outputs_equal_transformers_at_the_configured_and_another_size',
    'transformers depth_anything': 'test_depth_anything.py::test_transformers_folder_predicts_the_same_depth',
    'transformers upernet': 'test_upernet_hf.py::test_logits_equal_transformers_from_a_save_pretrained_folder',
    'transformers mask2former':
        'test_mask2former_hf.py::test_logits_equal_transformers_at_the_configured_another_and_a_non_square_size',
    'transformers eomt': 'test_eomt_hf.py::test_transformers_folder_gives_the_same_logits',
    'transformers eomt_dinov3': 'test_eomt_hf.py::test_dinov3_non_square_grid_equals_transformers',
}


def _documented() -> list[str]:
    """The layout names :mod:`heads.layouts`' docstring lists (its ``- ``name``: ...`` lines)."""
    return re.findall(r'^- ``([^`]+)``:', heads.layouts.__doc__, flags=re.M)


def test_the_table_is_the_documented_list_of_layouts_each_loaded_by_a_test():
    names = [row.name for row in LAYOUTS]
    assert len(set(names)) == len(names), names
    assert names == _documented()
    assert list(LOADED_BY) == names
    for name, test in LOADED_BY.items():
        file, function = test.split('::')
        tree = ast.parse((HERE / file).read_text(encoding='utf-8'))
        assert function in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}, (name, test)


def test_the_folder_rows_are_the_model_types_from_pretrained_hf_reads():
    assert [row.name for row in FOLDERS] == [f'transformers {model_type}' for model_type in KINDS]


def _tiny_model():
    torch.manual_seed(0)
    return heads.MODELS.build(tiny_cfg().model)


def _unchanged(model, before) -> bool:
    return all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


@pytest.mark.parametrize('strict', [True, False])
def test_a_checkpoint_in_no_layout_is_refused_naming_every_layout(strict):
    """Before: read as this project's layout, a misfit (strict) or, with strict=False (load_from_partial), a
    'partial load' of nothing."""
    model = _tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = {'model.encoder.layer.0.weight': torch.zeros(3), 'classifier.bias': torch.zeros(5)}
    with pytest.raises(UnknownLayoutError, match=r"other\.pth: in none of the task-model checkpoint layouts") as err:
        load_task_checkpoint(model, state, name='other.pth', strict=strict)
    assert all(repr(row.name) in str(err.value) for row in LAYOUTS) and 'model.encoder.layer.0.weight' in str(err.value)
    assert _unchanged(model, before)


def test_a_checkpoint_two_layouts_detect_is_refused_naming_both():
    """A row whose predicate overlaps another's (here: a second reader of mmseg's keys) never picks one of them."""
    model = _tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    mmseg = named('mmseg')[0]
    twin = Layout('mmseg again', mmseg.detect, mmseg.convert, mmseg.models, "a second reader of mmseg's keys")
    with pytest.raises(AmbiguousLayoutError, match=r"dpt\.pth: in 2 task-model checkpoint layouts at once "
                                                   r"\('mmseg', 'mmseg again'\)"):
        load_task_checkpoint(model, mmseg_state(), name='dpt.pth', layouts=(*LAYOUTS, twin))
    assert _unchanged(model, before)
    assert detect_layout(Checkpoint(mmseg_state(), model, 'dpt.pth'), LAYOUTS) is mmseg  # the table alone: one


def test_a_layout_of_other_task_models_is_refused_naming_them():
    backbone = zoo.create_backbone('vit_tiny_patch16_224', depth=1)
    with pytest.raises(LayoutModelError, match=r"dpt\.pth: a checkpoint in the 'mmseg' layout .* holds a Segmentor, "
                                               rf"not a {type(backbone).__name__}; nothing was loaded"):
        load_task_checkpoint(backbone, mmseg_state(), name='dpt.pth')


def test_a_loader_of_one_layout_refuses_another_naming_it(tmp_path):
    """The official DPT loader given this project's checkpoint: before, the converter's ValueError ('no
    pretrained.model. keys')."""
    model = _tiny_model()
    torch.save(model.state_dict(), tmp_path / 'ours.pth')
    with pytest.raises(UnknownLayoutError, match=r"ours\.pth: .*Layouts read here: 'isl-org DPT' \(isl-org"):
        load_official_dpt(model, tmp_path / 'ours.pth')
    with pytest.raises(ValueError, match="no task-model checkpoint layout 'isl-org'; known: zoo, mmseg"):
        named('isl-org')
