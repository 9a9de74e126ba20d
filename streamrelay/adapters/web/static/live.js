// The live run page: follows one run's monitor events (streamrelay/core/monitor.py) over SSE and shows them.
//
// Served as GET /runs/{run}?token=T; the stream is /v1/runs/{run}/live?token=T. Each SSE message is one
// JSON event with an `id`; an event whose id is not above the last applied one is ignored (replays after a
// reconnect), except `reset`, which rebuilds the whole view from its `state`.
//
// Model text reaches the DOM through text nodes / textContent (never innerHTML), except the answer and the
// sub-agents' text, which live-markdown.js renders as Markdown (markdown-it with raw HTML off, links only http(s)
// and mailto: every text it writes is escaped); the answer's exact text is in #answer-source (the "Markdown
// source" view), an agent's in its .agent-source. The answer box scrolls and follows the growing answer while the
// reader is at its bottom. Panels with nothing in them are hidden; on the web channel the answer part's text is
// not shown twice (it is the Answer panel).
//
// Stop: a link whose query carries the run's stop token (`&stop=S`, from GET /v1/runs/{run}/watch?stop=1) shows a
// Stop button until the run ends; a click posts /v1/runs/{run}/live/stop with `Authorization: Bearer S` (never in
// a URL it requests) and the run then ends `cancelled` (its end event hides the button).
//
// Approvals: an `approval` event (or a reset's `approvals`) shows a card saying what is asked, what will be done,
// who may decide and until when. A link made for a person (`&viewer=V&decide=D`, from GET
// /v1/runs/{run}/watch?as=V) shows Approve and Deny on a pending card; a press posts
// /v1/runs/{run}/live/approvals/{id} with `Authorization: Bearer D` and {"decision", "viewer": V}. The sidecar decides
// whether V may decide: a refusal changes nothing and its `tell` is shown on the card. A link without a viewer only
// watches (no buttons). The card shows the decision and who made it when the `approval` event says so, wherever it
// was made (a bot's press on Telegram, the expiry, another page).
//
// Corrections: the stream is asked with &corrections=1, so after the run's end it stays open a while and a
// correction of the answer (docs/corrections.md) arrives as an `answer` event with `reset` and `final`: the answer
// shown is replaced. A page loaded after a correction gets the corrected answer in its `reset`.
//
// For tests: window.streamrelayView = {lastId, eventsApplied, resets, ignored, answerRenders} (plain numbers,
// updated in place) and document.body.dataset.state = "live" | "waiting" | "reconnecting" | "ended" | "denied".
"use strict";

