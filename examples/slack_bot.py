"""A Slack bot (Bolt for Python, HTTP mode) that answers with Claude: the model's raw stream goes to the streamrelay
sidecar, which shows it in the channel as it grows. Run it beside the sidecar:
``streamrelay run -- python examples/slack_bot.py``, with the app's Request URL at ``http://<host>:3000/slack/events``
(docs/getting-started.md: against the mocks and a fake model, or against Slack with real tokens)."""

import os

from anthropic import AsyncAnthropic
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from streamrelay import RelayClient

model = AsyncAnthropic()  # ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a fake model)
relay = RelayClient(os.environ["STREAMRELAY_URL"], os.environ["STREAMRELAY_TOKEN"])  # set by `streamrelay run`
api = os.environ.get("STREAMRELAY_CHANNELS__SLACK__API_BASE")  # the sidecar's own: a mock Web API in a dry run
token = os.environ["SLACK_BOT_TOKEN"]
app = AsyncApp(
    signing_secret=os.environ["SLACK_SIGNING_SECRET"],
    client=AsyncWebClient(token, base_url=api or "https://slack.com/api/"),
)


@app.event("message")
async def answer(event: dict[str, str]) -> None:
    run = f"slack-{event['channel']}-{event['ts']}"
    await relay.start(run, channel="slack", chat_id=event["channel"], format="anthropic")
    stream = await model.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=4096,
        messages=[{"role": "user", "content": event.get("text", "")}],
        stream=True,
    )
    async for item in stream:  # forwarded raw: the sidecar cuts, paces and edits
        await relay.send(run, [item.to_dict()])
    await relay.send(run, [{"kind": "end"}])


if __name__ == "__main__":
    app.start(port=int(os.environ.get("PORT", "3000")))
