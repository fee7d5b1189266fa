"""Print a config as training would run it: _base_ files merged, --cfg-options and --data-root applied, the work dir
and the hooks every run gets filled in, and every component's keys checked against what it accepts.

    python tools/print_config.py configs/dpt_vitb_ade20k.py
    python tools/print_config.py configs/quickstart.py --cfg-options train_cfg.max_iters=100 --out resolved.py
"""
from __future__ import annotations

import argparse
import sys

from mmengine.config import DictAction

from lab.outputs import refuse_outputs_that_are_inputs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='an mmengine config file')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default=None, metavar='KEY=VALUE',
                        help='override config keys as tools/train.py does, e.g. train_cfg.max_iters=100')
    parser.add_argument('--data-root', help="override every dataset's data_root")
    parser.add_argument('--work-dir', help='the work dir training would use (default work_dirs/<config name>)')
    parser.add_argument('--out', help='also write the resolved config to this .py file (loadable as a config)')
    return parser


def main(argv=None) -> str:
    parser = build_parser()
    args = parser.parse_args(argv)
    refuse_outputs_that_are_inputs(parser.error, {'--out': args.out},
                                   {'CONFIG': args.config})
    from heads.engine.launch import load_config
    cfg = load_config(args.config, args.cfg_options, args.work_dir, args.data_root)
    text = cfg.pretty_text
    print(text)
    if args.out:
        cfg.dump(args.out)
        print(f'# written to {args.out}', file=sys.stderr)
    return text


if __name__ == '__main__':
    from lab.cli import run_main
    run_main(main)
