"""Marked blocks in Markdown files, rewritten from the store.

A block is an HTML comment naming a view (:data:`.views.VIEWS`) and its arguments, the rendered text, and a closing
comment; nothing between the two comments is kept by hand::

    <!-- records: table series=benchmark.reference kind=cpu-amd-epyc-avx2-2c threads=2
         batch=8 size=224x224 mode=inference reference=timm dtype=fp32
         rows=model row=levit_256 row=coatnet_0_rw_224 columns=ours_img_s,ref_img_s,ratio goal=ratio>=1.2 -->
    | model | ours_img_s | ... |
    <!-- /records -->

Arguments (shell words, ``key=value``; ``row`` may repeat): ``series``; ``kind`` (one machine kind, or several
separated by commas: a row per kind); ``rows`` (the settings keys that tell the rows apart) and one ``row`` per row
(its values, in that order, separated by commas); ``columns`` (what each cell shows: :func:`.views.run_value`);
``threads`` (only runs with that many threads); ``goal`` (e.g. ``ratio<=0.8``: met or not, from the median);
``missing`` (the text of a row that has no record yet, e.g. ``missing='not run'`` for GPU rows; without it such
a row is an error of :func:`check`). Every other ``key=value`` is a setting all rows share.
"""
from __future__ import annotations

import difflib
import re
import shlex
from pathlib import Path

from .views import VIEWS, ViewError

#: A block: its opening comment starts a line (a mention inside a sentence is none).
BLOCK = re.compile(r'^(<!-- records: (?P<args>.*?)-->\n)(?P<body>.*?)(<!-- /records -->)', re.S | re.M)


def parse(text: str) -> tuple[str, dict]:
    """A block's view and its arguments (each key: the list of its values)."""
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise ViewError(f'its arguments are not shell words ({err})') from None
    if not words or words[0] not in VIEWS:
        raise ViewError(f'a block starts with a view ({", ".join(VIEWS)}), not {words[:1]}')
    args: dict[str, list[str]] = {}
    for word in words[1:]:
        key, sep, value = word.partition('=')
        if not sep:
            raise ViewError(f'{word!r} is not key=value')
        args.setdefault(key, []).append(value)
    return words[0], args


def render_text(text: str, records: list[dict], where: str = '') -> tuple[str, list[str], list[str]]:
    """``text`` with every block rewritten, the rows of its blocks that have no record, and a unified diff of each
    block that differs from the store (each named with ``where`` and the block's line)."""
    absent, diffs = [], []

    def one(match: re.Match) -> str:
        line = text.count('\n', 0, match.start()) + 1
        try:
            view, args = parse(match.group('args'))
            body, missing = VIEWS[view](records, args)
        except ViewError as err:
            raise ViewError(f'{where}:{line}: {err}') from None
        absent.extend(f'{where}:{line}: no record for {row}' for row in missing)
        if body != match.group('body'):
            diff = difflib.unified_diff(match.group('body').splitlines(True), body.splitlines(True),
                                        f'{where}:{line} (as written)', f'{where}:{line} (from the store)')
            diffs.append(f'{where}:{line}: the block differs from the store:\n' + ''.join(diff))
        return match.group(1) + body + match.group(4)

    return BLOCK.sub(one, text), absent, diffs


def documents(root: Path) -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [p for p in [root / 'README.md', *sorted((root / 'docs').rglob('*.md'))] if p.exists()]


def check(root: Path, records: list[dict], write: bool = False) -> list[str]:
    """Render every document's blocks; with ``write``, rewrite the files that differ. Returns the problems: a unified
    diff per block that differs from the store (when not writing) and each row with no record."""
    problems = []
    for path in documents(root):
        text = path.read_text(encoding='utf-8')
        if '<!-- records:' not in text:
            continue
        name = str(path.relative_to(root))
        rendered, absent, diffs = render_text(text, records, name)
        problems += absent
        if rendered != text and write:
            path.write_text(rendered, encoding='utf-8')
        elif not write:
            problems += diffs
    return problems