(() => {
  const TIMELINE_MAX = 500;
  const TIMELINE_TYPES = new Set(["phase", "status", "tool_call", "tool_result", "decision", "error", "media"]);
  const DENIED_TEXT = "access denied or run unknown";

  /** What tests read; the object is kept and its numbers updated in place. */
  const view = { lastId: 0, eventsApplied: 0, resets: 0, ignored: 0, answerRenders: 0 };
  window.streamrelayView = view;

  const byId = (id) => document.getElementById(id);
  let els = null;
  let answerNode = null;
  /** The rendered answer (live-markdown.js); null if it did not load: the source is shown instead. */
  let answerView = null;
  /** The run's channel and platform (the `run` event, or a reset's state). */
  const meta = { channel: null, platform: null };
  /** key -> {key, source, depth, el, stateEl, textEl, textNode, mdView, childrenEl, exact} in first-seen order. */
  const agents = new Map();
  /** "<channel>/<part>" -> {key, channel, part, data, el, …}. */
  const parts = new Map();
  /** approval id -> {el, fields, ...} in first-seen order. */
  const approvals = new Map();
  /** Who this page decides as, and its decide token (from the link; empty: it only watches). */
  const viewer = { id: "", token: "", run: "" };
  let timelineCount = 0;
  let ended = null;
  let source = null;

  const timeFormat = new Intl.DateTimeFormat(undefined, {
    hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false,
  });

  // ---------------------------------------------------------------------------------------------- helpers

  const stripRule = window.streamrelayMarkdown.stripRule;

  function make(tag, className, text) {
    const el = document.createElement(tag);
    if (className) el.className = className;
    if (text !== undefined && text !== null && text !== "") el.textContent = String(text);
    return el;
  }

  function str(value) {
    if (value === undefined || value === null) return "";
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  function stateClass(state) {
    const s = String(state || "").toLowerCase();
    if (/^(done|ok|sent|edited|finished|complete)/.test(s)) return "state-ok";
    if (/fail|error|denied|rejected/.test(s)) return "state-fail";
    if (/stop|cancel|deleted/.test(s)) return "state-stopped";
    if (/retry|uncertain/.test(s)) return "state-warn";
    return "state-running";
  }

  function setStateBadge(el, state, label) {
    el.textContent = label !== undefined ? label : String(state || "");
    el.className = el.className.replace(/\bstate-\S+/g, "").trim() + " " + stateClass(state);
  }

  // Keep a scroll box pinned to its bottom while the reader has not scrolled up; scrolls once per frame. The
  // scroll event of our own scroll comes a frame later, when the text may have grown again: it is recognised by
  // the position we scrolled to, so only the reader's scrolling unpins a box (and scrolling back down pins it).
  const toScroll = new Set();
  const scrolledTo = new WeakMap();
  let scrollFrame = 0;

  function followScroll(el) {
    el.dataset.stick = "1";
    el.addEventListener("scroll", () => {
      if (Math.abs(el.scrollTop - (scrolledTo.get(el) ?? -1e9)) < 2) return;  // our own scroll
      scrolledTo.delete(el);
      el.dataset.stick = el.scrollHeight - el.scrollTop - el.clientHeight < 24 ? "1" : "0";
    }, { passive: true });
  }

  function scheduleScroll(el) {
    toScroll.add(el);
    if (scrollFrame) return;
    scrollFrame = requestAnimationFrame(() => {
      scrollFrame = 0;
      for (const box of toScroll) {
        if (box.dataset.stick === "0") continue;
        box.scrollTop = box.scrollHeight;
        scrolledTo.set(box, box.scrollTop);
      }
      toScroll.clear();
    });
  }

  // ------------------------------------------------------------------------------------ header, connection

  function setConnection(state, text) {
    document.body.dataset.state = state;
    els.status.textContent = text;
  }

  function setMeta(fields) {
    for (const name of ["channel", "platform", "mode"]) {
      if (fields[name] !== undefined && fields[name] !== null) els[name].textContent = String(fields[name]);
    }
    if (fields.channel !== undefined && fields.channel !== null) meta.channel = String(fields.channel);
    if (fields.platform !== undefined && fields.platform !== null) meta.platform = String(fields.platform);
  }

  function setEnded(status, delivery) {
    ended = status === undefined || status === null ? "unknown" : String(status);
    els.ended.textContent = ended;
    if (delivery !== undefined && delivery !== null) els.endDelivery.textContent = str(delivery);
    document.body.classList.toggle("has-end-delivery", els.endDelivery.textContent !== "");
    setStateBadge(els.rootState, ended === "ok" ? "done" : ended, ended === "ok" ? "done" : ended);
    setConnection("ended", "ended: " + ended);
    hideStop();
    document.title = "streamrelay · run " + els.runId.textContent + " · " + ended;
  }

  function hideStop() {
    if (els && els.stop) els.stop.hidden = true;
  }

  async function requestStop(run, stopToken) {
    els.stop.disabled = true;
    els.stop.textContent = "Stopping…";
    let answer = null;
    try {
      answer = await fetch("/v1/runs/" + encodeURIComponent(run) + "/live/stop", {
        method: "POST",
        headers: { "Authorization": "Bearer " + stopToken },
      });
    } catch (_) {
      answer = null;
    }
    if (answer !== null && answer.ok) return;  // the run's end event hides the button
    let why = "the sidecar could not be reached";
    if (answer !== null) {
      try {
        why = str((await answer.json()).error) || "HTTP " + answer.status;
      } catch (_) {
        why = "HTTP " + answer.status;
      }
    }
    els.stop.disabled = false;
    els.stop.textContent = "⏹ Stop";
    showNotice("The run could not be stopped: " + why + ".");
  }

  function finish() {
    if (source) source.close();
  }

  function showNotice(text) {
    els.notice.textContent = text;
    els.notice.hidden = false;
  }

  // ------------------------------------------------------------------------------------------------ answer

  function setFinal(final) {
    els.finalBadge.hidden = !final;
    els.answer.classList.toggle("final", final);
  }

  function setAnswer(text, append) {
    if (append) answerNode.appendData(text);
    else answerNode.data = text;
    els.answerBox.classList.toggle("empty", answerNode.length === 0);
    if (answerView) {
      if (append) answerView.append(text);
      else answerView.set(text);
      answerView.schedule(() => {
        view.answerRenders = answerView.renders;
        scheduleScroll(els.answerBox);
      });
    } else {
      scheduleScroll(els.answerBox);
    }
  }

  function showSource(source) {
    els.answerView.setAttribute("aria-pressed", source ? "true" : "false");
    els.answerView.textContent = source ? "Rendered" : "Markdown source";
    els.answerSource.hidden = !source;
    els.answer.hidden = source;
    scheduleScroll(els.answerBox);
  }

  // ------------------------------------------------------------------------------------------------ agents

  function makeAgent(key, src) {
    const s = src && typeof src === "object" ? src : null;
    const el = make("section", "agent");
    el.dataset.key = key;
    const head = make("header", "agent-head");
    const idEl = make("span", "agent-id", (s && s.agent_id) || key);
    const stateEl = make("span", "agent-state state-running");
    head.append(idEl, stateEl);
    const where = s && (s.path || s.session_id);
    if (where) {
      head.append(make("span", "agent-path mono", where));
      el.title = [s.path && "path " + s.path, s.session_id && "session " + s.session_id].filter(Boolean).join(" · ");
    }
    // Its text rendered as Markdown like the answer (.agent-md), the text as written kept in .agent-source.
    const textEl = make("div", "agent-text");
    const mdEl = make("div", "md agent-md");
    const sourceEl = make("pre", "text agent-source");
    const textNode = document.createTextNode("");
    sourceEl.append(textNode);
    textEl.append(mdEl, sourceEl);
    const markdown = window.streamrelayMarkdown;
    const mdView = markdown && typeof window.markdownit === "function" ? new markdown.AnswerView(mdEl) : null;
    mdEl.hidden = mdView === null;
    sourceEl.hidden = mdView !== null;
    followScroll(textEl);
    const childrenEl = make("div", "agent-children");
    el.append(head, textEl, childrenEl);
    const depth = s && Number.isFinite(Number(s.depth)) ? Number(s.depth) : 1;
    el.dataset.depth = String(depth);
    const rec = { key, source: s, depth, el, stateEl, textEl, textNode, mdView, childrenEl, exact: false };
    agents.set(key, rec);
    els.agentsPanel.hidden = false;
    return rec;
  }

  function canParent(other, rec) {
    return other !== rec && !rec.el.contains(other.el);
  }

  /** The panel `rec` nests under (null: the top) and whether that is sure (by path or session); a child whose
   *  parent has not shown up yet waits at the top until that panel adopts it. */
  function findParent(rec) {
    const s = rec.source;
    if (!s) return { parent: null, exact: true };
    const path = typeof s.path === "string" ? s.path : "";
    const cut = path.lastIndexOf("/");
    const parentSession = s.parent_session_id === undefined ? null : s.parent_session_id;
    if (cut > 0) {
      const parentPath = path.slice(0, cut);
      let found = null;
      for (const other of agents.values()) {
        if (!other.source || other.source.path !== parentPath || !canParent(other, rec)) continue;
        if (parentSession !== null && other.source.session_id === parentSession) return { parent: other, exact: true };
        found = other;
      }
      if (found) return { parent: found, exact: true };
    }
    if (parentSession !== null) {
      for (const other of agents.values()) {
        if (other.source && other.source.session_id === parentSession && canParent(other, rec)) {
          return { parent: other, exact: true };
        }
      }
    }
    // Its parent has not shown up yet (or it is a direct child): at the top until a panel adopts it. Depth
    // alone never picks a parent: any agent one level up could be the wrong one.
    return { parent: null, exact: rec.depth <= 1 };
  }

  function place(rec) {
    const { parent, exact } = findParent(rec);
    rec.exact = exact;
    (parent ? parent.childrenEl : els.agentTree).append(rec.el);
  }

  /** A new panel may be the parent of panels placed before it by depth alone (or left at the root). */
  function adoptOrphans(newRec) {
    for (const rec of agents.values()) {
      if (rec === newRec || rec.exact) continue;
      const { parent, exact } = findParent(rec);
      if (parent === newRec && exact) {
        rec.exact = true;
        newRec.childrenEl.append(rec.el);
      }
    }
  }

  function setAgentState(rec, state) {
    setStateBadge(rec.stateEl, state);
    rec.el.dataset.state = String(state);
    rec.el.dataset.tone = stateClass(state).slice("state-".length);
  }

  function setAgentText(rec, text, append) {
    if (append) rec.textNode.appendData(text);
    else rec.textNode.data = text;
    rec.textEl.classList.toggle("has-text", rec.textNode.length > 0);
    if (rec.mdView) {
      if (append) rec.mdView.append(text);
      else rec.mdView.set(text);
      rec.mdView.schedule(() => scheduleScroll(rec.textEl));
    } else if (append) {
      scheduleScroll(rec.textEl);
    }
  }

  function applyAgent(ev) {
    const key = str(ev.key);
    let rec = agents.get(key);
    if (!rec) {
      rec = makeAgent(key, ev.source);
      place(rec);
      adoptOrphans(rec);
    }
    if (ev.state !== undefined && ev.state !== null) setAgentState(rec, ev.state);
    if (ev.reset) setAgentText(rec, str(ev.text), false);
    else if (ev.delta) setAgentText(rec, str(ev.delta), true);
  }

  // ---------------------------------------------------------------------------------------------- timeline

  function sourceLabel(src) {
    return src && typeof src === "object" ? str(src.agent_id || src.path || src.session_id) : "";
  }

  // A media item of the answer is a link with its caption: the page's CSP (img-src 'self' data:) shows no outside
  // image, and only an http(s) URL becomes a link (the sidecar takes no other; checked again here).
  function mediaLink(ev) {
    const url = str(ev.url);
    const label = str(ev.caption) || url;
    if (!/^https?:\/\//i.test(url)) return make("span", "summary", label);
    const a = make("a", "media-link", label);
    a.href = url;
    a.rel = "noopener noreferrer nofollow";
    a.target = "_blank";
    return a;
  }

  function addTimeline(ev) {
    const type = String(ev.type);
    const li = make("li", "entry t-" + type);
    li.dataset.id = String(ev.id);
    li.dataset.type = type;
    const time = make("time", "when");
    const ts = Number(ev.ts);
    if (Number.isFinite(ts)) {
      const date = new Date(ts * 1000);
      time.dateTime = date.toISOString();
      time.textContent = timeFormat.format(date);
    }
    const body = make("span", "what");
    const kind = make("span", "kind", type.replace("_", " "));
    switch (type) {
      case "phase":
        body.append(make("span", "name", ev.name));
        break;
      case "status":
        body.append(document.createTextNode(str(ev.text)));
        break;
      case "tool_call":
        body.append(make("span", "tool-name mono", ev.name));
        if (ev.args !== undefined && ev.args !== null && ev.args !== "") body.append(make("code", "args", str(ev.args)));
        if (ev.malformed) {
          li.classList.add("malformed");
          body.append(make("span", "badge badge-fail", "malformed"));
        }
        break;
      case "tool_result":
        body.append(make("span", "tool-name mono", ev.name), make("span", "summary", str(ev.summary)));
        break;
      case "decision":
        if (ev.what === "gate") {
          const verdict = str(ev.verdict);
          li.dataset.verdict = verdict;
          if (/deny|denied|block|reject|refuse/i.test(verdict)) li.classList.add("failure");
          body.append(document.createTextNode("gate "), make("span", "tool-name mono", ev.name),
            make("span", "badge verdict", verdict));
          if (ev.reason) body.append(make("span", "summary", str(ev.reason)));
        } else if (ev.what === "commit") {
          body.append(document.createTextNode("answer committed"));
        } else if (ev.what === "approval") {
          body.append(document.createTextNode("approval "), make("span", "tool-name mono", ev.call_id),
            make("span", "badge verdict", str(ev.verdict)));
          if (ev.verdict !== "pending" && ev.reason) body.append(make("span", "summary", "by " + str(ev.reason)));
        } else {
          body.append(document.createTextNode(str(ev.what)));
        }
        break;
      case "error":
        li.classList.add("failure");
        body.append(document.createTextNode(str(ev.message)));
        break;
      case "media":
        body.append(make("span", "badge", str(ev.media_kind)), mediaLink(ev));
        break;
      default:
        break;
    }
    const who = sourceLabel(ev.source);
    li.append(time, kind, body);
    if (who) li.append(make("span", "src", who));
    els.timeline.append(li);
    timelineCount += 1;
    els.timelinePanel.hidden = false;
    while (timelineCount > TIMELINE_MAX && els.timeline.firstElementChild) {
      els.timeline.firstElementChild.remove();
      timelineCount -= 1;
    }
    if (type === "phase" && !ev.source && ended === null) setStateBadge(els.rootState, "running", str(ev.name));
    scheduleScroll(els.timelineBox);
  }

  // -------------------------------------------------------------------------------------------- deliveries

  function partOrder(a, b) {
    if (a.channel !== b.channel) return a.channel < b.channel ? -1 : 1;
    const pa = Number(a.part), pb = Number(b.part);
    if (Number.isFinite(pa) && Number.isFinite(pb) && pa !== pb) return pa - pb;
    return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
  }

  function makePart(key, fields) {
    const rec = { key, channel: str(fields.channel), part: fields.part, data: {} };
    rec.el = make("div", "part");
    rec.el.dataset.key = key;
    const head = make("div", "part-head");
    rec.keyEl = make("span", "part-key mono", key);
    rec.roleEl = make("span", "role");
    rec.stateEl = make("span", "badge delivery-state");
    rec.idEl = make("span", "message-id mono");
    rec.noteEl = make("span", "part-note", "shown as the Answer");
    rec.noteEl.hidden = true;
    head.append(rec.keyEl, rec.roleEl, rec.stateEl, rec.noteEl, rec.idEl);
    rec.reasonEl = make("div", "part-reason");
    rec.textEl = make("div", "text part-text");
    rec.el.append(head, rec.reasonEl, rec.textEl);
    let before = null;
    for (const other of parts.values()) {
      if (partOrder(rec, other) < 0 && (!before || partOrder(other, before) < 0)) before = other;
    }
    els.deliveries.insertBefore(rec.el, before ? before.el : null);
    parts.set(key, rec);
    els.deliveriesPanel.hidden = false;
    return rec;
  }

  function deliveryLabel(data) {
    const state = str(data.state);
    if (state === "retrying") {
      const after = Number(data.retry_after_s);
      return Number.isFinite(after) ? "retrying after " + (Math.round(after * 10) / 10) + "s" : "retrying";
    }
    return state;
  }

  function applyDelivery(fields, knownKey) {
    const key = knownKey !== undefined ? knownKey : str(fields.channel) + "/" + str(fields.part);
    const rec = parts.get(key) || makePart(key, fields);
    for (const [name, value] of Object.entries(fields)) {
      if (!["id", "run", "seq", "ts", "type", "append", "text"].includes(name)) rec.data[name] = value;
    }
    // The web channel's answer part is the page's Answer: its text is not kept or shown a second time.
    const inAnswer = meta.platform === "web" && rec.data.role === "answer" && rec.channel === meta.channel;
    if (inAnswer) delete rec.data.text;
    else if (typeof fields.text === "string") rec.data.text = fields.text;
    else if (typeof fields.append === "string") rec.data.text = str(rec.data.text) + fields.append;
    rec.noteEl.hidden = !inAnswer;
    const data = rec.data;
    rec.roleEl.textContent = str(data.role);
    rec.el.dataset.state = str(data.state);
    setStateBadge(rec.stateEl, data.state, deliveryLabel(data));
    rec.idEl.textContent = data.message_id === undefined || data.message_id === null ? "no message id"
      : "id " + str(data.message_id);
    const reason = data.state === "failed" || data.state === "uncertain" ? str(data.reason || data.error || data.cause) : "";
    rec.reasonEl.textContent = reason;
    rec.reasonEl.hidden = reason === "";
    const hasText = typeof data.text === "string";
    rec.textEl.textContent = hasText ? data.text : "";
    rec.textEl.hidden = !hasText;
  }


  // --------------------------------------------------------------------------------------------- approvals

  function clock(seconds) {
    const t = Number(seconds);
    return Number.isFinite(t) ? timeFormat.format(new Date(t * 1000)) : "";
  }

  function outcomeText(f) {
    if (f.state === "ended") return "Not decided: the run ended.";
    if (f.decision === "expired") return "⌛ Expired at " + clock(f.at) + ": " + (f.approved ? "approved" : "denied") + ".";
    const mark = f.approved ? "✅ Approved" : "❌ Denied";
    return mark + " by " + str(f.by) + " at " + clock(f.at) + ".";
  }

  function makeApproval(id) {
    const rec = { id, fields: {} };
    rec.el = make("article", "approval");
    rec.el.dataset.approval = id;
    rec.questionEl = make("p", "approval-question");
    rec.actionEl = make("p", "approval-action");
    rec.whoEl = make("p", "approval-who");
    rec.expiryEl = make("p", "approval-expiry");
    rec.buttonsEl = make("div", "approval-buttons");
    rec.approveEl = make("button", "approve", "✅ Approve");
    rec.denyEl = make("button", "deny", "❌ Deny");
    rec.approveEl.type = rec.denyEl.type = "button";
    rec.approveEl.addEventListener("click", () => pressApproval(rec, "approve"));
    rec.denyEl.addEventListener("click", () => pressApproval(rec, "deny"));
    rec.buttonsEl.append(rec.approveEl, rec.denyEl);
    rec.outcomeEl = make("p", "approval-outcome");
    rec.noteEl = make("p", "approval-note");
    rec.noteEl.setAttribute("role", "status");
    rec.el.append(rec.questionEl, rec.actionEl, rec.whoEl, rec.expiryEl, rec.buttonsEl, rec.outcomeEl, rec.noteEl);
    els.approvals.append(rec.el);
    approvals.set(id, rec);
    els.approvalsPanel.hidden = false;
    return rec;
  }

  function applyApproval(fields, knownId) {
    const id = knownId !== undefined ? knownId : str(fields.approval);
    if (!id) return;
    const rec = approvals.get(id) || makeApproval(id);
    const f = Object.assign(rec.fields, fields);
    const question = str(f.question);
    rec.el.dataset.state = str(f.state);
    rec.el.dataset.approved = f.approved === true ? "true" : f.approved === false ? "false" : "";
    rec.questionEl.textContent = "🔐 " + question;
    rec.actionEl.replaceChildren();
    if (f.action) rec.actionEl.append(document.createTextNode("If approved: "), make("code", "", str(f.action)));
    rec.actionEl.hidden = !f.action;
    const who = f.anyone ? "anyone in the chat" : (Array.isArray(f.approvers) ? f.approvers.map(str).join(", ") : "");
    rec.whoEl.textContent = "Who may decide: " + who;
    rec.expiryEl.textContent = "Expires " + clock(f.expires_at) + " (then " + str(f.on_expiry) + ").";
    const pending = f.state === "pending" && ended === null;
    rec.whoEl.hidden = rec.expiryEl.hidden = !pending;
    rec.buttonsEl.hidden = !(pending && viewer.id);
    rec.approveEl.setAttribute("aria-label", "Approve: " + question);
    rec.denyEl.setAttribute("aria-label", "Deny: " + question);
    rec.approveEl.title = rec.denyEl.title = question;
    rec.outcomeEl.textContent = f.state === "pending" ? "" : outcomeText(f);
    rec.outcomeEl.hidden = f.state === "pending";
    if (f.state !== "pending") {
      rec.noteEl.hidden = rec.noteEl.textContent === "";
    } else if (!viewer.id) {
      setApprovalNote(rec, "You are watching: to decide, open a link made for you (watch?as=…).", true);
    }
  }

  function setApprovalNote(rec, text, info) {
    rec.noteEl.textContent = text;
    rec.noteEl.classList.toggle("info", Boolean(info));
    rec.noteEl.hidden = text === "";
  }

  /** A card whose run ended: no press can decide it any more. */
  function closeApprovals() {
    for (const rec of approvals.values()) applyApproval({}, rec.id);
  }

  async function pressApproval(rec, decision) {
    rec.approveEl.disabled = rec.denyEl.disabled = true;
    setApprovalNote(rec, decision === "approve" ? "Approving…" : "Denying…", true);
    let answer = null;
    let body = null;
    try {
      answer = await fetch("/v1/runs/" + encodeURIComponent(viewer.run) + "/live/approvals/" + encodeURIComponent(rec.id), {
        method: "POST",
        headers: { "Authorization": "Bearer " + viewer.token, "Content-Type": "application/json" },
        body: JSON.stringify({ decision, viewer: viewer.id }),
      });
      body = await answer.json();
    } catch (_) {
      body = null;
    }
    rec.approveEl.disabled = rec.denyEl.disabled = false;
    if (answer === null) {
      setApprovalNote(rec, "The sidecar could not be reached: press again.");
    } else if (answer.ok && body) {
      setApprovalNote(rec, "", true);
      applyApproval({ state: "decided", decision: body.decision, approved: body.approved, by: body.by, at: body.at }, rec.id);
    } else if (body && body.tell) {  // 403: this viewer may not decide; 409: decided already (the first decision)
      setApprovalNote(rec, str(body.tell));
      const first = body.approval;
      if (first && first.state === "decided") {
        applyApproval({ state: "decided", decision: first.decision, approved: first.approved, by: first.by, at: first.at }, rec.id);
      }
    } else {
      setApprovalNote(rec, "Not decided: " + (body && body.error ? str(body.error) : "HTTP " + answer.status) + ".");
    }
  }

  // ---------------------------------------------------------------------------------------------- applying

  function apply(ev) {
    switch (ev.type) {
      case "run":
        setMeta(ev);
        break;
      case "answer":
        if (ev.reset) setAnswer(str(ev.text), false);
        else if (ev.delta) setAnswer(str(ev.delta), true);
        setFinal(Boolean(ev.final));
        break;
      case "agent":
        applyAgent(ev);
        break;
      case "delivery":
        applyDelivery(ev);
        break;
      case "approval":
        applyApproval(ev);
        break;
      case "end":
        setEnded(ev.status, ev.delivery);
        closeApprovals();
        break;
      default:
        break;
    }
    if (TIMELINE_TYPES.has(ev.type)) addTimeline(ev);
  }

  function applyReset(state) {
    const st = state && typeof state === "object" ? state : {};
    setMeta(st);
    setAnswer(str(st.answer), false);
    setFinal(Boolean(st.final));

    agents.clear();
    els.agentTree.replaceChildren();
    setStateBadge(els.rootState, "running", "running");
    const agentStates = st.agents && typeof st.agents === "object" ? st.agents : {};
    for (const [key, agent] of Object.entries(agentStates)) {
      const rec = makeAgent(key, agent && agent.source);
      if (agent && agent.state !== undefined && agent.state !== null) setAgentState(rec, agent.state);
      setAgentText(rec, str(agent && agent.text), false);
      scheduleScroll(rec.textEl);
    }
    for (const rec of agents.values()) place(rec);  // all panels known: each finds its parent

    els.agentsPanel.hidden = agents.size === 0;

    els.timeline.replaceChildren();
    timelineCount = 0;
    els.timelinePanel.hidden = true;
    for (const ev of Array.isArray(st.timeline) ? st.timeline : []) if (ev && typeof ev === "object") addTimeline(ev);

    parts.clear();
    els.deliveries.replaceChildren();
    els.deliveriesPanel.hidden = true;
    const partStates = st.parts && typeof st.parts === "object" ? st.parts : {};
    for (const [key, part] of Object.entries(partStates)) applyDelivery(part || {}, key);

    approvals.clear();
    els.approvals.replaceChildren();
    els.approvalsPanel.hidden = true;
    if (st.ended !== undefined && st.ended !== null) setEnded(st.ended, st.delivery);
    const approvalStates = st.approvals && typeof st.approvals === "object" ? st.approvals : {};
    for (const [id, fields] of Object.entries(approvalStates)) applyApproval(fields || {}, id);
  }

  function onMessage(message) {
    let ev;
    try {
      // Every string of the event without invisible characters (live-markdown.js's stripRule: characters only; a
      // delta's character references are judged where the answer is rendered, whole, knowing its code). A delta is
      // cleaned on its own: a joiner at its very end, whose emoji comes in the next delta, goes (the emoji show
      // unjoined); the rendered answer is cleaned again whole.
      ev = JSON.parse(message.data, (key, value) => (typeof value === "string" ? stripRule(value) : value));
    } catch (_) {
      return;  // not an event: nothing to show
    }
    if (!ev || typeof ev !== "object") return;
    if (ev.type === "waiting") {  // the run has not started yet: its events follow when it does
      setConnection("waiting", "waiting for the run to start…");
      return;
    }
    const id = Number(ev.id !== undefined ? ev.id : message.lastEventId);
    if (ev.type === "reset") {
      applyReset(ev.state);
      if (Number.isFinite(id)) view.lastId = id;
      view.resets += 1;
    } else {
      if (!(id > view.lastId)) {
        view.ignored += 1;
        return;
      }
      view.lastId = id;
      apply(ev);
      view.eventsApplied += 1;
    }
    // After the end the stream stays open a while (asked with &corrections=1): a correction of the answer comes as
    // one more `answer` event (reset, final); the sidecar ends the stream, then onerror closes it.
    if (ended === null && document.body.dataset.state !== "live") setConnection("live", "live");
  }

  // ----------------------------------------------------------------------------------------------- start

  function runFromLocation() {
    const prefix = "/runs/";
    let run = "";
    if (location.pathname.startsWith(prefix)) run = location.pathname.slice(prefix.length).replace(/\/+$/, "");
    try {
      run = decodeURIComponent(run);
    } catch (_) {
      // keep it as it came
    }
    const query = new URLSearchParams(location.search);
    return {
      run: run || query.get("run") || "", token: query.get("token") || "", stop: query.get("stop") || "",
      viewer: query.get("viewer") || "", decide: query.get("decide") || "",
    };
  }

  function start() {
    els = {
      runId: byId("run-id"), channel: byId("channel"), platform: byId("platform"), mode: byId("mode"),
      status: byId("status"), ended: byId("ended"), endDelivery: byId("end-delivery"), notice: byId("notice"),
      answer: byId("answer"), answerBox: byId("answer-box"), answerSource: byId("answer-source"),
      answerView: byId("answer-view"), finalBadge: byId("final-badge"), agentTree: byId("agent-tree"),
      rootState: byId("root-state"), timeline: byId("timeline"), timelineBox: byId("timeline-box"),
      deliveries: byId("deliveries"), agentsPanel: byId("agents-panel"), timelinePanel: byId("timeline-panel"),
      deliveriesPanel: byId("deliveries-panel"), stop: byId("stop"),
      approvalsPanel: byId("approvals-panel"), approvals: byId("approvals"), viewer: byId("viewer"),
    };
    answerNode = document.createTextNode("");
    els.answerSource.replaceChildren(answerNode);
    const markdown = window.streamrelayMarkdown;
    if (markdown && typeof window.markdownit === "function") answerView = new markdown.AnswerView(els.answer);
    els.answerView.hidden = answerView === null;
    showSource(answerView === null);
    els.answerView.addEventListener("click", () => showSource(els.answerSource.hidden));
    followScroll(els.answerBox);
    followScroll(els.timelineBox);

    const { run, token, stop, viewer: viewerId, decide } = runFromLocation();
    if (viewerId && decide && run) {
      Object.assign(viewer, { id: viewerId, token: decide, run });
      els.viewer.textContent = "you decide as " + viewerId;
    }
    if (stop && run) {
      els.stop.hidden = false;
      els.stop.addEventListener("click", () => requestStop(run, stop));
    }
    els.runId.textContent = run || "(none)";
    document.title = "streamrelay · run " + (run || "?");
    setConnection("reconnecting", "connecting…");
    if (!run) {
      setConnection("denied", DENIED_TEXT);
      showNotice("No run id in this address.");
      return;
    }
    const stream = "/v1/runs/" + encodeURIComponent(run) + "/live?token=" + encodeURIComponent(token);
    source = new EventSource(stream + "&corrections=1");  // corrections after the end too (docs/corrections.md)
    source.onopen = () => {
      if (ended === null && document.body.dataset.state !== "waiting") setConnection("live", "live");
    };
    source.onmessage = onMessage;
    source.onerror = () => {
      if (ended !== null) {
        finish();
      } else if (source.readyState === EventSource.CLOSED) {
        source.close();
        setConnection("denied", DENIED_TEXT);
        showNotice("This run cannot be shown: " + DENIED_TEXT + ". Check the link (its token) and reload.");
      } else if (document.body.dataset.state !== "waiting") {  // a waiting stream ends now and then: still waiting
        setConnection("reconnecting", "reconnecting…");
      }
    };
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
