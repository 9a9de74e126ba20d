"""Sources shown as links (issue 26): the ``citation`` event, each format's normalizer, the list after the answer
(deduplicated by URL, numbered in order of first appearance, titles escaped, only http(s) linked, a source without a
link shown by its title or counted), the run stage (part of the final; sub-agents' sources kept apart) and the tables
that no longer call these types ignored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamrelay.app.ingest_client import recording_lines
from streamrelay.core.chunking import BreakKind, ChunkParams
from streamrelay.core.clock import FakeClock
from streamrelay.core.contracts.units import MessageUnit, PipelineUnit
from streamrelay.core.delivery.modes import make_mode
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.sources import (
    HEADING_MARKDOWN,
    HEADING_PLAIN,
    MAX_SHOWN,
    SourceList,
    link_url,
    with_sources,
)
from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    Citation,
    DeliveryMode,
    End,
    EndStatus,
    Event,
    ProviderFormat,
    RunStart,
    Target,
    parse_event,
)
from streamrelay.core.lanes.pipeline import PipelineLane, ToolCallCollector
from streamrelay.core.normalize import ai_sdk_ui, anthropic, gemini, make_normalizer, openai_responses
from streamrelay.core.normalize.meanings import Meaning
from streamrelay.core.policy import ChannelPolicy, Splitter
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.report import SlotRole
from streamrelay.core.run.monitor import RunMonitor
from streamrelay.core.run.stage import RunStage
from streamrelay.core.text.coalescer import CoalesceParams
from streamrelay.core.units import LengthUnit

STREAMS = Path(__file__).resolve().parents[1] / "streams"
MD, PLAIN = TextFormat.MARKDOWN, TextFormat.PLAIN


def citations(fmt: ProviderFormat, raws: list[Any]) -> list[tuple[str | None, str | None]]:
    normalizer = make_normalizer(fmt, "r")
    events: list[Event] = [e for raw in raws for e in normalizer.feed(raw)] + normalizer.close()
    return [(e.url, e.title) for e in events if isinstance(e, Citation)]


# --- the event ----------------------------------------------------------------------------------------------------


def test_a_citation_is_a_contract_event() -> None:
    event = parse_event({"run": "r", "kind": "citation", "url": "https://a.example/x", "title": "A"})
    assert isinstance(event, Citation) and (event.url, event.title) == ("https://a.example/x", "A")
    assert isinstance(parse_event({"run": "r", "kind": "citation", "title": "report.pdf"}), Citation)


@pytest.mark.parametrize(
    "fields",
    [{}, {"url": " ", "title": ""}, {"url": "https://a.example/" + "x" * 5000}, {"title": "t" * 1001}],
)
def test_a_citation_with_nothing_or_too_much_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(IngestError, match="citation"):
        parse_event({"run": "r", "kind": "citation", **fields})


# --- the list -----------------------------------------------------------------------------------------------------


def test_sources_are_deduplicated_by_url_and_numbered_in_order_of_first_appearance() -> None:
    sources = SourceList()
    for url, title in [
        ("https://b.example/", None),
        ("https://a.example/1", "A one"),
        ("https://b.example/", "B"),  # a later title fills one the first lacked; its place stays
        ("https://a.example/1", "A again"),
    ]:
        sources.add(url, title)
    assert sources.render(MD) == f"{HEADING_MARKDOWN}\n1. [B](https://b.example/)\n2. [A one](https://a.example/1)"
    assert sources.render(PLAIN) == f"{HEADING_PLAIN}\n1. B: https://b.example/\n2. A one: https://a.example/1"


def test_titles_are_escaped_and_urls_cannot_break_the_link() -> None:
    sources = SourceList()
    sources.add("https://x.example/wiki/Foo_(bar)", "A [bracketed] *bold* `code` | title\nwith a newline")
    line = sources.render(MD).splitlines()[1]
    assert line == (
        r"1. [A \[bracketed\] \*bold\* \`code\` | title with a newline](https://x.example/wiki/Foo_%28bar%29)"
    )


@pytest.mark.parametrize(
    ("url", "linked"),
    [
        ("https://a.example/p?q=1", True),
        ("HTTP://A.example", True),
        ("javascript:alert(1)", False),
        ("data:text/html,hi", False),
        ("gs://bucket/doc.pdf", False),
        ("https://", False),
        ("https://a.example/with space", False),
        ("//a.example/x", False),
        ("https://a.example/" + "x" * 1500, False),  # past LINK_URL_MAX_CHARS: shown by its title
        ("https://u:pw-SECRET9@a.example/3", False),  # credentials before the host: never a link
        ("https://user@a.example/3", False),
        ("https://a.example/p?mail=a@b.example", True),  # an @ in the query is no userinfo
    ],
)
def test_only_http_and_https_urls_are_links(url: str, linked: bool) -> None:
    assert (link_url(url) is not None) is linked


@pytest.mark.parametrize(
    "url", ["https://u:pw-SECRET9@a.example/3", " http://alice@a.example/", "HTTPS://:pw-SECRET9@x"]
)
def test_a_citation_url_with_credentials_is_refused_422_without_repeating_it(url: str) -> None:
    with pytest.raises(IngestError) as raised:
        parse_event({"kind": "citation", "run": "r", "url": url, "title": "T"})
    assert raised.value.status == 422
    assert "user:password@" in str(raised.value)
    assert "SECRET9" not in str(raised.value) and "alice" not in str(raised.value)


def test_a_stream_citation_with_credentials_keeps_its_title_and_drops_the_link() -> None:
    from streamrelay.core.normalize.base import citation_event

    [titled] = citation_event("r", "https://u:pw-SECRET9@a.example/3", "Report")
    [untitled] = citation_event("r", "https://u:pw-SECRET9@a.example/3", None)
    assert isinstance(titled, Citation) and isinstance(untitled, Citation)
    assert (titled.url, titled.title) == (None, "Report")
    assert untitled.url is None and "SECRET9" not in (untitled.title or "")


def test_a_source_without_a_link_is_shown_by_its_title_or_counted_never_dropped() -> None:
    sources = SourceList()
    sources.add(None, "Annual report 2024.pdf")
    sources.add("javascript:alert(1)", "Looks like a link")
    sources.add("gs://bucket/untitled.pdf", None)
    sources.add("https://a.example/", None)
    assert sources.render(MD).splitlines() == [
        HEADING_MARKDOWN,
        "1. Annual report 2024.pdf",
        "2. Looks like a link",
        "3. [a.example](https://a.example/)",
        "(+1 without a title or link)",
    ]


def test_past_the_cap_the_rest_are_counted() -> None:
    sources = SourceList()
    for i in range(MAX_SHOWN + 3):
        sources.add(f"https://a.example/{i}", f"S{i}")
    lines = sources.render(MD).splitlines()
    assert len(lines) == 1 + MAX_SHOWN + 1 and lines[-1] == "(+3 more)"


def test_with_sources_closes_an_open_fence_and_adds_nothing_without_sources() -> None:
    assert with_sources("Answer.", SourceList(), MD) == "Answer."
    sources = SourceList()
    sources.add("https://a.example/", "A")
    assert with_sources("Code:\n```py\nx = 1\n", sources, MD) == (
        f"Code:\n```py\nx = 1\n```\n\n{HEADING_MARKDOWN}\n1. [A](https://a.example/)"
    )
    assert with_sources("", sources, MD) == f"{HEADING_MARKDOWN}\n1. [A](https://a.example/)"


# --- the normalizers ----------------------------------------------------------------------------------------------


def test_ai_sdk_source_url_and_source_document() -> None:
    raws = [
        {"type": "start"},
        {"type": "source-url", "sourceId": "s1", "url": "https://a.example/", "title": "A"},
        {"type": "source-url", "sourceId": "s2", "url": "https://b.example/"},
        {"type": "source-document", "sourceId": "d1", "mediaType": "application/pdf", "title": "Q3 report"},
        {"type": "source-document", "sourceId": "d2", "mediaType": "text/plain", "title": "", "filename": "notes.txt"},
        {"type": "finish"},
    ]
    assert citations(ProviderFormat.AI_SDK_UI, raws) == [
        ("https://a.example/", "A"),
        ("https://b.example/", None),
        (None, "Q3 report"),
        (None, "notes.txt"),
    ]


def _anthropic(*citations_: dict[str, Any]) -> list[dict[str, Any]]:
    deltas = [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": c}}
        for c in citations_
    ]
    return [
        {"type": "message_start", "message": {}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *deltas,
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Yes."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
    ]


def test_anthropic_citations_web_search_search_result_and_documents() -> None:
    raws = _anthropic(
        {"type": "web_search_result_location", "url": "https://a.example/", "title": "A", "cited_text": "quoted"},
        {"type": "search_result_location", "source": "https://kb.example/7", "title": "KB 7", "cited_text": "q"},
        {"type": "char_location", "document_index": 0, "document_title": "Contract.pdf", "cited_text": "q"},
        {"type": "page_location", "document_index": 2, "document_title": None, "cited_text": "q"},
    )
    assert citations(ProviderFormat.ANTHROPIC, raws) == [
        ("https://a.example/", "A"),
        ("https://kb.example/7", "KB 7"),
        (None, "Contract.pdf"),
        (None, "cited document 3"),
    ]


def test_anthropic_recording_cites_four_pages() -> None:
    cited = citations(ProviderFormat.ANTHROPIC, recording_lines(STREAMS / "anthropic/server-tool-citations.jsonl"))
    assert len(cited) == 14 and len({url for url, _ in cited}) == 4


def test_responses_url_and_file_citations_from_the_event_and_the_finished_item() -> None:
    annotation = {"type": "url_citation", "url": "https://a.example/", "title": "A", "start_index": 0, "end_index": 3}
    raws = [
        {"type": "response.created", "response": {}},
        {"type": "response.output_text.delta", "item_id": "m", "delta": "Yes."},
        {"type": "response.output_text.annotation.added", "item_id": "m", "annotation": annotation},
        {
            "type": "response.output_item.done",
            "item": {
                "type": "message",
                "id": "m",
                "content": [
                    {
                        "type": "output_text",
                        "text": "Yes.",
                        "annotations": [
                            annotation,
                            {"type": "file_citation", "file_id": "f1", "filename": "notes.md", "index": 2},
                            {"type": "file_path", "file_id": "f2", "index": 3},
                        ],
                    }
                ],
            },
        },
        {"type": "response.completed", "response": {}},
    ]
    assert citations(ProviderFormat.OPENAI_RESPONSES, raws) == [
        ("https://a.example/", "A"),
        ("https://a.example/", "A"),  # repeated by the finished item: deduplicated where shown
        (None, "notes.md"),
    ]


def test_responses_recording_cites_seven_pages() -> None:
    path = STREAMS / "openai-responses/web-search-annotations.jsonl"
    assert len({url for url, _ in citations(ProviderFormat.OPENAI_RESPONSES, recording_lines(path))}) == 7


def test_gemini_grounding_chunks_in_the_order_the_supports_cite_them() -> None:
    cited = citations(ProviderFormat.GEMINI, recording_lines(STREAMS / "gemini/upstream/grounding-google-search.jsonl"))
    assert [title for _, title in cited] == ["uefa.com", "aljazeera.com"]  # the unused chunk is not a source


def test_gemini_without_supports_every_chunk_and_the_citation_sources() -> None:
    chunk = {
        "candidates": [
            {
                "content": {"parts": [{"text": "Hi."}]},
                "groundingMetadata": {
                    "groundingChunks": [
                        {"web": {"uri": "https://a.example/", "title": "a.example"}},
                        {"retrievedContext": {"uri": "gs://kb/doc.pdf", "title": "doc.pdf"}},
                    ]
                },
                "citationMetadata": {"citationSources": [{"uri": "https://c.example/", "startIndex": 0}]},
            }
        ]
    }
    assert citations(ProviderFormat.GEMINI, [chunk]) == [
        ("https://a.example/", "a.example"),
        ("gs://kb/doc.pdf", "doc.pdf"),
        ("https://c.example/", None),
    ]


def test_the_tables_say_these_types_are_sources_not_ignored() -> None:
    rows = [
        (ai_sdk_ui, "source-url"),
        (ai_sdk_ui, "source-document"),
        (anthropic, "delta/citations_delta"),
        (openai_responses, "response.output_text.annotation.added"),
        (gemini, "candidate/groundingMetadata"),
        (gemini, "candidate/citationMetadata"),
    ]
    for module, key in rows:
        assert Meaning.SOURCE in module.EVENT_TYPES[key] and Meaning.IGNORED not in module.EVENT_TYPES[key], key


# --- the run ------------------------------------------------------------------------------------------------------


class FakeRun:
    """A run stage alone (no adapter, ledger or loop) on a Markdown channel: events in, the answer parts out."""

    def __init__(self, delivery: DeliveryMode) -> None:
        pol = ChannelPolicy(
            name="fake",
            delivery=delivery,
            max_units=4000,
            unit=LengthUnit.UTF16,
            fmt=MD,
            throttle_s=1.0,
            block_chunk=ChunkParams(min_chars=200, max_chars=4000, break_preference=BreakKind.PARAGRAPH),
            coalesce=CoalesceParams(min_chars=200, max_chars=4000, idle_ms=1000, joiner="\n\n"),
        )
        self.book = SlotBook("r", pol.throttle_s, native=False)
        mode = make_mode(pol, self.book, Splitter(pol, lambda text, _fmt: len(text)), FakeClock())
        self.stage = RunStage(
            start=RunStart(run="r", channel="fake", target=Target(chat_id=1)),
            policy=pol,
            book=self.book,
            mode=mode,
            measure=len,
            tools=ToolCallCollector(None),
            lane=PipelineLane("r"),
            monitor=RunMonitor("r"),
            threads=None,
        )

    def feed(self, event: dict[str, Any]) -> None:
        self.stage.handle(parse_event({"run": "r", **event}))

    def end(self, status: str = "ok") -> None:
        self.stage.end(End(run="r", status=EndStatus(status)))

    def shown(self) -> list[str]:
        """The answer parts' desired texts (empty ones left out)."""
        texts = [
            s.live.text(self.book.measure) if s.live is not None else s.desired
            for s in self.book.slots
            if s.role is SlotRole.ANSWER
        ]
        return [t for t in texts if t]

    def units(self) -> list[PipelineUnit]:
        return self.stage.lane.units


