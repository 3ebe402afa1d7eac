"""Phase 3's stopping rules and its rollback to the best snapshot, with authored repairers."""

from __future__ import annotations

from pathlib import Path

from kernel_ext.pipeline.phase3 import Finding, RoundOutcome, ValidationReport, run_phase3


def blockers(n: int, boots=True) -> ValidationReport:
    return ValidationReport(tuple(Finding("blocker", "ruff", f"F821 #{i}") for i in range(n)), boots=boots)


def setup(tmp_path: Path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.py").write_text("x = 0\n")
    return app, tmp_path / "snaps"


def file_validator(app: Path, boots_until=None):
    """Blockers = the number written in main.py (a real file the repairer edits)."""

    async def validate():
        value = int((app / "main.py").read_text().split("=")[1])
        return blockers(value)

    return validate


async def test_repair_until_no_blockers(tmp_path):
    app, snaps = setup(tmp_path)
    (app / "main.py").write_text("x = 3\n")

    async def repair(report, round_no):
        (app / "main.py").write_text(f"x = {len(report.blockers) - 1}\n")
        return RoundOutcome()

    result = await run_phase3(app, snaps, file_validator(app), repair)
    assert result.report.blockers == () and result.rounds == 3
    assert result.stop_reason == "no blockers left" and not result.rolled_back


async def test_worse_repair_is_rolled_back_to_the_best_tree(tmp_path):
    app, snaps = setup(tmp_path)
    (app / "main.py").write_text("x = 2\n")
    emitted = []

    async def repair(report, round_no):
        (app / "main.py").write_text(f"x = {len(report.blockers) + 1}\n")  # makes it worse every time
        (app / f"junk{round_no}.py").write_text("bad\n")
        return RoundOutcome()

    result = await run_phase3(app, snaps, file_validator(app), repair, emit=lambda t, **k: emitted.append((t, k)))
    assert result.rolled_back and len(result.report.blockers) == 2
    assert (app / "main.py").read_text() == "x = 2\n"  # Phase 2's tree came back
    assert not any(p.name.startswith("junk") for p in app.iterdir())
    assert result.stop_reason == "2 rounds in a row without progress"
    assert emitted[-1][1]["action"] == "restored"


async def test_plateau_stops_after_three_changing_rounds(tmp_path):
    app, snaps = setup(tmp_path)
    (app / "main.py").write_text("x = 1\n")

    async def repair(report, round_no):
        (app / "notes.txt").write_text(f"round {round_no}\n")  # changes the tree, fixes nothing
        return RoundOutcome(obligations_changed=True)  # but keeps claiming checklist progress

    result = await run_phase3(app, snaps, file_validator(app), repair)
    assert result.rounds == 3 and result.stop_reason.startswith("3 rounds changed the tree")


async def test_round_budget_is_at_least_five_and_grows_with_turns_left(tmp_path):
    app, snaps = setup(tmp_path)
    (app / "main.py").write_text("x = 50\n")

    async def repair(report, round_no):
        (app / "main.py").write_text(f"x = {len(report.blockers) - 1}\n")
        return RoundOutcome()

    five = await run_phase3(app, snaps, file_validator(app), repair)
    assert five.rounds == 5 and five.stop_reason.startswith("round budget (5)")
    more = await run_phase3(app, snaps, file_validator(app), repair, turns_left=8)
    assert more.rounds == 8


async def test_an_explicit_round_count_within_the_cap_and_zero_turns_repair_off(tmp_path):
    app, snaps = setup(tmp_path)
    (app / "main.py").write_text("x = 50\n")
    calls = []

    async def repair(report, round_no):
        calls.append(round_no)
        (app / "main.py").write_text(f"x = {len(report.blockers) - 1}\n")
        return RoundOutcome()

    two = await run_phase3(app, snaps, file_validator(app), repair, turns_left=30, rounds=2)
    assert two.rounds == 2 and two.stop_reason.startswith("round budget (2)")
    capped = await run_phase3(app, snaps, file_validator(app), repair, rounds=9, rounds_cap=3)
    assert capped.rounds == 3
    calls.clear()
    off = await run_phase3(app, snaps, file_validator(app), repair, rounds=0)
    assert off.rounds == 0 and calls == [] and off.stop_reason.startswith("repair is off")
    assert len(off.report.blockers) == 45  # validated, not repaired


async def test_without_a_repairer_it_only_validates(tmp_path):
    app, snaps = setup(tmp_path)
    (app / "main.py").write_text("x = 2\n")
    result = await run_phase3(app, snaps, file_validator(app), None)
    assert result.rounds == 0 and len(result.report.blockers) == 2
    assert result.stop_reason == "no provider to repair with"


def test_rank_orders_boot_then_create_then_actions_then_blockers():
    boots_with_many = ValidationReport(tuple(Finding("blocker", "x", str(i)) for i in range(9)), boots=True)
    no_boot = ValidationReport((), boots=False)
    cannot_create = ValidationReport((), boots=True, cannot_create=("Book",))
    warnings_only = ValidationReport((Finding("warning", "ruff", "E501"),), boots=True)
    assert no_boot.rank() > cannot_create.rank() > boots_with_many.rank() > warnings_only.rank()
    assert warnings_only.blockers == () and no_boot.runtime_failure()
