// The operator page: every active run (GET /v1/runs?all=1) and the desk's open entries, the parts of ended runs not
// known delivered (GET /v1/deliveries), refreshed every 2 s; one run's delivery timeline (GET /v1/runs/{run}/timeline)
// when a run's "timeline" button is pressed or its id entered, refreshed with the rest.
//
// Served as GET /ops. It asks for the sidecar's main token once, keeps it in sessionStorage (this tab only) and sends
// it as `Authorization: Bearer`, never in a URL. A 401 forgets it and asks again. Run ids and every other value
// reach the DOM through textContent only; a run's link is its `watch` path (same origin, with its read token).
//
// For tests: document.body.dataset.state = "locked" | "loading" | "live" | "error" and window.streamrelayOps =
// {refreshes, runs, deliveries, timeline} (numbers, updated in place; timeline: the rows shown).
"use strict";

(() => {
  const REFRESH_MS = 2000;
  const KEY = "streamrelay.ops.token";
  const view = { refreshes: 0, runs: 0, deliveries: 0, timeline: 0 };
  let chosen = null; // the run whose timeline is shown
  window.streamrelayOps = view;

  const byId = (id) => document.getElementById(id);
  let timer = null;

  function setState(state, text) {
    document.body.dataset.state = state;
    byId("status").textContent = text;
  }

  function cell(row, text, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    td.textContent = text === null || text === undefined ? "–" : String(text);
    row.appendChild(td);
    return td;
  }

  function age(seconds) {
    if (typeof seconds !== "number") return "–";
    if (seconds < 60) return `${Math.floor(seconds)} s`;
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.floor(seconds % 60)} s`;
    return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  }

  function count(row, value, hotClass) {
    cell(row, value, value > 0 && hotClass ? `num ${hotClass}` : "num");
  }

  function runRow(run) {
    const row = document.createElement("tr");
    row.dataset.run = run.run;
    const name = cell(row, "", "run");
    const watch = typeof run.watch === "string" && run.watch.startsWith("/") && !run.watch.startsWith("//");
    const label = watch ? document.createElement("a") : document.createElement("span");
    label.textContent = run.run;
    if (watch) {
      label.href = run.watch;
      label.target = "_blank";
      label.rel = "noopener noreferrer";
    }
    name.appendChild(label);
    cell(row, run.platform && run.platform !== run.channel ? `${run.channel} (${run.platform})` : run.channel);
    cell(row, run.mode);
    cell(row, age(run.age_s), "num");
    const badge = document.createElement("span");
    badge.className = `badge status-${String(run.status).replace(/[^a-z]/g, "")}`;
    badge.textContent = run.status;
    cell(row, "").appendChild(badge);
    count(row, run.confirmed, "");
    count(row, run.uncertain, "hot");
    count(row, run.failed, "bad");
    count(row, run.rate_limited, "hot");
    cell(row, run.replica, "replica mono");
    const pick = document.createElement("button");
    pick.type = "button";
    pick.className = "link";
    pick.textContent = "timeline";
    pick.addEventListener("click", () => choose(run.run));
    cell(row, "").appendChild(pick);
    return row;
  }

  function timelineRow(entry, origin) {
    const row = document.createElement("tr");
    row.dataset.type = entry.type;
    cell(row, Math.round((entry.at - origin) * 1000), "num");
    if (entry.type === "call") {
      cell(row, "call");
      cell(row, entry.place, "mono");
      cell(row, entry.part === null ? "–" : `${entry.role} ${entry.part}`);
      cell(row, `${entry.op} (${entry.method})`);
      const badge = document.createElement("span");
      badge.className = `badge outcome-${String(entry.outcome).replace(/[^a-z_]/g, "")}`;
      badge.textContent = entry.label ? `${entry.outcome} · ${entry.label}` : entry.outcome;
      cell(row, "").appendChild(badge);
      cell(row, Math.round((entry.done_at - entry.at) * 1000), "num");
      const notes = [];
      if (entry.retry_after_s !== undefined) notes.push(`retry_after ${entry.retry_after_s} s`);
      if (entry.settled !== undefined) notes.push(`settled ${entry.settled}`);
      if (entry.error !== undefined) notes.push(entry.error);
      cell(row, notes.join(" · "));
    } else if (entry.type === "taken") {
      cell(row, `taken ${entry.count} × ${entry.kind}`);
      for (let i = 0; i < 6; i += 1) cell(row, "");
    } else {
      cell(row, entry.status ? `${entry.type} ${entry.status}` : entry.type);
      for (let i = 0; i < 6; i += 1) cell(row, "");
    }
    return row;
  }

  async function refreshTimeline(token) {
    byId("timeline").hidden = false;
    if (chosen === null) return;
    const answer = await fetch(`/v1/runs/${encodeURIComponent(chosen)}/timeline`, {
      headers: { Authorization: `Bearer ${token}` },
      cache: "no-store",
    });
    const body = await answer.json().catch(() => ({}));
    const note = byId("timeline-note");
    if (!answer.ok) {
      byId("timeline-rows").replaceChildren();
      note.hidden = false;
      note.textContent = body.error || `the sidecar answered ${answer.status}`;
      view.timeline = 0;
      return;
    }
    const entries = Array.isArray(body.entries) ? body.entries : [];
    const origin = entries.length ? entries[0].at : 0;
    byId("timeline-rows").replaceChildren(...entries.map((entry) => timelineRow(entry, origin)));
    note.hidden = !body.left_out;
    note.textContent = body.left_out ? `${body.left_out} later entries left out (a run keeps its first 400)` : "";
    view.timeline = entries.length;
  }

  function choose(run) {
    chosen = run;
    byId("timeline-run").value = run;
    const token = sessionStorage.getItem(KEY);
    if (token) refreshTimeline(token).catch((error) => setState("error", `not updated: ${error.message}`));
  }

  function show(listing) {
    const runs = Array.isArray(listing.runs) ? listing.runs : [];
    byId("runs").replaceChildren(...runs.map(runRow));
    byId("empty").hidden = runs.length > 0;
    document.body.classList.toggle("has-replicas", runs.some((run) => run.replica));
    const lost = Array.isArray(listing.unreachable) ? listing.unreachable : [];
    const note = byId("unreachable");
    note.hidden = lost.length === 0;
    const where = (l) => [l.replica || "Redis", l.url].filter(Boolean).join(" ");
    note.textContent = lost.length ? `Not shown: ${lost.map((l) => `${where(l)} (${l.error})`).join("; ")}` : "";
    const limited = runs.reduce((sum, run) => sum + (run.rate_limited || 0), 0);
    const uncertain = runs.reduce((sum, run) => sum + (run.uncertain || 0), 0);
    byId("summary").textContent =
      `${runs.length} active run${runs.length === 1 ? "" : "s"} · ${limited} × 429 · ${uncertain} uncertain part${uncertain === 1 ? "" : "s"}`;
    view.runs = runs.length;
  }

  function chatOf(chat) {
    if (!chat || typeof chat !== "object") return "–";
    return chat.thread_id === undefined || chat.thread_id === null ? String(chat.chat_id) : `${chat.chat_id} / ${chat.thread_id}`;
  }

  function deliveryRow(entry) {
    const row = document.createElement("tr");
    row.dataset.delivery = entry.id;
    cell(row, entry.id, "mono");
    cell(row, entry.run, "run");
    cell(row, entry.channel);
    cell(row, chatOf(entry.chat), "mono");
    cell(row, `${entry.role} ${entry.slot}`);
    const badge = document.createElement("span");
    badge.className = `badge desk-${String(entry.state).replace(/[^a-z]/g, "")}`;
    badge.textContent = entry.state;
    cell(row, "").appendChild(badge);
    cell(row, age(entry.age_s), "num");
    cell(row, entry.outcome || entry.error);
    return row;
  }

  function showDesk(listing) {
    const entries = Array.isArray(listing.deliveries) ? listing.deliveries : [];
    byId("deliveries").replaceChildren(...entries.map(deliveryRow));
    byId("desk-empty").hidden = entries.length > 0;
    byId("desk-none").hidden = true;
    const counts = listing.counts || {};
    byId("desk-counts").textContent = ["uncertain", "failed", "unsent", "delivered", "resolved"]
      .map((state) => `${counts[state] || 0} ${state}`)
      .join(" · ");
    view.deliveries = entries.length;
  }

  async function refreshDesk(token) {
    byId("desk").hidden = false;
    const answer = await fetch("/v1/deliveries", { headers: { Authorization: `Bearer ${token}` }, cache: "no-store" });
    if (answer.status === 404) {
      const body = await answer.json().catch(() => ({}));
      byId("deliveries").replaceChildren();
      byId("desk-empty").hidden = true;
      byId("desk-none").hidden = false;
      byId("desk-none").textContent = body.error || "this sidecar keeps no desk";
      return;
    }
    if (!answer.ok) throw new Error(`the desk answered ${answer.status}`);
    showDesk(await answer.json());
  }

  function lock(reason) {
    clearTimeout(timer);
    sessionStorage.removeItem(KEY);
    byId("board").hidden = true;
    byId("desk").hidden = true;
    byId("timeline").hidden = true;
    byId("login").hidden = false;
    setState("locked", reason);
    byId("token").focus();
  }

  async function refresh() {
    const token = sessionStorage.getItem(KEY);
    if (!token) return lock("token needed");
    try {
      const answer = await fetch("/v1/runs?all=1", {
        headers: { Authorization: `Bearer ${token}` },
        cache: "no-store",
      });
      if (answer.status === 401) return lock("wrong token: enter it again");
      if (!answer.ok) throw new Error(`the sidecar answered ${answer.status}`);
      show(await answer.json());
      await refreshDesk(token);
      await refreshTimeline(token);
      setState("live", `updated ${new Date().toLocaleTimeString()}`);
    } catch (error) {
      setState("error", `not updated: ${error.message}`);
    }
    view.refreshes += 1;
    timer = setTimeout(refresh, REFRESH_MS);
  }

  function start() {
    clearTimeout(timer);
    byId("login").hidden = true;
    byId("board").hidden = false;
    setState("loading", "loading…");
    refresh();
  }

  document.addEventListener("DOMContentLoaded", () => {
    byId("login").addEventListener("submit", (event) => {
      event.preventDefault();
      const token = byId("token").value.trim();
      byId("token").value = "";
      if (!token) return;
      sessionStorage.setItem(KEY, token);
      start();
    });
    byId("forget").addEventListener("click", () => lock("token forgotten"));
    byId("timeline-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const run = byId("timeline-run").value.trim();
      if (run) choose(run);
    });
    if (sessionStorage.getItem(KEY)) start();
    else byId("token").focus();
  });
})();
