"""The run manager's own promises, one at a time (``hosting/manager.py``)."""

from __future__ import annotations
