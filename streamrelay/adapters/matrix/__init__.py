"""Matrix channel adapter (matrix-nio): :class:`MatrixAdapter`; the platform's registration: :data:`PLATFORM`.

The package imports nio only when :class:`MatrixAdapter` is used: the registry reads :data:`PLATFORM` without it.
"""

from typing import TYPE_CHECKING, Any

from streamrelay.adapters.matrix.platform import PLATFORM

if TYPE_CHECKING:
    from streamrelay.adapters.matrix.adapter import MatrixAdapter


def __getattr__(name: str) -> Any:
    if name == "MatrixAdapter":
        from streamrelay.adapters.matrix.adapter import MatrixAdapter

        return MatrixAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PLATFORM", "MatrixAdapter"]
