"""The export's builders, one promise at a time, on records made here (``hosting/export``)."""

from __future__ import annotations
