"""The Stop control on Discord (:class:`core.ports.StopControls`): a button component in an action row.

REST rules (https://discord.com/developers/docs/components/reference#button,
https://discord.com/developers/docs/resources/message#edit-message):

- A message's ``components`` are action rows (type 1) of buttons (type 2); a button that is not a link has a
  ``custom_id`` of 1-100 characters (the control id, ``stop:<16 hex>``) and a ``label`` of at most 80 characters.
- ``PATCH /channels/{id}/messages/{mid}`` with ``components`` replaces them (``[]`` removes them); an edit without
  ``components`` keeps them, so the adapter's text edits keep the control with nothing more to send.
- A click reaches the app as an interaction (``INTERACTION_CREATE``, type 3 with ``data.custom_id``); the app
  answers it (e.g. a deferred update) and forwards the stop (README: discord.py snippet).

discord.py builds the components from a :class:`discord.ui.View`; the view is stopped before the edit so the
client does not keep it for dispatch (this process never receives interactions: the app's bot does).
:func:`set_stop` makes the edit on the adapter's connection.
"""

from __future__ import annotations

from streamrelay.adapters.discord._sdk import discord
from streamrelay.adapters.discord.connection import DiscordConnection
from streamrelay.core.events import Target
from streamrelay.core.ports import StopControl

MAX_CUSTOM_ID = 100
MAX_LABEL = 80


def stop_view(control: StopControl) -> discord.ui.View:
    """A stopped view holding ``control``'s buttons, a Stop's one or an approval's Approve and Deny (its components
    are what the edit sends).

    Raises:
        ValueError: the control id or label is over Discord's limit.
    """
    view = discord.ui.View(timeout=None)
    for i, (control_id, label) in enumerate(control.buttons()):
        if not 1 <= len(control_id) <= MAX_CUSTOM_ID or len(label) > MAX_LABEL:
            raise ValueError(f"a Discord button's custom_id is 1-{MAX_CUSTOM_ID} characters, its label <= {MAX_LABEL}")
        style = discord.ButtonStyle.success if control.more and not i else discord.ButtonStyle.danger
        button: discord.ui.Button[discord.ui.View] = discord.ui.Button(label=label, style=style, custom_id=control_id)
        view.add_item(button)
    view.stop()  # never dispatched here: not kept by the client
    return view


async def set_stop(connection: DiscordConnection, target: Target, message_id: str, control: StopControl | None) -> None:
    """Put ``control``'s button on message ``message_id`` or take every component off (``components: []``)
    (``PATCH /channels/{id}/messages/{mid}``); the content is not sent (it stays as it is).

    Raises:
        core.errors.TargetNotFoundError: the message (or channel) does not exist any more.
        core.errors.DeliveryError: another subclass, per :mod:`adapters.discord.errors`.
    """
    channel_id, mid = connection.channel_id(target), connection.snowflake_id(message_id, target)
    view = stop_view(control) if control is not None else None

    async def edit(client: discord.Client) -> discord.Message:
        message = client.get_partial_messageable(channel_id).get_partial_message(mid)
        return await message.edit(view=view)

    await connection.call("editMessage", target, channel_id, edit)
