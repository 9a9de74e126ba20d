"""WhatsApp channel adapter (pywa, the WhatsApp Cloud API): :class:`WhatsAppAdapter`; the platform's registration:
:data:`PLATFORM`.

The package imports pywa only when :class:`WhatsAppAdapter` is used: the registry reads :data:`PLATFORM` without it.
"""

from typing import TYPE_CHECKING, Any

from streamrelay.adapters.whatsapp.platform import PLATFORM

if TYPE_CHECKING:
    from streamrelay.adapters.whatsapp.adapter import WhatsAppAdapter


def __getattr__(name: str) -> Any:
    if name == "WhatsAppAdapter":
        from streamrelay.adapters.whatsapp.adapter import WhatsAppAdapter

        return WhatsAppAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PLATFORM", "WhatsAppAdapter"]
