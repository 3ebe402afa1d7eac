"""docs/configuration.md names every ``BESSER_*`` variable the code mentions and every traitlet of the server extension."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "configuration.md"
NAME = re.compile(r"BESSER_[A-Z0-9_]*[A-Z0-9]")


def names_in_code() -> set[str]:
    """Every ``BESSER_*`` name in a string literal under kernel_ext/ and widgets/ (f-string parts included;
    a prefix such as ``BESSER_APP_ENV_*`` is not a name), plus the tree-budget names built per kind
    (``BESSER_<KIND>_MAX_BYTES`` / ``_MAX_FILES``)."""
    from kernel_ext.workspace.treebudget import DEFAULTS, bytes_var, files_var

    found: set[str] = set()
    for path in [*(ROOT / "kernel_ext").rglob("*.py"), *(ROOT / "widgets").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                found.update(m.group() for m in NAME.finditer(text) if not text.startswith("_", m.end()))
    found.update(name for kind in DEFAULTS for name in (bytes_var(kind), files_var(kind)))
    return found


def test_every_besser_variable_in_the_code_is_documented():
    documented = set(NAME.findall(DOC.read_text(encoding="utf-8")))
    names = names_in_code()
    assert len(names) > 30  # the scan found the code's names at all
    assert sorted(names - documented) == []


def test_every_traitlet_of_the_server_extension_is_documented():
    from kernel_ext.server.app import BesserAgentApp

    text = DOC.read_text(encoding="utf-8")
    own = [name for name, trait in BesserAgentApp.class_traits(config=True).items()
           if name in BesserAgentApp.__dict__]
    assert len(own) >= 10
    assert [name for name in own if f"`{name}`" not in text] == []


def test_the_readme_links_the_reference():
    assert "docs/configuration.md" in (ROOT / "README.md").read_text(encoding="utf-8")
