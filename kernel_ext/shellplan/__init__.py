"""What a shell command would do, judged from its text alone: no process is ever started here.

Two readers of model-supplied command text, both linear in its length and both below the
sandbox (this package imports nothing from ``kernel_ext.sandbox``, so it is tested alone):

- ``classify(command) -> Plan``: ``sh_plan``'s static risk class (``plan``, built on
  ``lexer``, ``rules``, ``git``, ``code`` and ``verdict``);
- ``check_command(command, allowed_programs)``: the command policy, a mistake-stopper before
  the sandbox (``denylist``, splitting words with ``words``); ``MAX_COMMAND_CHARS`` is the one
  cap on a command's length. Host patterns over the text run on RE2 (``scan``).

Imports are lazy (``%load_ext`` stays fast).
"""

from __future__ import annotations

from kernel_ext.lazy import lazy_exports

_EXPORTS = {
    "classify": "plan",
    "Plan": "plan",
    "Verdict": "verdict",
    "CATEGORIES": "verdict",
    "check_command": "denylist",
    "split_command": "denylist",
    "first_program": "denylist",
    "split_words": "words",
    "SplitError": "words",
    "MAX_COMMAND_CHARS": "words",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kernel_ext.shellplan",
                                    {name: f"kernel_ext.shellplan.{module}" for name, module in _EXPORTS.items()})
