"""The server extension: configuration, the run manager's lifetime, and the kernel export.

Configured through traitlets (``c.BesserAgentApp.*``); a trait left unset falls back to the
operator's environment at start-up (``BESSER_LLM_ENABLE_SHELL_TOOLS``, ``BESSER_SANDBOX``,
``BESSER_LLM_PROVIDER``, ``BESSER_LLM_MODEL``, ...), so the same variables work with and
without Jupyter. Nothing a request carries changes these settings.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Float, Int, List, Unicode

from kernel_ext.hosting.bodies import preload
from kernel_ext.hosting.manager import RunManager
from kernel_ext.hosting.options import OperatorSettings
from kernel_ext.secrets import secret_values
from kernel_ext.server.auth import Capability, KernelExport, api_url, direct_url
from kernel_ext.server.handlers import routes
from kernel_ext.server.handlers.base import MAX_BODY_BYTES, MAX_EVENT_STREAMS, STATE_KEY, ServerState, StreamLimits

if TYPE_CHECKING:
    from jupyter_server.serverapp import ServerApp


class BesserAgentApp(ExtensionApp):
    name = "besser_agent"
    description = "Hosts besser-jupyter-agent runs: REST + SSE under <base_url>/besser-agent/"

    runs_dir = Unicode("besser_runs", config=True, help="Where runs live; relative paths are under the server's root_dir.")
    shell_tools_enabled = Bool(None, allow_none=True, config=True, help="Offer shell tools (default: BESSER_LLM_ENABLE_SHELL_TOOLS).")
    toolchain_validation = Bool(None, allow_none=True, config=True,
                                help="Toolchain validation in Phase 3 (default: BESSER_LLM_ENABLE_TOOLCHAIN_VALIDATION).")
    sandbox_policy = Unicode(None, allow_none=True, config=True, help="auto | bwrap | landlock | off (default: BESSER_SANDBOX or auto).")
    provider = Unicode(None, allow_none=True, config=True, help="LLM provider (default: BESSER_LLM_PROVIDER, else inferred from keys).")
    llm_model = Unicode(None, allow_none=True, config=True, help="LLM model name (default: BESSER_LLM_MODEL).")
    approval_timeout = Float(None, allow_none=True, config=True,
                             help="Seconds before an unanswered approval counts as denied (default: BESSER_APPROVAL_TIMEOUT_SECONDS, "
                                  "1800; 0 waits for a person).")
    max_turns = Int(None, allow_none=True, config=True, help="Cap on a run's LLM turns; a request asking for more gets this.")
    max_cost_usd = Float(None, allow_none=True, config=True, help="Cap on a run's LLM cost in USD.")
    max_runtime_s = Float(None, allow_none=True, config=True, help="Cap on a run's wall time in seconds.")
    auto_fix = Bool(None, allow_none=True, config=True,
                    help="Phase 3 repair rounds; a request may turn them off, not on (default: BESSER_LLM_ENABLE_AUTO_FIX, on).")
    max_repair_rounds = Int(None, allow_none=True, config=True,
                            help="Cap on Phase 3's repair rounds; a request asking for more gets this "
                                 "(default: BESSER_LLM_MAX_REPAIR_ROUNDS).")
    import_smoke_check = Bool(None, allow_none=True, config=True,
                              help="Run the generated app (import, start-up, create probes) in validation; a request may turn it off "
                                   "(default: BESSER_LLM_ENABLE_IMPORT_SMOKE_CHECK, on).")
    shell_runbook = Bool(None, allow_none=True, config=True,
                         help="Phase 2's runtime verification runbook when shell tools are on (default: BESSER_LLM_SHELL_RUNBOOK, on).")
    extra_roots = List(Unicode(), default_value=None, allow_none=True, config=True,
                       help="Absolute folders the file tools may use beside a run's app/ (default: BESSER_EXTRA_ROOTS).")
    max_concurrent_runs = Int(
        None, allow_none=True, config=True,
        help="Runs this server runs at once; more wait, visibly, in a queue (default: BESSER_MAX_CONCURRENT_RUNS, else one per "
             "core, fewer where memory is short at 512 MiB a run, at least 2).",
    )
    heartbeat_interval = Float(15.0, config=True, help="Seconds between SSE heartbeats on a quiet stream.")
    export_to_kernels = Bool(True, config=True, help="Export BESSER_AGENT_URL and BESSER_AGENT_TOKEN to kernels started by this server.")
    max_body_bytes = Int(MAX_BODY_BYTES, config=True, help="Largest request body the extension's endpoints read (413 beyond it).")
    max_event_streams = Int(
        MAX_EVENT_STREAMS, config=True,
        help="Event streams (GET runs/<id>/events) open at once on this server; more are refused (429 TOO_MANY_STREAMS).",
    )
    sweep_temp_homes = Bool(
        True, config=True,
        help="Remove this user's sandbox temporary homes (besser-home-*, besser-oneoff-home-*, besser-apphost-*) "
             "left in the temp dir for over 24 h, at start and hourly.",
    )
    bind_kernel_token = Bool(
        True, config=True,
        help="Accept the kernels' token only from this server's own processes over a direct connection (not through a "
             "proxy). Turn off only where kernels are not local processes of this server (a kernel gateway).",
    )

    @property
    def _server(self) -> ServerApp:
        """The server this extension is loaded into (there before any setting or handler)."""
        if self.serverapp is None:
            raise RuntimeError("besser-agent: the extension is not loaded into a Jupyter server")
        return self.serverapp

    def initialize_settings(self) -> None:
        operator = OperatorSettings.from_environment(
            shell_tools_enabled=self.shell_tools_enabled,
            toolchain_validation=self.toolchain_validation,
            sandbox_policy=self.sandbox_policy,
            provider=self.provider,
            llm_model=self.llm_model,
            approval_timeout_s=self.approval_timeout,
            model_root=str(self._server.root_dir),  # REST model_path: only files under the server's root
            max_turns=self.max_turns,
            max_cost_usd=self.max_cost_usd,
            max_runtime_s=self.max_runtime_s,
            auto_fix=self.auto_fix,
            max_repair_rounds=self.max_repair_rounds,
            import_smoke_check=self.import_smoke_check,
            shell_runbook=self.shell_runbook,
            extra_roots=tuple(self.extra_roots) if self.extra_roots is not None else None,
            max_concurrent_runs=self.max_concurrent_runs,
        )
        capability = Capability.new()
        manager = RunManager(
            self._runs_path(),
            operator,
            known_secrets=secret_values(extra=(capability.token, getattr(self._server.identity_provider, "token", "") or "")),
        )
        recovered = manager.recover()
        if recovered:
            self.log.warning("besser-agent: %d run(s) in flight at the last shutdown marked interrupted", len(recovered))
        self.settings[STATE_KEY] = ServerState(
            manager, capability, operator, heartbeat_s=self.heartbeat_interval,
            max_body_bytes=self.max_body_bytes, bind_capability=self.bind_kernel_token,
            streams=StreamLimits(max_open=self.max_event_streams),
        )
        self._export = KernelExport()
        self._publish()
        self.log.info(
            "besser-agent: runs in %s (%d at once); shell tools %s; sandbox policy %s",
            manager.runs_dir,
            operator.max_concurrent_runs,
            "enabled" if operator.shell_tools_enabled else "disabled",
            operator.sandbox_policy,
        )

    def initialize_handlers(self) -> None:
        self.handlers.extend(routes())

    async def _start_jupyter_server_extension(self, serverapp) -> None:
        self._publish()  # the port is final now (a busy port makes the server pick another)
        # Every kind's run body is imported here, once, not by the first POST runs on the event
        # loop (~0.1-0.15 s of imports every follower would wait through).
        preload()
        if self.sweep_temp_homes:
            from kernel_ext.sandbox import TempSweeper

            self._sweeper = TempSweeper().start()  # its first sweep runs now, on its own thread

        # What start-up imported lives as long as the server: move it out of the collector's
        # reach, so a full collection set off by a run's worker thread (which holds the GIL while
        # it walks every object) never walks it, and the event loop keeps answering meanwhile.
        gc.freeze()

    async def stop_extension(self) -> None:
        state = self.settings.get(STATE_KEY)
        if state is not None:
            await state.manager.shutdown()
        if getattr(self, "_export", None) is not None:
            self._export.withdraw()
        if getattr(self, "_sweeper", None) is not None:
            self._sweeper.stop()
        if "kernel_ext.validation.apphost.ready" in sys.modules:  # a ready app host exists only once one was used
            from kernel_ext.validation.hosting import close_ready_hosts

            close_ready_hosts()

    def _publish(self) -> None:
        url = direct_url(self.serverapp)
        if not self.export_to_kernels or not url.startswith(("http://", "https://")):
            return
        self._export.publish(api_url(url), self.settings[STATE_KEY].capability, str(Path(self._server.root_dir).resolve()))

    def _runs_path(self) -> Path:
        path = Path(self.runs_dir).expanduser()
        return path if path.is_absolute() else Path(self._server.root_dir) / path