def _run(delivery: DeliveryMode = DeliveryMode.PREVIEW) -> FakeRun:
    return FakeRun(delivery)


def test_sources_follow_the_committed_answer_once_even_when_they_come_after_a_commit() -> None:
    run = _run()
    run.feed({"kind": "text", "text": "The answer."})
    run.feed({"kind": "citation", "url": "https://a.example/", "title": "A"})
    run.feed({"kind": "commit"})
    run.feed({"kind": "citation", "url": "https://a.example/", "title": "A"})
    run.feed({"kind": "citation", "url": "https://b.example/", "title": "B"})
    run.end()
    assert run.shown() == [f"The answer.\n\n{HEADING_MARKDOWN}\n1. [A](https://a.example/)\n2. [B](https://b.example/)"]


def test_a_run_that_does_not_commit_shows_no_sources() -> None:
    run = _run()
    run.feed({"kind": "text", "text": "Half an"})
    run.feed({"kind": "citation", "url": "https://a.example/", "title": "A"})
    run.end(status="error")
    assert not any(HEADING_MARKDOWN in text for text in run.shown())


def test_a_sub_agents_sources_are_its_own() -> None:
    child = {"agent_id": "researcher", "session_id": "s1", "depth": 1}
    run = _run()
    run.feed({"kind": "text", "text": "Found it.", "source": child})
    run.feed({"kind": "citation", "url": "https://a.example/", "title": "A", "source": child})
    run.feed({"kind": "end", "status": "ok", "source": child})
    run.feed({"kind": "text", "text": "The answer."})
    run.end()
    assert run.shown() == ["The answer."]  # never in the root's answer
    message = next(u for u in run.units() if isinstance(u, MessageUnit))
    assert [(s.url, s.title) for s in message.sources] == [("https://a.example/", "A")]
    assert json.loads(message.model_dump_json())["sources"] == [{"url": "https://a.example/", "title": "A"}]
