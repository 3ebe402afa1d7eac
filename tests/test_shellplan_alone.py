"""The command classifier and policy stand alone: importing and using them starts no sandbox code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import sys
from kernel_ext.shellplan import MAX_COMMAND_CHARS, check_command, classify
assert classify("rm -rf ~/build").category == "destructive"
assert check_command("ls -la") == ["ls", "-la"]
assert MAX_COMMAND_CHARS == 65536
loaded = sorted(m for m in sys.modules if m.startswith("kernel_ext.sandbox"))
print(",".join(loaded))
"""


def test_shellplan_imports_nothing_from_the_sandbox():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_the_tools_cap_is_the_classifier_cap():
    from kernel_ext.sandbox.shtools.options import MAX_COMMAND_CHARS as tools_cap
    from kernel_ext.shellplan.words import MAX_COMMAND_CHARS

    assert tools_cap is MAX_COMMAND_CHARS
