"""docs/layout.md's table of folders, tested against the tree (issue 53: it listed 12 of 21 backbone families and
said heads/hf held only DPT folders): every package of zoo and heads has a row, every folder and file a row names
exists, and the rows that enumerate something enumerate all of it: the backbone families (the registry's family
files), the transformers folders heads.from_pretrained_hf reads, and the task models heads/models registers."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / 'docs' / 'layout.md'


def _rows() -> dict[tuple[str, ...], str]:
    """The table's rows: the paths of the first column -> the text of the second."""
    rows = {}
    for line in PAGE.read_text(encoding='utf-8').splitlines():
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if line.startswith('| `') and len(cells) >= 2:
            rows[tuple(re.findall(r'`([^`]+)`', cells[0]))] = ' | '.join(cells[1:])
    assert rows, f"{PAGE}: no table rows found"
    return rows


def _row(path: str) -> str:
    found = [text for paths, text in _rows().items() if path in paths]
    assert len(found) == 1, f"{PAGE}: {len(found)} rows name {path}"
    return found[0]


def _named_files(text: str) -> set[str]:
    """The files (``x.py``) and folders (``x/``) a row's text names in backticks."""
    return {name for name in re.findall(r'`([^`]+)`', text) if re.fullmatch(r'[\w./]+(\.py|/)', name)}


def test_every_package_has_a_row_and_every_path_named_exists():
    named = {path for paths in _rows() for path in paths}
    packages = {str(p.parent.relative_to(ROOT)) for top in ('zoo', 'heads') for p in (ROOT / top).glob('*/__init__.py')}
    assert packages - named == set(), f"{PAGE}: packages without a row"
    assert {p for p in named if not (ROOT / p).exists()} == set(), f"{PAGE}: rows name paths that do not exist"


def test_every_file_a_row_names_exists_in_its_folder():
    missing = {}
    for paths, text in _rows().items():
        places = [ROOT / p for p in paths if (ROOT / p).is_dir()]
        places += [place.parent for place in places]  # tools/lab's row names the tools it serves
        absent = sorted(f for f in _named_files(text) if places and not any((p / f).exists() for p in places))
        if absent:
            missing[', '.join(paths)] = absent
    assert not missing, f"{PAGE}: rows name files their folders do not hold: {missing}"


def test_the_backbones_row_names_every_family_file():
    from lab import overview
    files = {row['file'].strip('`').rsplit('/', 1)[-1] for row in overview.families()}
    assert files - _named_files(_row('zoo/backbones')) == set()


def test_the_transformers_row_names_every_kind_of_folder():
    from heads.hf.folder import KINDS
    assert {f'{kind[0]}.py' for kind in KINDS.values()} - _named_files(_row('heads/hf')) == set()


def _registered_task_models(package: str) -> set[str]:
    """The classes ``package`` registers (``@MODELS.register_module()``) that derive from ``TaskModel``, read from
    the source (bases followed by name within the package)."""
    bases, registered = {}, set()
    for path in (ROOT / package).glob('*.py'):
        for node in ast.parse(path.read_text(encoding='utf-8')).body:
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [ast.unparse(b).rsplit('.', 1)[-1] for b in node.bases]
                if any('MODELS.register_module' in ast.unparse(d) for d in node.decorator_list):
                    registered.add(node.name)

    def is_task_model(name: str) -> bool:
        return name == 'TaskModel' or any(is_task_model(b) for b in bases.get(name, ()))
    return {name for name in registered if is_task_model(name)}


def test_the_task_models_row_names_every_task_model():
    models = _registered_task_models('heads/models')
    assert {'Segmentor', 'EoMT'} <= models
    assert models - set(re.findall(r'`(\w+)`', _row('heads/models'))) == set()
