"""Command line: ``python -m tex demo``."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the chosen command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tex",
                                     description="tex: differentiable tensor expressions")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="differentiate, schedule, build, check and time a "
                                       "dense layer under a softmax cross-entropy loss")
    demo.add_argument("--seed", type=int, default=0, help="seed of the random data")
    demo.add_argument("--out", "--dot", dest="out", default=None,
                      help="where to write the picture of the DAG: .svg/.png/.pdf (through "
                           "Graphviz; DOT text next to it without Graphviz) or .dot "
                           "(default: a temporary .svg)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo
        return run_demo(seed=args.seed, out_path=args.out)
    return 2  # unreachable: argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
