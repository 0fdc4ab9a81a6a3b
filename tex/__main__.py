"""Command line: ``python -m tex demo``."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the chosen command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tex",
                                     description="tex: differentiable tensor expressions")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="build, print and check the dense-layer example")
    demo.add_argument("--seed", type=int, default=0, help="seed of the random data")
    demo.add_argument("--dot", default=None,
                      help="where to write the DAG as Graphviz DOT (default: a temp file)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo
        return run_demo(seed=args.seed, dot_path=args.dot)
    return 2  # unreachable: argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
