"""The run's message limit (``ChannelPolicy.max_messages``): how many chat messages one conversation may become.

One accepted 1 MB text line once became 245 chat messages. The limit is enforced in the pure half of delivery,
where the desired state is decided, so the planner and the reconciler never see a part past it:

- The :class:`~core.delivery.slotbook.SlotBook` counts every slot the run's stages claim (answer parts, the status
  message, shown reasoning, a notice, a child's status line) and refuses a claim past the limit: the slot it hands
  back then is :attr:`~core.delivery.slots.Slot.over_limit`, in no book, never shown. Side messages (status,
  reasoning, a child's status line) leave one message free for the answer until the answer has one; a media item
  always leaves one free (the text after it, or the cut notice), and when one finds no room the last media item
  shown is marked cut (the report says ``partial``).
- The delivery modes ask how many answer parts they may still have (:meth:`SlotBook.room`) and lay the answer out
  within it (:func:`within`): when it needs more, the last allowed part ends with :attr:`MessageLimit.notice`,
  that part cut at its best break so the notice fits the platform's limit with it, and the rest is not sent.
  Preview cuts as it rolls over, block replies as blocks come, every mode again at the final (which may fit after
  all: the notice then goes).
- The cut part is marked (:attr:`~core.delivery.slots.Slot.cut`): its ledger record's error begins with
  :data:`core.records.report.CUT_ERROR` and names the limit and its setting, so the report says ``partial``, live and
  when
  rebuilt from the ledger.

Everything is counted in the order the stage claims slots, a function of the run's events: a journal replay
reaches the same cut. Not counted: a continuation the reconciler makes when the platform refuses further edits of
a message (it keeps what it shows; the rest of that part goes on in a new message), and a create that could not be
settled (reported uncertain, a possible duplicate). A sub-agent's thread (``subagents = "thread"``) is a
conversation of its own with its own limit: its book is built only once the thread opens, after its status message
is acknowledged, so sharing one count with the root would make where the root's answer is cut depend on platform
timing, and a replay could cut elsewhere. Its status line counts in the root; its cut is on the report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.report import CUT_ERROR


@dataclass(frozen=True, slots=True)
class MessageLimit:
    """The most messages a conversation may become.

    Attributes:
        max_messages: the limit (1 or more).
        setting: the setting it comes from, named in the report (``clients.NAME.max_messages_per_run``).
    """

    max_messages: int
    setting: str

    @classmethod
    def of(cls, policy: ChannelPolicy) -> MessageLimit | None:
        """The limit of ``policy`` (None: no limit); a limit under 1 is taken as 1 (the answer needs a message)."""
        if policy.max_messages is None:
            return None
        return cls(max(1, policy.max_messages), policy.max_messages_setting)

    @property
    def notice(self) -> str:
        """What ends the last allowed message of a cut answer."""
        return f"… [cut: this answer is longer than {self._messages}]"

    def error(self, what: str = "the answer") -> str:
        """The report's error for a cut of ``what``: begins with :data:`core.records.report.CUT_ERROR`."""
        n = self.max_messages
        return f"{CUT_ERROR}: {what} needs more than {self._messages}; the rest was not sent ({self.setting} = {n})"

    @property
    def _messages(self) -> str:
        return f"{self.max_messages} message{'s' if self.max_messages != 1 else ''}"

    def strip(self, text: str) -> str:
        """``text`` without the notice it may end with (a part cut in an earlier life, restored from the ledger)."""
        if text.endswith(self.notice):
            return text[: -len(self.notice)].rstrip()
        return text


def within(
    parts: list[str], allowed: int | None, limit: MessageLimit | None, ending: Callable[[str, str], str]
) -> tuple[list[str], bool]:
    """``parts`` as at most ``allowed`` parts: ``(parts, cut)``.

    Args:
        parts: the answer's parts, in order, each within the platform's limit.
        allowed: how many parts the answer may have (None: any number).
        limit: the message limit (its notice ends the last allowed part).
        ending: a part cut so the notice fits after it (:meth:`core.policy.Splitter.ending`).

    Returns:
        The parts unchanged and False when they fit; else the first ``allowed`` ones, the last of them ended by the
        notice, and True.
    """
    if allowed is None or limit is None or len(parts) <= allowed:
        return parts, False
    if allowed < 1:
        return [], True
    return [*parts[: allowed - 1], ending(parts[allowed - 1], limit.notice)], True
