"""The run switches as command-line flags: one definition for ``%besser generate`` and ``python -m kernel_ext generate``.

Each flag can only narrow the operator's settings (``options.run_switches``): turn Phase 3's
repair or the runtime probes off, or ask for fewer repair rounds than the operator's cap.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernel_ext.hosting.options import BudgetArgs


def add_switch_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-repair", action="store_true", help="skip Phase 3's repair rounds (validation still runs)")
    parser.add_argument("--repair-rounds", type=int, metavar="N", help="Phase 3's round budget (0: no repair), within the operator's cap")
    parser.add_argument("--no-import-smoke-check", action="store_true",
                        help="validate statically only: do not import, start or probe the generated app")


def switches_from(args: argparse.Namespace) -> BudgetArgs:
    """The request fields the flags set (flags not given leave the request's defaults)."""
    found: BudgetArgs = {}
    if getattr(args, "no_repair", False):
        found["auto_fix"] = False
    if getattr(args, "repair_rounds", None) is not None:
        found["repair_rounds"] = args.repair_rounds
    if getattr(args, "no_import_smoke_check", False):
        found["enable_import_smoke_check"] = False
    return found
