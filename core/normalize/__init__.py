"""Provider-native streams → normalized events (shared/DESIGN.md §3, shared/streams/).

A run that declares ``format`` (``anthropic``, ``openai-responses``, ``openai-chat``) may send raw provider
events; :func:`make_normalizer` gives the :class:`Normalizer` that turns them into ``text`` (answer or
reasoning deltas, with the assistant message index), ``block_end``, ``message_end``, ``tool_call``
(``start`` / ``args_delta`` / ``end``, arguments never parsed here), ``tool_result``, ``status`` and
``error`` events.

Example::

    normalizer = make_normalizer(ProviderFormat.ANTHROPIC, run_id="r1")
    for line in lines:
        events = normalizer.feed(json.loads(line))
    events = normalizer.close()
"""

from __future__ import annotations

from core.events import ProviderFormat
from core.normalize.anthropic import AnthropicNormalizer
from core.normalize.base import Normalizer
from core.normalize.openai_chat import OpenAIChatNormalizer
from core.normalize.openai_responses import OpenAIResponsesNormalizer

__all__ = [
    "AnthropicNormalizer",
    "Normalizer",
    "OpenAIChatNormalizer",
    "OpenAIResponsesNormalizer",
    "make_normalizer",
]


def make_normalizer(fmt: ProviderFormat, run_id: str) -> Normalizer:
    """A fresh normalizer for one provider stream of a run.

    Args:
        fmt: the provider format the run declared.
        run_id: ``run`` of every event produced.

    Returns:
        The provider's normalizer (one per stream: it keeps the stream's state).
    """
    if fmt is ProviderFormat.ANTHROPIC:
        return AnthropicNormalizer(run_id)
    if fmt is ProviderFormat.OPENAI_RESPONSES:
        return OpenAIResponsesNormalizer(run_id)
    return OpenAIChatNormalizer(run_id)
