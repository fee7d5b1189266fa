"""List the registered backbones: family, parameters, default input size and the maps the backbone gives.

    python tools/list_models.py                   # every name
    python tools/list_models.py 'deit_*' 'cvt_*'  # shell-style patterns
    python tools/list_models.py --markdown        # a Markdown table
    python tools/list_models.py --overview --write README.md   # README's families / heads / tasks tables

--overview prints README's tables of backbone families (the registered names grouped by the family file that
registered them, with their count), heads and tasks (the parts heads' registries hold); --write FILE replaces the
overview block in FILE (tests/project/test_readme_overview.py fails while README's block differs).

Parameters are the classifier's (1000 classes, as timm counts them) and the backbone's, counted on the meta
device (nothing is allocated, no weights are read). The input size is the one the names' weights were trained
at; every backbone takes other sizes too.
"""
from __future__ import annotations

import argparse

COLUMNS = ['name', 'family', 'classifier_params_M', 'backbone_params_M', 'input', 'out_channels', 'out_strides']


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('patterns', nargs='*', help="shell-style name patterns, e.g. 'vit_*' (default: all)")
    parser.add_argument('--markdown', action='store_true', help='print a Markdown table instead of aligned columns')
    parser.add_argument('--overview', action='store_true',
                        help="print README's families / heads / tasks tables, made from the registries")
    parser.add_argument('--write', metavar='FILE', help='with --overview: replace the overview block in FILE')
    return parser


def describe(name: str) -> dict:
    """One row of the table for a registered name."""
    import torch

    import zoo
    from zoo.profiling import count_params
    from zoo.registry import get_variant
    variant = get_variant(name)
    with torch.device('meta'):
        classifier, backbone = zoo.create_classifier(name), zoo.create_backbone(name)
    return {'name': name, 'family': variant.classes['backbone'].__module__.rsplit('.', 1)[-1],
            'classifier_params_M': round(count_params(classifier) / 1e6, 2),
            'backbone_params_M': round(count_params(backbone) / 1e6, 2),
            'input': 'x'.join(map(str, variant.input_size)), 'out_channels': list(backbone.out_channels),
            'out_strides': list(backbone.out_strides)}


def main(argv=None) -> list[dict]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.write and not args.overview:
        parser.error('--write FILE writes the overview: give --overview too')
    if args.overview:
        from lab import overview
        if args.write:
            print(f"{args.write}: {'overview updated' if overview.write(args.write) else 'overview already current'}")
        else:
            print(overview.overview(), end='')
        return []
    import zoo
    names = sorted({n for p in args.patterns or [None] for n in zoo.list_backbones(p)})
    if not names:
        from zoo.registry import get_variant
        get_variant(args.patterns[0])  # no match: the error suggests close names
    rows = [describe(name) for name in names]
    cells = [[str(r[c]) for c in COLUMNS] for r in rows]
    if args.markdown:
        from lab.benchmark.tables import markdown
        print(markdown(rows, f'{len(rows)} backbones', COLUMNS), end='')
    else:
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(COLUMNS)]
        for line in [COLUMNS, *cells]:
            print('  '.join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    return rows


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
