"""Native streams → normalized events (shared/DESIGN.md §3, shared/streams/, tests/streams/).

A run that declares ``format`` (the provider APIs ``anthropic``, ``openai-responses``, ``openai-chat``,
``gemini``; the agent protocols ``ag-ui``, ``ai-sdk-ui``, ``a2a``, ``langgraph``) may send raw events of that format;
:func:`make_normalizer` gives the :class:`Normalizer` that turns them into ``text`` (answer or reasoning deltas,
with the assistant message index), ``block_end``, ``message_end``, ``tool_call`` (``start`` / ``args_delta`` /
``end``, arguments never parsed here), ``tool_result``, ``status``, ``media`` and ``error`` events, and, for the
agent protocols, a sub-agent's events with its ``source`` and its ``end``.

Example::

    normalizer = make_normalizer(ProviderFormat.ANTHROPIC, run_id="r1")
    for line in lines:
        events = normalizer.feed(json.loads(line))
    events = normalizer.close()
"""

from __future__ import annotations

from collections.abc import Callable

from streamrelay.core.events import ProviderFormat
from streamrelay.core.normalize.a2a import A2ANormalizer
from streamrelay.core.normalize.ag_ui import AgUiNormalizer
from streamrelay.core.normalize.ai_sdk_ui import AiSdkUiNormalizer
from streamrelay.core.normalize.anthropic import AnthropicNormalizer
from streamrelay.core.normalize.base import Normalizer
from streamrelay.core.normalize.gemini import GeminiNormalizer
from streamrelay.core.normalize.langgraph import LangGraphNormalizer
from streamrelay.core.normalize.openai_chat import OpenAIChatNormalizer
from streamrelay.core.normalize.openai_responses import OpenAIResponsesNormalizer

__all__ = [
    "A2ANormalizer",
    "AgUiNormalizer",
    "AiSdkUiNormalizer",
    "AnthropicNormalizer",
    "GeminiNormalizer",
    "LangGraphNormalizer",
    "Normalizer",
    "OpenAIChatNormalizer",
    "OpenAIResponsesNormalizer",
    "make_normalizer",
]


def make_normalizer(fmt: ProviderFormat, run_id: str) -> Normalizer:
    """A fresh normalizer for one provider stream of a run.

    Args:
        fmt: the stream format the run declared.
        run_id: ``run`` of every event produced.

    Returns:
        The provider's normalizer (one per stream: it keeps the stream's state).
    """
    return _NORMALIZERS[fmt](run_id)


_NORMALIZERS: dict[ProviderFormat, Callable[[str], Normalizer]] = {
    ProviderFormat.ANTHROPIC: AnthropicNormalizer,
    ProviderFormat.OPENAI_RESPONSES: OpenAIResponsesNormalizer,
    ProviderFormat.OPENAI_CHAT: OpenAIChatNormalizer,
    ProviderFormat.AG_UI: AgUiNormalizer,
    ProviderFormat.AI_SDK_UI: AiSdkUiNormalizer,
    ProviderFormat.A2A: A2ANormalizer,
    ProviderFormat.GEMINI: GeminiNormalizer,
    ProviderFormat.LANGGRAPH: LangGraphNormalizer,
}
"""One normalizer class per format (a format without one fails the import, not a run)."""

_MISSING = set(ProviderFormat) - set(_NORMALIZERS)
if _MISSING:  # pragma: no cover - a format added to the enum without its normalizer
    raise ImportError(f"no normalizer for the formats {sorted(_MISSING)}: add one in core/normalize/")
