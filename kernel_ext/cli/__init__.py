"""The command line: one module per subcommand, each with ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES: tuple[str, ...] = (
    "kernel_ext.cli.tool",
    "kernel_ext.cli.calls",
    "kernel_ext.cli.generate",
    "kernel_ext.cli.scenario",
    "kernel_ext.cli.demo",
    "kernel_ext.cli.providers",
    "kernel_ext.cli.export",
    "kernel_ext.cli.eval",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="besser-agent", description="besser-jupyter-agent command line")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from kernel_ext.hosting.options import ConfigurationError

    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except ConfigurationError as exc:  # the operator's environment, named: no traceback
        print(f"error: configuration: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a folder the person named is read-only, a file, full: the place and the reason
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: io_error: {exc.strerror or type(exc).__name__}{where}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
