"""Failures the fuzzer found in other modules, tolerated by the fuzz until they are fixed there (none open).

Each entry: the error text it shows (any of the needles), and where the fix belongs. Every
affected call is reproduced exactly by a strict xfail in ``test_fuzz_known.py``; the fuzz lets
only these signatures through, so a new kind of failure still fails it. A lone surrogate
(``"\\ud800"`` in JSON) or a NUL reaches a tool from any provider reply: the boundary could
refuse both once for every tool.
"""

from __future__ import annotations

KNOWN: dict[str, tuple[tuple[str, ...], str]] = {
    # Fixed: lone surrogates and NULs are refused once at the boundary (Executor._refuse_unusable_text);
    # over-long path components by workspace.fence.check_path_text (also used by the sandbox's folders);
    # oversized integers and deep nesting are invalid_json in Executor._parse_arguments.
}


def known_finding(error: str) -> str | None:
    """The key of the known finding whose signature ``error`` shows, else None."""
    for key, (needles, _) in KNOWN.items():
        if any(needle in error for needle in needles):
            return key
    return None


# Inputs the fuzz does not send because they hang rather than fail: a long command word full of '[' or '{'
# makes the command lexer quadratic (kernel_ext/shellplan/lexer.py). Reproduced, with a count of the
# lexer's work, by tests/security/test_sec_resources.py::test_preparing_a_card_for_a_long_command_costs_linear_work.
LEXER_TOOLS = ("run_command", "install_dependencies", "sh_run", "sh_plan")
LEXER_SAFE_CHARS = 4000


def hangs_the_lexer(tool: str, arguments: object) -> bool:
    return tool in LEXER_TOOLS and _longest_string(arguments) > LEXER_SAFE_CHARS


def _longest_string(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max([_longest_string(v) for v in value.values()] + [_longest_string(k) for k in value] + [0])
    if isinstance(value, list):
        return max([_longest_string(v) for v in value] + [0])
    return 0
