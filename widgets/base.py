"""The text fallback every widget carries for places that cannot render widgets.

GitHub, nbviewer, nbconvert without widget state and terminals show ``text/plain`` (and
``text/html`` where they render HTML); live front ends pick the widget view.
"""

from __future__ import annotations

from typing import Any

from kernel_ext.safetext import shown_text


class StaticFallback:
    """Mixed into an ipywidgets container; subclasses provide ``to_text`` and ``to_html``."""

    def to_text(self) -> str:
        raise NotImplementedError

    def to_html(self) -> str:
        raise NotImplementedError

    def static_bundle(self) -> dict[str, Any]:
        """The widget's content without the widget: what renders with no kernel and no widget model."""
        return {"text/plain": shown_text(self.to_text()),  # a terminal shows the model's bidi controls, never obeys them
                "text/html": self.to_html()}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}  # type: ignore[misc]
        bundle.update(self.static_bundle())
        return bundle

    def __str__(self) -> str:
        return shown_text(self.to_text())
