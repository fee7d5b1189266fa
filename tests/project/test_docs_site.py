"""docs/ builds as a site (mkdocs.yml: the pages, and an API reference that mkdocstrings makes from the docstrings of
zoo and heads) with ``mkdocs build --strict``: a link to a page or anchor that does not exist, or an API reference to
an object that does not, is a warning, and strict turns every warning into a failure. Needs the ``[dev]`` extra's
mkdocs and mkdocstrings; skipped without them."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip('mkdocs')
pytest.importorskip('mkdocstrings_handlers.python')


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site``, as a command line runs it (its output kept)."""
    return subprocess.run([sys.executable, '-m', 'mkdocs', 'build', '--strict', '--config-file', str(config),
                           '--site-dir', str(site)], capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.mark.slow
def test_the_docs_build_strict_with_no_warning(tmp_path):
    done = build(ROOT / 'mkdocs.yml', tmp_path / 'site')
    assert done.returncode == 0, done.stderr[-4000:]
    assert 'WARNING' not in done.stderr, done.stderr[-4000:]
    api = (tmp_path / 'site' / 'api' / 'zoo' / 'index.html').read_text()
    assert 'id="zoo.registry.register_variant"' in api  # the API pages hold the docstrings
    assert (tmp_path / 'site' / 'backbones' / 'index.html').is_file()


#: (page, text appended to it, what the failed build's output must name); link warnings are all reported, an API
#: reference that cannot be collected stops the build at once, so it has a build of its own
BREAKS = {'missing page and anchor': ('training.md', '[old](no_such_page.md), [part](dense.md#no-such-part)',
                                      ('no_such_page.md', 'no-such-part')),
          'missing API object': ('api/core.md', '::: zoo.core.no_such_object', ('zoo.core.no_such_object',))}


@pytest.mark.slow
@pytest.mark.parametrize('kind', BREAKS)
def test_a_broken_link_or_api_reference_fails_the_build(kind, tmp_path):
    """The same site with one link to a missing page, or to a missing anchor, or an API reference to a missing
    object: the strict build fails and names it."""
    name, text, named = BREAKS[kind]
    docs = tmp_path / 'docs'
    shutil.copytree(ROOT / 'docs', docs)
    page = docs / name
    page.write_text(page.read_text() + f'\n{text}\n')
    config = tmp_path / 'mkdocs.yml'
    config.write_text((ROOT / 'mkdocs.yml').read_text().replace('docs_dir: docs', f'docs_dir: {docs}')
                      .replace('paths: [.]', f'paths: [{ROOT}]'))
    done = build(config, tmp_path / 'site')
    assert done.returncode != 0 and all(n in done.stderr for n in named), done.stderr[-4000:]
