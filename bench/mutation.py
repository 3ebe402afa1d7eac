"""Mutation testing of the modules that carry the guarantees, each against its own tests (``make mutation``).

mutmut 3 (the ``mutation`` extra) mutates one module at a time in a scratch copy of the
tree (``build/mutation/<name>/``), runs only that module's test files against each mutant,
and leaves the results there (``mutmut results`` / ``mutmut show NAME`` inside that folder).
One module at a time keeps the run on a shared 2-core machine: ``nice``, two workers, and
tests marked ``slow`` (whole runs, minutes each) left out.

    python bench/mutation.py                 # every module below, in order
    python bench/mutation.py read_ids env    # only these (names are the keys of MODULES)
    python bench/mutation.py --list          # the module -> tests map
    python bench/mutation.py manager -- 'kernel_ext.hosting.manager.*get__mutmut_*'   # these mutants only

Mutants named after ``--`` (mutmut's names, ``*`` allowed) are run in a fresh scratch copy too, so
mutmut's map of which tests reach which function is collected with every test of the module's map:
re-running names in an older scratch runs only the tests its first collection saw, and a test file
added since (outside the config's selection, whose change would reset every verdict) is never run,
so its kills read as survivors.

Survivors are judged by hand in ``bench/MUTATION.md``: a test that kills each one, or a
one-line reason it is equivalent. This script prints the counts the table there records.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / "build" / "mutation"
COPIED = ("kernel_ext", "widgets", "tests", "pyproject.toml", "DESIGN.md", "README.md")

# The export's own cases: the in-process entries (python, magic) and the builders' unit cases. Not the
# server's entries (a Jupyter server per test) but where the server's path is what is mutated (apart), nor
# the command line's (a child process mutmut neither sees nor sets up: they fail in its copy of the tree).
_NAMED = "tests/test_export_names.py::test_a_typed_run_name_is_matched_against_the_store"
EXPORT_TESTS = (
    "tests/test_export_builders.py", "tests/test_export_code.py", "tests/test_export.py", "tests/test_export_names.py",
    "tests/test_export_record_rules.py", "tests/test_export_sections_rules.py", "tests/test_export_notebook_rules.py",
    "tests/test_export_rerun_rules.py", "tests/test_notebook_metadata.py::test_an_exported_run_holds_what_its_kernel_reports",
    *(f"--deselect=tests/test_export.py::test_no_secret_reaches_an_export_and_nothing_else_changes[{entry}]"
      for entry in ("magic-server", "rest", "cli")),
    "--deselect=tests/test_export.py::test_refusals_are_one_named_line_and_lose_nothing[cli]",
    "--deselect=tests/test_export.py::test_the_rest_route_names_an_unknown_run",
    "--deselect=tests/test_export_names.py::test_every_magic_taking_a_run_id_refuses_a_path",
    "--deselect=tests/test_export_names.py::test_the_export_never_writes_through_a_planted_link[cli]",
    "--deselect=tests/test_export_names.py::test_the_default_notebook_goes_into_the_current_folder",
    *(f"--deselect={_NAMED}[{case}-{entry}]"
      for case in ("absolute", "dots", "link", "nested", "parent", "unknown") for entry in ("rest", "cli")))

# module -> its own test files (those that exercise the promise the module carries).
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "read_ids": ("kernel_ext/tools/read_ids.py", (
        "tests/test_file_tools_replace.py", "tests/test_file_tools_read.py", "tests/test_file_tools_modify.py",
        "tests/test_read_ids_store.py", "tests/test_audit_survivors.py")),
    "edit_gates": ("kernel_ext/tools/edit_gates.py", (
        "tests/test_edit_gates_rules.py", "tests/test_file_tools_gates.py", "tests/test_file_tools_modify.py", "tests/test_file_tools_replace.py")),
    "env": ("kernel_ext/sandbox/env.py", (
        "tests/test_sandbox_env.py", "tests/test_sandbox_units.py", "tests/test_audit_survivors.py")),
    "secrets": ("kernel_ext/secrets.py", (
        "tests/test_secrets_rules.py", "tests/test_secrets_matcher.py", "tests/test_pipeline_events.py", "tests/test_sandbox_units.py",
        "tests/test_api_redaction.py", "tests/security/test_sec_secrets.py", "tests/test_audit_survivors.py",
        # the matcher's own cases (the end-to-end runs in these files cost minutes a mutant)
        "tests/security/test_sec_secret_fragments.py::test_every_run_of_twelve_characters_is_cut",
        "tests/security/test_sec_secret_fragments.py::test_what_is_not_a_piece_stays",
        "tests/security/test_sec_secret_fragments.py::test_a_text_made_of_pieces_is_withheld_whole",
        "tests/security/test_sec_secret_fragments.py::test_the_boundary_refuses_a_secret_before_policy_and_approval",
        "tests/security/test_sec_secret_encodings.py::test_every_encoded_form_is_cut_and_refused",
        "tests/security/test_sec_secret_encodings.py::test_a_cut_takes_the_key_and_nothing_around_it",
        "tests/security/test_sec_secret_encodings.py::test_ordinary_text_and_short_pieces_stay",
        "tests/security/test_sec_secret_keys.py::test_every_report_shape_redacts_keys_and_header_names")),
    "command_policy": ("kernel_ext/shellplan/denylist.py", (
        "tests/test_command_policy.py", "tests/test_shell_words.py", "tests/test_sandbox_units.py", "tests/test_sandbox_tools.py")),
    "tiers": ("kernel_ext/sandbox/tiers.py", (
        "tests/test_sandbox_landlock_rules.py", "tests/test_sandbox_units.py", "tests/test_sandbox_confinement.py",
        "tests/test_sandbox_caps.py", "tests/test_audit_survivors.py", "tests/test_sandbox_parked.py", "tests/test_sandbox_fork.py",
        # builds a fresh venv without mutmut, which the mutated package imports
        "--deselect=tests/test_sandbox_confinement.py::test_server_interpreter_in_tmp_stays_usable")),
    "versions": ("kernel_ext/workspace/versions.py", (
        "tests/test_workspace_versions.py", "tests/test_boundary_executor.py", "tests/test_workspace_publish.py", "tests/test_audit_survivors.py")),
    "publish": ("kernel_ext/workspace/publish.py", (
        "tests/test_workspace_publish.py", "tests/test_workspace_publish_edges.py", "tests/test_workspace_publish_races.py",
        "tests/test_boundary_executor.py",
        "tests/test_file_tools_modify.py",
        "tests/security/test_sec_file_tools.py", "tests/faults/test_fault_disk_full.py")),
    "approval": ("kernel_ext/boundary/approval.py", (
        "tests/test_boundary_approval.py", "tests/test_boundary_executor.py", "tests/test_boundary_approvers.py",
        "tests/test_approval_grants.py", "tests/test_approval_denial_grants.py")),
    "grants": ("kernel_ext/boundary/grants.py", (
        "tests/test_approval_grants.py", "tests/test_approval_denial_grants.py", "tests/test_boundary_approval.py")),
    "decisions": ("kernel_ext/server/handlers/decisions.py", (
        "tests/test_approval_grants.py", "tests/test_approval_denial_grants.py", "tests/test_server_api.py",
        "tests/security/test_sec_approvals.py", "tests/security/test_sec_rest.py", "tests/test_server_decisions.py")),
    "run": ("kernel_ext/hosting/run.py", (
        "tests/test_pipeline_run.py", "tests/test_pipeline_events.py", "tests/test_approval_grants.py",
        "tests/test_approval_denial_grants.py", "tests/test_audit_survivors.py", "tests/security/test_sec_call_identity.py",
        "tests/test_hosting_run_handle.py", "tests/test_hosting_runtime_budget.py")),
    "manager": ("kernel_ext/hosting/manager.py", (
        "tests/test_hosting_admission.py", "tests/test_hosting_models.py", "tests/test_server_api.py", "tests/test_audit_survivors.py",
        "tests/test_hosting_runtime_budget.py", "tests/test_summary_fingerprint_once.py", "tests/security/test_sec_run_folder_log.py",
        "tests/test_hosting_manager.py")),
    "admission": ("kernel_ext/hosting/admission.py", ("tests/test_hosting_admission.py",)),
    "requirements": ("kernel_ext/appenv/requirements.py", (
        # the reader's own cases: invalid lines, the fuzz, `name @ URL` whatever its suffix. Not test_appenv.py
        # nor the whole runs: they build overlays in sandboxes (minutes a mutant) and reach the reader only through the plan
        "tests/test_appenv_requirements.py",
        "tests/test_appenv_invalid.py::test_a_line_the_reader_cannot_evaluate_is_named_invalid",
        "tests/test_appenv_invalid.py::test_environment_for_refuses_an_invalid_line_by_name_and_writes_nothing",
        "tests/test_appenv_invalid.py::test_fuzzed_requirements_never_raise_and_every_line_has_one_outcome",
        "tests/test_appenv_invalid.py::test_fuzzed_markers_are_evaluated_or_named_invalid",
        "tests/test_appenv_invalid.py::test_a_requirement_with_a_direct_url_is_never_installed_whatever_its_suffix",
        "tests/test_appenv_invalid.py::test_a_direct_url_never_reaches_the_overlay_plan")),
    "treewalk": ("kernel_ext/workspace/treewalk.py", (
        "tests/security/test_sec_tree_links.py", "tests/security/test_sec_tree_folder_flip.py",
        "tests/security/test_sec_tree_inflation.py", "tests/test_workspace_walk.py", "tests/test_checkpoint_store.py",
        "tests/test_treewalk_rules.py")),
    "treecopy": ("kernel_ext/workspace/treecopy.py", (
        "tests/security/test_sec_tree_links.py", "tests/security/test_sec_tree_folder_flip.py",
        "tests/security/test_sec_tree_inflation.py", "tests/test_checkpoint_store.py", "tests/test_shell_tools_checkpoints.py",
        "tests/test_treecopy_rules.py")),
    "streaming": ("kernel_ext/pipeline/streaming.py", ("tests/test_streaming_text.py",)),
    # The network tests' fast cases (seconds each, real namespaces and pasta; root adds addresses to `lo`): the
    # others start whole runs per entry point and cost tens of seconds a mutant for the same seal.
    "netseal": ("kernel_ext/sandbox/netseal.py", (
        "tests/test_sandbox_network_reseal.py", "tests/test_sandbox_netseal_rules.py",
        "tests/test_sandbox_network_watch.py::test_the_filter_covers_each_ipv4_prefix_multicast_and_broadcast",
        "tests/test_sandbox_network_watch.py::test_multicast_broadcast_and_bound_sockets_reach_no_host_listener[sh_run-bwrap]",
        "tests/test_sandbox_network_watch.py::test_a_reseal_that_fails_ends_the_namespaces_way_out_while_commands_run",
        "tests/test_sandbox_network_reach.py::test_private_reaches_no_address_of_the_host_and_host_reaches_all[sh_run_background-bwrap]",
        "tests/test_sandbox_network_reach.py::test_an_address_the_host_gains_during_a_run_is_kept_out_too",
        "tests/test_sandbox_network_reach.py::test_a_seal_that_fails_leaves_no_outbound_network_and_says_so",
        "tests/test_sandbox_network_reach.py::test_without_nsenter_or_ip_private_is_no_network_with_a_note",
        "tests/test_sandbox_network_reach.py::test_the_seal_covers_every_local_kind_the_kernel_lists",
        "tests/test_sandbox_network.py::test_private_without_pasta_is_no_network_with_a_note")),
    "netwatch": ("kernel_ext/sandbox/netwatch.py", (
        "tests/test_sandbox_network_reseal.py", "tests/test_sandbox_netwatch_messages.py", "tests/test_sandbox_network_watcher.py",
        "tests/test_sandbox_network_watch.py::test_a_command_already_running_never_reaches_an_address_the_host_gains[sh_run_background-bwrap]",
        "tests/test_sandbox_network_watch.py::test_multicast_broadcast_and_bound_sockets_reach_no_host_listener[sh_run-bwrap]",
        "tests/test_sandbox_network_watch.py::test_a_reseal_that_fails_ends_the_namespaces_way_out_while_commands_run",
        "tests/test_sandbox_network_reach.py::test_an_address_the_host_gains_during_a_run_is_kept_out_too",
        "tests/test_sandbox_network.py::test_pasta_ends_with_the_run")),
    # the export's builders, a key per file; the demo run the tests export is made once per key (BESSER_TEST_DEMO_RUN)
    "export_rerun": ("kernel_ext/hosting/export/rerun.py", EXPORT_TESTS),
    "export_text": ("kernel_ext/hosting/export/text.py", EXPORT_TESTS),
    "export_notebook": ("kernel_ext/hosting/export/notebook.py", EXPORT_TESTS),
    "export_record": ("kernel_ext/hosting/export/record.py", EXPORT_TESTS),
    "export_sections": ("kernel_ext/hosting/export/sections.py", EXPORT_TESTS),
    "export_apart": ("kernel_ext/hosting/export/apart.py", (
        "tests/test_export.py::test_no_secret_reaches_an_export_and_nothing_else_changes",
        "tests/test_export.py::test_the_rest_route_names_an_unknown_run", "tests/test_export_builders.py",
        "tests/test_export_apart_rules.py")),
    "bounds": ("kernel_ext/providers/bounds.py", (
        "tests/test_providers_bounds.py", "tests/test_providers_bounds_rules.py")),
    "executor": ("kernel_ext/boundary/executor.py", (
        "tests/test_boundary_executor.py", "tests/test_boundary_executor_edges.py", "tests/test_boundary_executor_arguments.py",
        "tests/test_boundary_approvers.py")),
    "fence": ("kernel_ext/workspace/fence.py", (
        "tests/test_workspace_fence.py", "tests/test_workspace_fence_rules.py", "tests/test_workspace_walk.py")),
    "checkpoints": ("kernel_ext/sandbox/shtools/checkpoints.py", (
        "tests/test_checkpoint_store.py", "tests/test_shell_tools_checkpoints.py", "tests/security/test_sec_tree_links.py", "tests/security/test_sec_tree_inflation.py")),
}


def prepare(name: str) -> Path:
    """A fresh scratch copy of the tree whose pyproject names the one module and its tests."""
    module, tests = MODULES[name]
    where = SCRATCH / name
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for item in COPIED:
        source = ROOT / item
        (shutil.copytree(source, where / item, ignore=ignore) if source.is_dir() else shutil.copy2(source, where / item))
    config = (
        "\n[tool.mutmut]\n"
        'source_paths = ["kernel_ext"]\n'
        'also_copy = ["DESIGN.md", "README.md", "widgets"]\n'  # tests read the documented figures
        f"only_mutate = [{json.dumps(module)}]\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(list(tests))}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-m", "not slow"]\n'
        "use_git_change_detection = false\n"
        'process_isolation = "forkserver"\n'  # the main process runs no test: sandboxes the tests start are not its children
    )
    with open(where / "pyproject.toml", "a", encoding="utf-8") as handle:
        handle.write(config)
    return where


def mutmut() -> str:
    found = Path(sys.executable).parent / "mutmut"
    if not found.exists():
        raise SystemExit("mutmut is not installed: pip install -e '.[mutation]' (make mutation does it)")
    return str(found)


def run(name: str, mutants: tuple[str, ...] = ()) -> dict:
    where = prepare(name)
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": "", "BESSER_TEST_DEMO_RUN": str(where / "demo-run")}
    done = subprocess.run(["nice", "-n", "10", mutmut(), "run", "--max-children", "2", *mutants], cwd=where, env=env, check=False)
    subprocess.run([mutmut(), "export-cicd-stats"], cwd=where, env=env, check=False, capture_output=True)
    stats_file = where / "mutants" / "mutmut-cicd-stats.json"
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    survivors = subprocess.run([mutmut(), "results"], cwd=where, env=env, check=False, capture_output=True, text=True)
    stats.update(module=MODULES[name][0], exit=done.returncode, seconds=round(time.monotonic() - started),
                 survivors=[line.split(":")[0].strip() for line in survivors.stdout.splitlines() if line.strip()])
    (where / "summary.json").write_text(json.dumps(stats, indent=2))
    return stats


def main(argv: list[str]) -> int:
    if "--list" in argv:
        for name, (module, tests) in MODULES.items():
            print(f"{name:15} {module}\n{'':15} {' '.join(tests)}")
        return 0
    names, mutants = (argv[:argv.index("--")], tuple(argv[argv.index("--") + 1:])) if "--" in argv else (argv, ())
    names = names or list(MODULES)
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        raise SystemExit(f"unknown module(s) {unknown}; known: {', '.join(MODULES)}")
    if mutants and len(names) != 1:
        raise SystemExit("mutants named after -- belong to one module: name exactly one before --")
    rows = [run(name, mutants) for name in names]
    print(f"\n{'module':40} {'mutants':>8} {'killed':>7} {'survived':>9} {'other':>6}")
    for row in rows:
        total = row.get("total", 0)
        killed, survived = row.get("killed", 0), row.get("survived", 0)
        print(f"{row['module']:40} {total:>8} {killed:>7} {survived:>9} {total - killed - survived:>6}")
    return 0 if all(row["exit"] == 0 for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
