"""Phase 1: a registry over BESSER's own generators (plus stack build files), run unchanged.

Import-light: BESSER is imported by the generator calls themselves. Public names are
resolved lazily from their modules.
"""

from __future__ import annotations

from kernel_ext.lazy import lazy_exports

_EXPORTS = {
    "GeneratorSpec": "kernel_ext.generation.targets",
    "ALL_TARGETS": "kernel_ext.generation.registry",
    "get_target": "kernel_ext.generation.registry",
    "offered_targets": "kernel_ext.generation.registry",
    "phase1_choices": "kernel_ext.generation.registry",
    "resolve_target": "kernel_ext.generation.registry",
    "redundant_tools": "kernel_ext.generation.registry",
    "detect_stack": "kernel_ext.generation.stack_metadata",
    "Finding": "kernel_ext.findings",
    "CheckReport": "kernel_ext.generation.checks",
    "check_files": "kernel_ext.generation.checks",
    "GeneratedFile": "kernel_ext.generation.manifest",
    "GenerationLedger": "kernel_ext.generation.manifest",
    "authorship_split": "kernel_ext.generation.manifest",
    "tree_hashes": "kernel_ext.generation.manifest",
    "ledger_of": "kernel_ext.generation.manifest",
    "generate": "kernel_ext.generation.runner",
    "publish_output": "kernel_ext.generation.runner",
    "Phase1Result": "kernel_ext.generation.phase1",
    "run_phase1": "kernel_ext.generation.phase1",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports('kernel_ext.generation', _EXPORTS)
