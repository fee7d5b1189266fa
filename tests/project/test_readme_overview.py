"""README's tables of backbone families, heads and tasks are what the registries give (tools/lab/overview.py):
a family added or a variant registered changes the table, and README must follow
(``python tools/list_models.py --overview --write README.md``); every registered model part, dataset and metric has
its row; pyproject's description counts the families as the registry does."""
import re
from pathlib import Path

import pytest

from lab import overview

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize('page', ['README.md', 'docs/index.md'])
def test_the_overview_is_what_the_registries_give(page):
    text = (ROOT / page).read_text()
    assert overview.replace_block(text, overview.overview()) == text, \
        f"{page}'s overview differs from the registries: run python tools/list_models.py --overview --write {page}"


def test_a_stale_overview_is_found_and_rewritten(tmp_path):
    readme = (ROOT / 'README.md').read_text()
    stale = tmp_path / 'README.md'
    stale.write_text(readme.replace('| CvT | 5 |', '| CvT | 4 |'))
    assert stale.read_text() != readme
    assert overview.write(stale) and stale.read_text() == readme
    assert not overview.write(stale)
    (tmp_path / 'bare.md').write_text('# no block\n')
    with pytest.raises(ValueError, match=r'bare.md has no overview block'):
        overview.write(tmp_path / 'bare.md')


def test_every_registered_part_has_a_row():
    assert overview.unplaced_parts() == {}


def test_pyproject_counts_the_families_as_the_registry():
    description = re.search(r'^description = "(.*)"$', (ROOT / 'pyproject.toml').read_text(), re.M)[1]
    assert re.search(r'(\d+) families', description)[1] == str(len(overview.families()))
