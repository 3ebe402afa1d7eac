# ruff: noqa: F811 - fixtures imported from jupyter_fixtures and test_magics_kernel are requested by name
"""A run outlives what a kernel does: real kernels (ipykernel 7 and 6), the magics, and the server
extension where it matters.

- An interrupt while a cell awaits the run prints one line and no traceback; the run goes on.
- Re-running a cell whose request still has a live run (after a kernel restart) attaches to it
  instead of starting a second run; ``--new`` starts one anyway; ``%besser runs`` marks waiting runs.
- The run view's Cancel button, clicked as a front end clicks it, ends the run.
"""

from __future__ import annotations

import asyncio

from jupyter_fixtures import extension_config, jp_asyncio_loop, jp_server_config, poll, runs_dir  # noqa: F401
from test_magics_kernel import approve_both_cards, flavour, start_kernel  # noqa: F401

from kernel_ext.magics.display import WAITING_MARK
from kernel_ext.server.handlers.base import STATE_KEY


async def test_an_interrupted_wait_says_one_line_and_the_run_goes_on(tmp_path, flavour):
    kernel = await start_kernel(tmp_path, flavour, with_server=False)
    try:
        values = await kernel.execute("view = %besser scenario side-effects\ndisplay(view)", run="view.state.run_id")
        run_id = values["run"].strip("'")
        waiting = kernel.send("print('waiting for the run')\nstate = await view.wait()")
        await kernel.printed_by(waiting, "waiting for the run")
        await asyncio.sleep(0.2)
        await kernel.manager.interrupt_kernel()
        reply = (await asyncio.wait_for(kernel._replies[waiting], 30))["content"]
        assert reply["status"] == "error" and reply["ename"] == "StoppedWaiting"
        assert reply["traceback"] == [f"stopped waiting; the run goes on: %besser attach {run_id}"]
        assert "Traceback" not in kernel.printed.get(waiting, "") and "CancelledError" not in str(reply)
        await approve_both_cards(kernel)  # the run kept waiting for its cards
        await kernel.wait_for("view.state.status", "'completed'")
    finally:
        await kernel.stop()


async def answering(kernel, timeout: float = 60) -> None:
    """Until the restarted kernel answers a request (its readers keep the channels' replies)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            await kernel.execute("pass", timeout=5)
            return
        except TimeoutError:
            if loop.time() > deadline:
                raise


async def test_a_rerun_cell_attaches_to_its_waiting_run_after_a_restart(jp_serverapp, http_server, runs_dir, tmp_path):
    manager = jp_serverapp.web_app.settings[STATE_KEY].manager
    kernel = await start_kernel(tmp_path, "ipykernel7", with_server=True)
    try:
        await kernel.execute("view = %besser scenario side-effects\ndisplay(view)")
        (run,) = manager.live()
        await poll(run.pending_approvals)
        await kernel.manager.restart_kernel(now=True)
        await answering(kernel)
        await kernel.execute("%load_ext kernel_ext")
        values = await kernel.execute("again = %besser scenario side-effects\ndisplay(again)", run="again.state.run_id",
                                      note="again.note")
        assert values["run"] == repr(run.id) and len(manager.live()) == 1  # no second run
        assert f"run {run.id} for this same request waits for 1 approval: attached to it" in values["note"]
        listed = await kernel.execute("table = %besser runs", text="table._repr_mimebundle_()['text/plain']")
        assert f"{WAITING_MARK} 1 run waits for a decision: %besser attach {run.id}" in listed["text"]
        assert f"{WAITING_MARK} waiting_for_approval" in listed["text"]
        other = await kernel.execute("other = %besser scenario side-effects --allow edit", run="other.state.run_id")
        assert other["run"] != repr(run.id) and len(manager.live()) == 2  # another request: another run
        forced = await kernel.execute("forced = %besser scenario side-effects --new\ndisplay(forced)", run="forced.state.run_id")
        assert forced["run"] not in (repr(run.id), other["run"]) and len(manager.live()) == 3
        # the Cancel button of the attached view, clicked as the front end does
        cancel = (await kernel.execute("", button="again.controls.cancel_button.model_id"))["button"].strip("'")
        assert kernel.widgets[cancel]["description"] == "Cancel run"
        kernel.click(cancel)
        done = await asyncio.wait_for(run.wait(), 30)
        assert done is not None and done.status == "cancelled" and done.cancelled_by == "person"  # who: on the event
        await kernel.wait_for("again.state.status", "'cancelled'")
        shown = (await kernel.execute("", text="again.to_text()"))["text"]
        assert "you cancelled the run" in shown and "· nobody" not in shown, shown  # its open card: not "nobody"
        assert (await kernel.execute("", hidden="again.controls.cancel_button.layout.display"))["hidden"] == "'none'"
    finally:
        for live in manager.live():
            live.cancel()
        await kernel.stop()
