"""The run: phases, events, the orchestrator and its guards."""
