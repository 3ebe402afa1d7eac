"""The text fallback every widget carries for places that cannot render widgets.

GitHub, nbviewer, nbconvert without widget state and terminals show ``text/plain`` (and
``text/html`` where they render HTML); live front ends pick the widget view.
"""

from __future__ import annotations

from typing import Any


class StaticFallback:
    """Mixed into an ipywidgets container; subclasses provide ``to_text`` and ``to_html``."""

    def to_text(self) -> str:
        raise NotImplementedError

    def to_html(self) -> str:
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}  # type: ignore[misc]
        bundle["text/plain"] = self.to_text()
        bundle["text/html"] = self.to_html()
        return bundle

    def __str__(self) -> str:
        return self.to_text()
