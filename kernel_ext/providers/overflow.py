"""An endpoint saying the conversation no longer fits the model's context window.

Retrying cannot help (the same request is as long the second time), and the generic "bad
request" hides the one fact a person needs: the model's window is too small for this run. The
transport turns these replies into one final ``context_too_long`` error. Recognised by the
words the servers use, in the error body (HTTP 4xx) or an error event inside a stream:

- OpenAI: ``code: "context_length_exceeded"``, "This model's maximum context length is ...";
- LiteLLM's proxy (1.108.7, both wire formats): "litellm.ContextWindowExceededError: ...";
- Anthropic: "prompt is too long: N tokens > M maximum";
- llama.cpp's server: type ``exceed_context_size_error``, "... exceeds the available context
  size"; llama-cpp-python: "Requested tokens (N) exceed context window of M".
"""

from __future__ import annotations

import re

__all__ = ["context_overflow"]

_SIGNS = re.compile(
    r"context_length_exceeded|contextwindowexceeded|maximum context length|context window of"
    r"|exceed_context_size|available context size|prompt is too long",
    re.IGNORECASE,
)
_READ = 8192  # the words come early in every body seen; the rest is never searched


def context_overflow(status: int | None, body: str) -> bool:
    """Whether an error reply (``status`` None: an error event inside a stream) is a context overflow."""
    if status is not None and not 400 <= status < 500:
        return False
    return _SIGNS.search(body[:_READ]) is not None
