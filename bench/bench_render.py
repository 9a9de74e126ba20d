"""Rendering benchmark (issue 23, item 3): render calls and time per delta when the live part is measured on every
delta and then sent, per platform adapter, beside a baseline in the same run.

Run: ``uv run python bench/bench_render.py [--repeat N]``

Input: the recorded 8.5k-character Markdown answer (the ``text_delta`` texts of
tests/streams/anthropic/markdown-long-fences.jsonl, 739 deltas), fed delta by delta to the chunker with the channel's
message parameters, as :class:`core.delivery.modes.PreviewMode` does. After each delta, every text that is to be
shown (each frozen part, then the live part: the chunker's pending text) is measured, as
:meth:`core.policy.Splitter.fit` does, and then sent: rendered into the platform's payload, as the adapter's
``edit_text`` does before its call (no network: the request is not made).

Rows, per platform (Telegram, Slack, Discord; format ``markdown``):

- ``baseline``: the platform's pure render function run for each use: once to measure, once more to send (what the
  adapters did before the rendering was cached: ``measure`` rendered, and ``edit_text`` rendered again).
- ``adapter``: the adapter itself: ``adapter.measure(text, fmt)``, then the rendering the send uses (the adapter's
  ``render(text, fmt)``, from its cache when the text was measured; on an adapter without ``render``, the pure
  function again).

Columns: ``renders`` the pure render function's calls over the whole answer (counted by wrapping it where the
adapter's modules hold it), ``per delta`` those per delta, ``us/delta`` the wall time per delta, the best of
``--repeat`` runs with the rows interleaved (the chunker's own time excluded: the texts per delta are computed first).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from streamrelay.core.chunking import BreakKind, Chunker, ChunkParams  # noqa: E402
from streamrelay.core.ports import TextFormat  # noqa: E402
from streamrelay.core.units import LengthUnit  # noqa: E402

STREAM = ROOT / "tests" / "streams" / "anthropic" / "markdown-long-fences.jsonl"
FMT = TextFormat.MARKDOWN
TELEGRAM_TOKEN = "123456789:AAE-bench_Secret-Token_0123456789abcdef"
SLACK_TOKEN = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
DISCORD_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GmOcKz.bench_Secret-Hmac_0123456789abcdefgh"


def recorded_deltas() -> list[str]:
    """The recorded answer's ``text_delta`` texts, in order."""
    deltas = []
    for line in STREAM.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        delta = event.get("delta") if event.get("type") == "content_block_delta" else None
        if isinstance(delta, dict) and delta.get("type") == "text_delta":
            deltas.append(str(delta["text"]))
    return deltas


def shown_per_delta(deltas: list[str], max_units: int) -> list[list[str]]:
    """Per delta, the texts that are measured and sent: the parts it froze, then the live part (if any)."""
    budget = max(2, max_units * 9 // 10)  # ChannelPolicy.split_params for markdown
    chunker = Chunker(ChunkParams(budget, budget, BreakKind.PARAGRAPH, LengthUnit.UTF16))
    shown = []
    for delta in deltas:
        texts = chunker.append(delta)
        pending = chunker.pending
        shown.append([*texts, pending] if pending else texts)
    return shown


@dataclass
class Platform:
    name: str
    make: Callable[[], Any]
    max_units: int


def _telegram() -> Any:
    from streamrelay.adapters.telegram.adapter import TelegramAdapter

    return TelegramAdapter(TELEGRAM_TOKEN)


def _slack() -> Any:
    from streamrelay.adapters.slack.adapter import SlackAdapter

    return SlackAdapter(SLACK_TOKEN)


def _discord() -> Any:
    from streamrelay.adapters.discord.adapter import DiscordAdapter

    return DiscordAdapter(DISCORD_TOKEN)


def _render_module(platform: str) -> str:
    """Where the pure render function lives (the Discord one moved out of adapter.py with this issue)."""
    if platform == "discord":
        try:
            import streamrelay.adapters.discord.render  # noqa: F401
        except ImportError:
            return "streamrelay.adapters.discord.adapter"
    return f"streamrelay.adapters.{platform}.render"


PLATFORMS = [
    Platform("telegram", _telegram, 4096),
    Platform("slack", _slack, 4000),
    Platform("discord", _discord, 2000),
]


@contextmanager
def counted(function: Callable[..., Any], counter: list[int]) -> Iterator[Callable[..., Any]]:
    """``function`` replaced, in every loaded ``adapters`` module that holds it, by a wrapper that counts calls."""

    def counting(*args: Any, **kwargs: Any) -> Any:
        counter[0] += 1
        return function(*args, **kwargs)

    patched = [
        (module, name)
        for module_name, module in list(sys.modules.items())
        if module_name.startswith("adapters.") and module is not None
        for name, value in list(vars(module).items())
        if value is function
    ]
    for module, name in patched:
        setattr(module, name, counting)
    try:
        yield counting
    finally:
        for module, name in patched:
            setattr(module, name, function)


def run_baseline(render: Callable[..., Any], shown: list[list[str]], max_units: int, discord: bool) -> None:
    extra = (max_units,) if discord else ()
    for texts in shown:
        for text in texts:
            render(text, FMT, *extra)  # measure
            render(text, FMT, *extra)  # send


def run_adapter(
    adapter: Any, render: Callable[..., Any], shown: list[list[str]], max_units: int, discord: bool
) -> None:
    rendered = getattr(adapter, "render", None)
    extra = (max_units,) if discord else ()
    for texts in shown:
        for text in texts:
            adapter.measure(text, FMT)
            if rendered is not None:
                rendered(text, FMT)
            else:
                render(text, FMT, *extra)


def bench(platform: Platform, deltas: list[str], repeat: int) -> list[tuple[str, int, float]]:
    import importlib

    platform.make()  # imports the adapter's modules before the render function is wrapped where they hold it
    module = importlib.import_module(_render_module(platform.name))
    render = module.render
    shown = shown_per_delta(deltas, platform.max_units)
    discord = platform.name == "discord" and "max_units" in render.__code__.co_varnames
    bodies = {
        "baseline": lambda r: run_baseline(r, shown, platform.max_units, discord),
        "adapter": lambda r: run_adapter(platform.make(), r, shown, platform.max_units, discord),
    }
    times: dict[str, list[float]] = {label: [] for label in bodies}
    calls: dict[str, int] = {}
    for _ in range(repeat):  # the rows interleaved: a machine that slows down slows both
        for label, body in bodies.items():
            counter = [0]
            with counted(render, counter) as wrapped:
                start = time.perf_counter()
                body(wrapped)
                times[label].append(time.perf_counter() - start)
            calls[label] = counter[0]
    rows = [(label, calls[label], min(times[label]) / len(deltas) * 1e6) for label in bodies]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    deltas = recorded_deltas()
    print(f"{len(deltas)} deltas, {sum(map(len, deltas))} characters, format {FMT}, best of {args.repeat}")
    print(f"{'platform':<10} {'row':<10} {'renders':>8} {'per delta':>10} {'us/delta':>10}")
    for platform in PLATFORMS:
        for label, calls, us in bench(platform, deltas, args.repeat):
            print(f"{platform.name:<10} {label:<10} {calls:>8} {calls / len(deltas):>10.2f} {us:>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
