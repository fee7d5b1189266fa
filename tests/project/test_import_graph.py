"""No import circle among the modules of ``zoo``, ``heads`` and ``lab`` (tools/lab, the tools' shared code), read
from their source (nothing is imported), and neither installed package imports ``lab`` or the tools.

What is counted, per module (each ``.py`` file; a package is its ``__init__.py``):

- the import statements Python runs when the module is imported: those at module level, also inside module-level
  ``if`` / ``try`` / ``with`` blocks and class bodies, but not those inside functions (imported lazily, when called)
  nor under ``if TYPE_CHECKING:`` (never run). A second graph (``lazy=True``) counts the imports inside functions
  too, except in a module's ``__getattr__`` (PEP 562: it forwards names that moved, for old import paths): a lazy
  import that closes a circle hides one (``zoo.weights.formats -> mmseg -> load -> formats`` was such a circle);
- ``import a.b.c`` depends on ``a.b.c``; ``from a.b import c`` on the module ``a.b.c`` when there is one, else on
  ``a.b`` (whose code must have run to give the name ``c``); relative imports resolved against the module's package;
- each also depends on the packages on the way (``a``, ``a.b``) except the importing module's own ancestors: Python
  runs a package's ``__init__`` before any module in it, so that implicit edge is no dependency of the module's
  making (an explicit ``from .. import name`` of an ancestor's name is one, and is counted);
- only edges between modules of ``zoo``, ``heads`` and ``lab``.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = ('zoo', 'heads')
#: package -> the folder on ``sys.path`` it is imported from (lab: tools/, first on the path of a tool, and on the
#: tests' by pyproject.toml's pytest ``pythonpath``)
PACKAGES = {'zoo': ROOT, 'heads': ROOT, 'lab': ROOT / 'tools'}


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of :data:`PACKAGES`."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted((folder / package).rglob('*.py')):
            parts = path.relative_to(folder).with_suffix('').parts
            found['.'.join(parts[:-1] if parts[-1] == '__init__' else parts)] = path
    return found


def _counted(body: list[ast.stmt], lazy: bool = False):
    """The import statements among ``body`` that run when the module is imported, with ``lazy`` also those that run
    when its functions are called (see the module docstring)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if lazy and node.name != '__getattr__':
                yield from _counted(node.body, lazy)
        elif isinstance(node, ast.If) and 'TYPE_CHECKING' in ast.unparse(node.test):
            yield from _counted(node.orelse, lazy)
        else:
            for field in ('body', 'orelse', 'finalbody', 'handlers'):
                yield from _counted(getattr(node, field, []), lazy)


def _imported(module: str, is_package: bool, node, modules: dict) -> list[str]:
    """The modules one import statement of ``module`` depends on (before filtering to :data:`PACKAGES`)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split('.') if is_package else module.split('.')[:-1]
        base = '.'.join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module
    return [f'{base}.{a.name}' if f'{base}.{a.name}' in modules else base for a in node.names]


def import_graph(lazy: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of zoo, heads and lab it imports when it is imported (``lazy``: or when its functions
    run)."""
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        is_package = path.name == '__init__.py'
        ancestors = {'.'.join(module.split('.')[:i]) for i in range(1, module.count('.') + 1)}
        edges = set()
        for node in _counted(ast.parse(path.read_text(encoding='utf-8')).body, lazy):
            for target in _imported(module, is_package, node, modules):
                parts = target.split('.')
                edges |= {'.'.join(parts[:i]) for i in range(1, len(parts))} - ancestors
                edges.add(target)
        graph[module] = {t for t in edges if t in modules and t != module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the modules along it (first repeated last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = 'open'
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 'open':
                return stack[stack.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = 'done'
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_sees_the_imports_it_counts():
    graph = import_graph()
    assert len(graph) > 100 and all(m.split('.')[0] in PACKAGES for m in graph)
    assert {'lab', 'lab.cli', 'lab.benchmark.compare'} <= set(graph)
    assert 'lab.benchmark.runs' in graph['lab.benchmark.compare']  # from . import runs as run_folder
    assert 'heads.engine' in graph['lab.benchmark.compare']  # from heads.engine import ZooRunner
    assert 'zoo.weights.rename' in graph['zoo.weights.dinov2']  # relative: from .rename import
    assert 'zoo.weights' in graph['heads.models.task_checkpoint']  # absolute, a package's name: from zoo.weights import
    assert 'heads.registry' in graph['heads.models.depth_anything']  # two dots: from ..registry import
    assert 'heads.registry' not in graph['heads.hf.model_size']  # imported inside a function only: lazy, not counted
    assert 'heads.registry' in import_graph(lazy=True)['heads.hf.model_size']
    assert find_cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']
    assert find_cycle({'a': {'b'}, 'b': set()}) is None


def test_zoo_heads_and_lab_have_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, f"import circle: {' -> '.join(cycle)}"


def test_no_lazy_import_closes_a_circle():
    cycle = find_cycle(import_graph(lazy=True))
    assert cycle is None, f"import circle through an import inside a function: {' -> '.join(cycle)}"


def test_zoo_imports_nothing_of_heads():
    """zoo is the lower layer: task models' layouts live in heads (:mod:`heads.layouts`), and zoo names none."""
    upward = {m: sorted(t for t in targets if t.startswith('heads'))
              for m, targets in import_graph(lazy=True).items() if m.startswith('zoo')}
    assert not {m: t for m, t in upward.items() if t}


def test_zoo_and_heads_import_nothing_of_lab_or_the_tools():
    """lab (tools/lab) and the tools are not installed: an import of either from the packages works in a checkout and
    fails after ``pip install``. Every import statement counts here, lazy or under ``TYPE_CHECKING``."""
    found = {}
    for package in INSTALLED:
        for path in sorted((ROOT / package).rglob('*.py')):
            for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
                bad = [n for n in names if n.split('.')[0] in ('lab', 'tools')]
                if bad:
                    found.setdefault(str(path.relative_to(ROOT)), []).extend(bad)
    assert not found, f'installed packages importing lab or tools: {found}'


def test_datasets_import_nothing_of_visualization():
    """Data is below pictures: a dataset's palette (its own, or :func:`heads.io.palettes.default_palette`) is data
    that the pictures read; heads.datasets imports nothing of heads.visualization (it took its fallback palette
    from heads.visualization.draw)."""
    upward = {m: sorted(t for t in targets if t.startswith('heads.visualization'))
              for m, targets in import_graph(lazy=True).items() if m.startswith('heads.datasets')}
    assert not {m: t for m, t in upward.items() if t}


def test_heads_io_imports_nothing_else_of_heads():
    """heads.io (files, label values, palettes: numpy and OpenCV only, imported by tools before torch) is the bottom
    of heads: datasets, pictures, export and tools all build on it, and it on no other part of heads."""
    upward = {m: sorted(t for t in targets if t.startswith('heads') and not t.startswith('heads.io'))
              for m, targets in import_graph(lazy=True).items() if m.startswith('heads.io')}
    assert not {m: t for m, t in upward.items() if t}
