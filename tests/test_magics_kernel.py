# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""Real kernels: ``%load_ext kernel_ext``, a run started by the magic, the Approve click sent as
a comm message to the card's button, the run reaching ``done``; against the server extension
(REST + SSE from the kernel) and in-process; and a notebook under nbclient. Each runs on
ipykernel 7 and on ipykernel 6 (``kernel_flavours``), including a person's click reaching a
cell that awaits the run while the next cell is already queued."""

from __future__ import annotations

import asyncio
import json

import nbformat
import pytest
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    runs_dir,
)
from kernel_driver import KernelDriver, kernel_env
from kernel_flavours import FLAVOURS, MAJOR, flavour_env, version_check
from nbclient import NotebookClient

from kernel_ext.scenarios import library_jwt
from kernel_ext.scenarios.calculator import FIX
from kernel_ext.server.handlers.base import STATE_KEY


@pytest.fixture(params=FLAVOURS)
def flavour(request) -> str:
    return request.param


async def start_kernel(tmp_path, flavour: str, *, with_server: bool) -> KernelDriver:
    """A kernel of ``flavour`` that has proven its ipykernel version, with the extension loaded."""
    kernel = await KernelDriver.start(tmp_path, flavour_env(flavour, kernel_env(with_server=with_server)))
    try:
        await kernel.execute(version_check(flavour))
        await kernel.execute("%load_ext kernel_ext")
    except BaseException:
        await kernel.stop()
        raise
    return kernel


async def approve_both_cards(kernel: KernelDriver) -> list[str]:
    first = await kernel.click_next("Approve")
    await asyncio.sleep(0)
    second = await kernel.click_next("Approve")
    return [first, second]


async def test_in_process_run_approved_by_comm_clicks(tmp_path, flavour):
    kernel = await start_kernel(tmp_path, flavour, with_server=False)
    try:
        values = await kernel.execute("view = %besser scenario side-effects\ndisplay(view)", status="view.state.status", note="view.note")
        assert "in-process" in values["note"] and values["status"] != "'completed'"  # the cell returned at once
        clicked = await approve_both_cards(kernel)
        await kernel.wait_for("view.state.status", "'completed'")
        assert all(kernel.widgets[c].get("disabled") for c in clicked)  # the front end sees the buttons disabled
        outcomes = await kernel.execute("", outcomes="[c.card.outcome for c in view.cards]")
        assert outcomes["outcomes"] == "['executed', 'executed']"
        run_dirs = list((tmp_path / "besser_runs").iterdir())
        assert len(run_dirs) == 1 and FIX in (run_dirs[0] / "app" / "calculator.py").read_text()
    finally:
        await kernel.stop()


async def test_kernel_follows_a_server_run_and_approves_through_it(jp_serverapp, http_server, runs_dir, tmp_path, flavour):
    manager = jp_serverapp.web_app.settings[STATE_KEY].manager
    kernel = await start_kernel(tmp_path, flavour, with_server=True)
    try:
        values = await kernel.execute("view = %besser scenario side-effects\ndisplay(view)", note="view.note")
        assert "hosted by the Jupyter server at /a%40b/besser-agent/" in values["note"]  # the path, never the loopback address
        assert "127.0.0.1" not in values["note"]
        (run,) = manager.live()
        await approve_both_cards(kernel)
        done = await asyncio.wait_for(run.wait(), 60)
        assert done.status == "completed"
        resolved = [e for e in run.events.events if e.type == "approval_resolved"]
        assert [e.approved for e in resolved] == [True, True]
        await kernel.wait_for("view.state.status", "'completed'")  # the kernel's follower saw done over SSE
        assert (await kernel.execute("", n="view.state.last_seq"))["n"] == str(len(run.events.events))
        assert not (tmp_path / "besser_runs").exists()  # nothing ran in the kernel
        # re-attach (as after a kernel restart): the server replays the log
        await kernel.execute("again = %besser attach " + run.id)
        await kernel.wait_for("again.state.status", "'completed'")
        listed = await kernel.execute("table = %besser runs", text="table._repr_mimebundle_()['text/plain']")
        assert run.id in listed["text"] and "completed" in listed["text"]
    finally:
        await kernel.stop()


@pytest.mark.parametrize("backend", ["in-process", "server"])
@pytest.mark.parametrize("flavour", [*FLAVOURS, "ipykernel6-last"])
async def test_a_click_reaches_a_cell_that_awaits_the_run(jp_serverapp, http_server, runs_dir, tmp_path, flavour, backend):
    """As a person running all cells: the cell awaiting the run is busy, the next cell is queued
    behind it, and the Approve clicks must still reach the cards; the waiting cell's print stays
    in its own output, and the queued cell runs after it, not inside it."""
    kernel = await start_kernel(tmp_path, flavour, with_server=backend == "server")
    try:
        relay = await kernel.execute("from widgets.kernel_comms import queueing_kernel", relay="queueing_kernel() is not None")
        assert relay["relay"] == str(MAJOR[flavour] == "6")  # only ipykernel 6 needs the view to pass clicks on
        await kernel.execute("from widgets.lesson import answer_cards\nview = %besser scenario side-effects\ndisplay(view)")
        waiting = kernel.send("state = await answer_cards(view, 'person', timeout=120)\nprint('the wait ended:', state.status)\nordered = ['waiting cell']")
        queued = kernel.send("ordered.append('queued cell')", ordered="ordered")
        await kernel.widget_shows("this cell waits until the run ends")  # the cell is running now (the view's banner says so)
        clicked = await approve_both_cards(kernel)
        await kernel.reply(waiting, timeout=120)
        assert "the wait ended: completed" in kernel.printed[waiting]
        assert (await kernel.reply(queued))["ordered"] == "['waiting cell', 'queued cell']"
        assert all(kernel.widgets[c].get("disabled") for c in clicked)
        outcomes = await kernel.execute("", outcomes="[c.card.outcome for c in view.cards]")
        assert outcomes["outcomes"] == "['executed', 'executed']"
        assert set(kernel.printed) <= set(kernel._replies)  # nothing was printed under a click's message
    finally:
        await kernel.stop()


async def test_notebook_runs_in_process_under_nbclient(tmp_path, flavour):
    cells = [
        version_check(flavour),
        "%load_ext kernel_ext",
        "view = %besser scenario side-effects\nview",
        "card = await view.wait_for_approval(timeout=30)\ncard.approve_button.click()",
        "card = await view.wait_for_approval(timeout=30)\ncard.approve_button.click()",
        (
            "state = await view.wait(timeout=60)\nassert state.status == 'completed', state.status\n"
            "assert all(c.approve_button.disabled and c.deny_button.disabled for c in view.cards)\nprint(view.to_text())"
        ),
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(notebook, kernel_name="python3", timeout=120, store_widget_state=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    with pytest.MonkeyPatch.context() as patch:
        for name in ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN"):
            patch.delenv(name, raising=False)
        await client.async_execute(env=flavour_env(flavour))
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    assert "[executed] edit" in printed and "done: completed" in printed
    view_output = notebook.cells[2].outputs[0]["data"]
    # the run ended: its live widget output was replaced by the finished run's static HTML (same display id),
    # so a reopened notebook shows the run, never "model not found"
    assert "application/vnd.jupyter.widget-view+json" not in view_output and "in-process" in view_output["text/plain"]
    assert "completed" in view_output["text/html"]
    models = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert {"VBoxModel", "HTMLModel"} <= {m["model_name"] for m in models.values()}


@pytest.mark.slow
async def test_generate_against_the_server_reaches_done(jp_serverapp, http_server, tmp_path, flavour):
    manager = jp_serverapp.web_app.settings[STATE_KEY].manager
    kernel = await start_kernel(tmp_path, flavour, with_server=True)
    try:
        await kernel.execute("from kernel_ext.model.examples import build_library_model\nlibrary = build_library_model()")
        # the shipped cassette (a replay, labelled so): every edit waits for a card's Approve click
        await kernel.execute(f"view = %besser generate library '{library_jwt.REQUEST}' --provider replay:library-jwt\ndisplay(view)")
        (run,) = manager.live()
        while not run.events.closed:
            try:
                await asyncio.wait_for(kernel.click_next("Approve", timeout=2), 3)
            except AssertionError:
                pass
        done = await run.wait()
        assert done is not None and done.status == "completed", done.summary if done else None
        assert [e.by for e in run.events.events if e.type == "approval_resolved"].count("card") >= 6
        await kernel.wait_for("view.state.finished", "True", timeout=120)
        started = json.loads(run.events.events[0].model_dump_json())
        assert started["type"] == "run_started"
    finally:
        await kernel.stop()
