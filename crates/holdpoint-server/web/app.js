// The approval page: lists paused tool calls, lets a person answer them,
// and shows transcripts and the audit trail. Plain DOM, no dependencies.
// Everything shown comes from the server and is inserted as text, never
// as HTML.
"use strict";

const TOOL_APPROVAL = "genkit-middleware/toolApproval";
const CREDENTIAL_KEY = "holdpoint.credential";
const params = new URLSearchParams(location.search);
const POLL_MS = Math.max(250, Number(params.get("poll")) || 2000);

const state = {
  credential: sessionStorage.getItem(CREDENTIAL_KEY) || localStorage.getItem(CREDENTIAL_KEY) || "",
  cards: new Map(), // key -> {item, el}
  polling: null,
};

// ---- small helpers ---------------------------------------------------------

function $(id) {
  return document.getElementById(id);
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function pretty(value) {
  if (value === undefined) return "";
  try {
    return JSON.stringify(value, null, 2);
  } catch (_) {
    return String(value);
  }
}

function short(id) {
  return id && id.length > 13 ? id.slice(0, 8) + "…" : id || "";
}

function age(since) {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(since)) / 1000));
  if (seconds < 60) return seconds + " s";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return minutes + " min";
  const hours = Math.round(minutes / 60);
  if (hours < 48) return hours + " h";
  return Math.round(hours / 24) + " days";
}

function when(at) {
  const d = new Date(at);
  return isNaN(d) ? String(at) : d.toLocaleString();
}

function setBanner(text) {
  const banner = $("banner");
  banner.textContent = text || "";
  banner.hidden = !text;
}

// ---- the API ---------------------------------------------------------------

async function api(path, options) {
  const headers = { Accept: "application/json" };
  if (state.credential) headers.Authorization = "Bearer " + state.credential;
  const init = { method: "GET", headers, cache: "no-store" };
  if (options && options.body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    return { ok: false, status: 0, error: { status: "UNAVAILABLE", message: "The server cannot be reached (" + e.message + ")." } };
  }
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (response.ok && body && "result" in body) return { ok: true, status: response.status, result: body.result };
  const error = (body && body.error) || { status: "INTERNAL", message: "HTTP " + response.status };
  return { ok: false, status: response.status, error };
}

/** Words a person can act on, for an error answer. */
function explain(answer) {
  const e = answer.error || {};
  switch (answer.status) {
    case 401:
      return "Sign in: enter an API key or token above. (" + e.message + ")";
    case 403:
      return "Not allowed: " + e.message;
    case 404:
      return "Not found: it is gone, or it belongs to someone else. (" + e.message + ")";
    case 409:
      return "Already resumed elsewhere: someone answered this call first, so nothing was done twice.";
    case 413:
      return "Too large: " + e.message;
    default:
      return (e.status ? e.status + ": " : "") + (e.message || "something went wrong");
  }
}

// ---- pending approvals -------------------------------------------------------

function cardKey(agent, item) {
  const ref = (item.part && item.part.toolRequest && item.part.toolRequest.ref) || item.ref || "";
  return agent + "/" + item.snapshotId + "/" + item.tool + "/" + ref;
}

function interruptText(item) {
  const data = item.interrupt || {};
  if (typeof data.message === "string") return data.message;
  if (typeof data.details === "string") return data.details;
  const keys = Object.keys(data).filter((k) => k !== "expiresAt");
  return keys.length ? pretty(data) : "The tool paused for an answer.";
}

function isGate(item) {
  return typeof item.interruptedBy === "string" && item.interruptedBy.startsWith(TOOL_APPROVAL);
}

function restartPart(item, resumeData) {
  const req = item.part.toolRequest;
  const toolRequest = { name: req.name };
  if (req.ref !== undefined) toolRequest.ref = req.ref;
  if (req.input !== undefined) toolRequest.input = req.input;
  return { toolRequest, metadata: { resumed: resumeData } };
}

function respondPart(item, output) {
  const req = item.part.toolRequest;
  const toolResponse = { name: req.name, output };
  if (req.ref !== undefined) toolResponse.ref = req.ref;
  return { toolResponse, metadata: { interruptResponse: true } };
}

function parseJson(text, what) {
  try {
    return { value: JSON.parse(text) };
  } catch (e) {
    return { error: what + " is not valid JSON: " + e.message };
  }
}

function notice(card, kind, text) {
  const box = card.querySelector(".notice");
  box.className = "notice " + kind;
  box.textContent = text;
  box.hidden = false;
}

function outcome(kind, text) {
  $("no-outcomes").hidden = true;
  const li = el("li", { class: kind }, el("span", { class: "muted", text: new Date().toLocaleTimeString() + " · " }), text);
  $("outcomes").prepend(li);
  while ($("outcomes").children.length > 30) $("outcomes").lastChild.remove();
}

function outputText(result) {
  const content = (result.message && result.message.content) || [];
  return content
    .filter((p) => typeof p.text === "string")
    .map((p) => p.text)
    .join(" ")
    .trim();
}

// Approves or denies through POST /agents/{name}/answer (docs/reference.md
// §10.6): the server checks the call's approval rule; an approval short of
// its quorum is only recorded.
async function decideCall(card, agent, item, approved, reason, label) {
  const data = { snapshotId: item.snapshotId, tool: item.tool, decision: approved ? "approve" : "deny" };
  if (item.ref !== undefined) data.ref = item.ref;
  if (reason) data.reason = reason;
  return answer(card, agent, item, null, label, { path: "agents/" + encodeURIComponent(agent) + "/answer", body: { data } });
}

function tally(approvals, quorum) {
  const who = (approvals || []).map((a) => a.actor);
  return who.length + " of " + quorum + (who.length ? ": " + who.join(", ") : "");
}

async function answer(card, agent, item, directive, label, via) {
  const buttons = card.querySelectorAll("button.act");
  buttons.forEach((b) => (b.disabled = true));
  notice(card, "warn", "Sending…");
  let got;
  if (via) {
    got = await api(via.path, { body: via.body });
  } else {
    const resume = directive.toolResponse ? { respond: [directive] } : { restart: [directive] };
    got = await api("agents/" + encodeURIComponent(agent), {
      body: { data: { resume }, init: { snapshotId: item.snapshotId } },
    });
  }
  const what = label + " " + item.tool + " (session " + short(item.sessionId) + ")";
  if (got.ok && via && got.result.decided === false) {
    const text = tally(got.result.approvals, got.result.quorum) + " approvals recorded; the call runs once the quorum is met.";
    notice(card, "warn", text);
    outcome("warn", what + ": " + text);
    buttons.forEach((b) => (b.disabled = false));
    return;
  }
  if (got.ok && via) got.result = got.result.output;
  if (!got.ok) {
    const text = explain(got);
    notice(card, "bad", text);
    outcome("bad", what + ": " + text);
    if (got.status === 409 || got.status === 404) card.classList.add("settled");
    else buttons.forEach((b) => (b.disabled = false));
    return;
  }
  const result = got.result;
  if (result.finishReason === "failed") {
    const text = "The turn failed: " + ((result.error && result.error.message) || "unknown error");
    notice(card, "bad", text);
    outcome("bad", what + ": " + text);
    buttons.forEach((b) => (b.disabled = false));
  } else if (result.finishReason === "interrupted") {
    card.classList.add("settled");
    notice(card, "warn", "Answered. The agent paused again: a new call is waiting.");
    outcome("warn", what + ": the agent paused again and waits for another answer.");
  } else {
    card.classList.add("settled");
    const said = outputText(result);
    notice(card, "ok", "Done." + (said ? " The agent said: " + said : ""));
    outcome("ok", what + ": done." + (said ? " The agent said: " + said : ""));
  }
  setTimeout(refresh, 50);
}

function buildCard(agent, item) {
  const gate = isGate(item);
  const card = el("li", {
    class: "card" + (item.expired ? " expired" : ""),
    dataset: { agent, session: item.sessionId, snapshot: item.snapshotId, tool: item.tool },
  });
  const ageEl = el("span", { class: "age", dataset: { since: item.heldSince }, text: "waiting " + age(item.heldSince) });
  card.append(
    el(
      "div",
      { class: "card-head" },
      el("span", { class: "tool", text: item.tool }),
      el(
        "span",
        {},
        el("span", { class: gate ? "badge gate" : "badge", text: gate ? "approval gate" : "tool interrupt" }),
        item.expired ? el("span", { class: "badge expired", text: "expired" }) : null,
      ),
    ),
    el(
      "div",
      { class: "meta" },
      el("span", {}, "agent ", el("strong", { class: "agent", text: agent })),
      el("span", {}, "session ", el("span", { class: "mono session", title: item.sessionId, text: short(item.sessionId) })),
      item.owner ? el("span", {}, "owner ", el("span", { class: "owner", text: item.owner })) : null,
      ageEl,
      item.expiresAt ? el("span", { text: "expires " + when(item.expiresAt) }) : null,
    ),
    el("p", { class: "message", text: interruptText(item) }),
    el("pre", { class: "input mono", text: pretty(item.input) }),
  );
  if (item.expired) {
    card.append(
      el("div", {
        class: "notice warn",
        text: "This approval has expired (approval expired): it can no longer be approved; a denial still reaches the agent.",
      }),
    );
  }

  if (item.rule) {
    const r = item.rule;
    const who = r.approvers.join(" or ") + (r.selfApproval ? " (or the owner)" : " (not the owner)");
    card.append(
      el("p", { class: "muted rule", text: "Rule \"" + r.rule + "\": " + who + " may answer" + (r.quorum > 1 ? "; " + tally(item.approvals, r.quorum) : "") }),
    );
  }
  const actions = el("div", { class: "actions" });
  if (gate || item.reply || item.rule) {
    const reason = el("input", { class: "reason", type: "text", placeholder: "Reason (optional, recorded in the audit)", "aria-label": "Reason" });
    const decide = (approved) => () => {
      decideCall(card, agent, item, approved, reason.value.trim(), approved ? "Approved" : "Denied");
    };
    actions.append(
      el(
        "div",
        { class: "row" },
        reason,
        el("button", { type: "button", class: "act approve", onclick: decide(true), text: "Approve" }),
        el("button", { type: "button", class: "act deny", onclick: decide(false), text: "Deny" }),
      ),
    );
  } else {
    const data = el("textarea", { class: "resume-data", rows: 2, "aria-label": "Resume data" });
    data.value = '{"approved": true}';
    const restart = () => {
      const parsed = parseJson(data.value || "{}", "The resume data");
      if (parsed.error) return notice(card, "bad", parsed.error);
      if (parsed.value === null || typeof parsed.value !== "object" || Array.isArray(parsed.value)) {
        return notice(card, "bad", "The resume data must be a JSON object.");
      }
      answer(card, agent, item, restartPart(item, parsed.value), "Restarted");
    };
    const output = el("textarea", { class: "respond-output", rows: 2, "aria-label": "Tool output" });
    output.value = "{}";
    const respond = () => {
      const parsed = parseJson(output.value, "The output");
      if (parsed.error) return notice(card, "bad", parsed.error);
      answer(card, agent, item, respondPart(item, parsed.value), "Answered");
    };
    actions.append(
      el("label", { class: "muted", text: "Resume data, sent to the tool when it runs again:" }),
      data,
      el("div", { class: "row" }, el("button", { type: "button", class: "act approve", onclick: restart, text: "Approve" })),
      el(
        "details",
        {},
        el("summary", { text: "Respond instead (give the tool's result without running it)" }),
        output,
        el("div", { class: "row" }, el("button", { type: "button", class: "act respond", onclick: respond, text: "Respond" })),
      ),
    );
  }
  card.append(
    actions,
    el("div", { class: "notice", hidden: true }),
    el(
      "div",
      { class: "links" },
      el("button", { type: "button", class: "link transcript", onclick: () => showTranscript(agent, item.sessionId), text: "Transcript" }),
      el("button", { type: "button", class: "link audit", onclick: () => showAudit(agent, item.sessionId), text: "Audit" }),
    ),
  );
  return card;
}

function renderPending(all) {
  const list = $("pending");
  const seen = new Set();
  for (const { agent, item } of all) {
    const key = cardKey(agent, item);
    seen.add(key);
    const known = state.cards.get(key);
    if (known && known.item.expired === item.expired) continue;
    const card = buildCard(agent, item);
    if (known) known.el.replaceWith(card);
    else list.append(card);
    state.cards.set(key, { item, el: card });
  }
  for (const [key, known] of state.cards) {
    // A settled card stays until the person has seen its notice; others go
    // as soon as the server no longer lists them.
    if (!seen.has(key) && !known.el.classList.contains("settled")) {
      known.el.remove();
      state.cards.delete(key);
    } else if (!seen.has(key) && known.el.classList.contains("settled") && !known.fading) {
      known.fading = true;
      setTimeout(() => {
        known.el.remove();
        state.cards.delete(key);
        updateCount();
      }, 8000);
    }
  }
  // Newest first.
  const cards = [...state.cards.values()].sort((a, b) => Date.parse(b.item.heldSince) - Date.parse(a.item.heldSince));
  // Move cards only when the order changed: moving a card on every poll
  // would take the focus (and typed keys) away from its reason field.
  if (cards.some((c, i) => list.children[i] !== c.el)) {
    for (const c of cards) list.append(c.el);
  }
  updateCount();
}

function updateCount() {
  const open = [...state.cards.values()].filter((c) => !c.el.classList.contains("settled")).length;
  $("pending-count").textContent = String(open);
  $("empty").hidden = state.cards.size > 0;
}

function renderDecisions(records) {
  const body = $("decisions").querySelector("tbody");
  body.replaceChildren(
    ...records.slice(0, 25).map((r) =>
      el(
        "tr",
        { dataset: { session: r.sessionId, tool: r.tool, decision: r.decision } },
        el("td", { text: when(r.at) }),
        el("td", { text: r.agent || "" }),
        el("td", { class: "mono", title: r.sessionId, text: short(r.sessionId) }),
        el("td", { text: r.tool }),
        el("td", { class: "decision-" + r.decision, text: r.decision }),
        el("td", { class: "principal", text: r.principal || "anonymous" }),
        el("td", { text: r.reason || "" }),
      ),
    ),
  );
  if (!records.length) body.append(el("tr", {}, el("td", { colspan: 7, class: "muted", text: "No decisions yet." })));
}

async function refresh() {
  const agents = await api("agents");
  if (!agents.ok) {
    setBanner(explain(agents));
    return;
  }
  const served = agents.result.filter((a) => a.stateManagement === "server");
  const pending = [];
  const decisions = [];
  const problems = [];
  await Promise.all(
    served.map(async (a) => {
      const name = encodeURIComponent(a.name);
      const [p, d] = await Promise.all([api("agents/" + name + "/pending?limit=200"), api("agents/" + name + "/audit?limit=25")]);
      if (p.ok) p.result.forEach((item) => pending.push({ agent: a.name, item }));
      else problems.push(a.name + ": " + explain(p));
      if (d.ok) decisions.push(...d.result);
    }),
  );
  setBanner(problems.join(" "));
  renderPending(pending);
  decisions.sort((a, b) => Date.parse(b.at) - Date.parse(a.at));
  renderDecisions(decisions);
  $("last-update").textContent = "updated " + new Date().toLocaleTimeString();
}

function tickAges() {
  document.querySelectorAll(".age[data-since]").forEach((node) => {
    node.textContent = "waiting " + age(node.dataset.since);
  });
}

async function poll() {
  try {
    await refresh();
  } finally {
    state.polling = setTimeout(poll, POLL_MS);
  }
}

// ---- transcript and audit ----------------------------------------------------

function openDetail(title, ...content) {
  $("detail-title").textContent = title;
  $("detail-body").replaceChildren(...content);
  const dialog = $("detail");
  if (!dialog.open) dialog.showModal();
}

function describePart(part) {
  if (typeof part.text === "string") return el("div", { text: part.text });
  if (part.toolRequest) {
    const m = part.metadata || {};
    const marks = [];
    if (m.interrupt) marks.push("paused");
    if (m.resolvedInterrupt) marks.push("answered");
    if (m.resumed) marks.push("restarted with " + JSON.stringify(m.resumed));
    if (m.interruptedBy) marks.push("held by " + m.interruptedBy);
    return el(
      "div",
      {},
      el("strong", { text: "→ " + part.toolRequest.name }),
      marks.length ? el("span", { class: "muted", text: " (" + marks.join(", ") + ")" }) : null,
      el("pre", { class: "mono", text: pretty(part.toolRequest.input) }),
    );
  }
  if (part.toolResponse) {
    return el(
      "div",
      {},
      el("strong", { text: "← " + part.toolResponse.name }),
      el("pre", { class: "mono", text: pretty(part.toolResponse.output) }),
    );
  }
  return el("pre", { class: "mono", text: pretty(part) });
}

async function showTranscript(agent, sessionId) {
  openDetail("Transcript · session " + short(sessionId), el("p", { class: "muted", text: "Loading…" }));
  const got = await api("agents/" + encodeURIComponent(agent) + "/getSnapshot", { body: { data: { sessionId } } });
  if (!got.ok) return openDetail("Transcript", el("p", { class: "notice bad", text: explain(got) }));
  const snap = got.result;
  const messages = (snap.state && snap.state.messages) || [];
  openDetail(
    "Transcript · session " + short(sessionId),
    el("p", { class: "muted", text: "Snapshot " + snap.snapshotId + " · " + snap.status + (snap.finishReason ? " · " + snap.finishReason : "") }),
    el(
      "ol",
      { class: "transcript" },
      ...messages.map((m) => el("li", { class: m.role }, el("div", { class: "role", text: m.role }), ...(m.content || []).map(describePart))),
    ),
  );
}

async function showAudit(agent, sessionId) {
  openDetail("Audit · session " + short(sessionId), el("p", { class: "muted", text: "Loading…" }));
  const got = await api("agents/" + encodeURIComponent(agent) + "/audit?sessionId=" + encodeURIComponent(sessionId));
  if (!got.ok) return openDetail("Audit", el("p", { class: "notice bad", text: explain(got) }));
  const rows = got.result.map((r) =>
    el(
      "tr",
      {},
      el("td", { text: when(r.at) }),
      el("td", { text: r.tool }),
      el("td", { class: "decision-" + r.decision, text: r.decision }),
      el("td", { class: "principal", text: r.principal || "anonymous" }),
      el("td", { text: r.reason || "" }),
      r.originalInputHash
        ? el("td", {
            class: "mono",
            title: "ran " + JSON.stringify(r.input) + " (" + r.inputHash + ") instead of " + JSON.stringify(r.originalInput) + " (" + r.originalInputHash + ")",
            text: short(r.inputHash) + " (replaced " + short(r.originalInputHash) + ")",
          })
        : el("td", { class: "mono", title: r.inputHash, text: short(r.inputHash) }),
    ),
  );
  openDetail(
    "Audit · session " + short(sessionId),
    rows.length
      ? el(
          "table",
          { class: "table audit-table" },
          el("thead", {}, el("tr", {}, ...["When", "Tool", "Decision", "By", "Reason", "Input hash"].map((h) => el("th", { text: h })))),
          el("tbody", {}, ...rows),
        )
      : el("p", { class: "muted", text: "No decisions recorded for this session yet." }),
  );
}

// ---- start -----------------------------------------------------------------

function start() {
  $("token").value = state.credential;
  $("credentials").addEventListener("submit", (event) => {
    event.preventDefault();
    state.credential = $("token").value.trim();
    if (state.credential) sessionStorage.setItem(CREDENTIAL_KEY, state.credential);
    clearTimeout(state.polling);
    for (const c of state.cards.values()) c.el.remove();
    state.cards.clear();
    poll();
  });
  $("forget-token").addEventListener("click", () => {
    state.credential = "";
    $("token").value = "";
    sessionStorage.removeItem(CREDENTIAL_KEY);
    localStorage.removeItem(CREDENTIAL_KEY);
    clearTimeout(state.polling);
    poll();
  });
  $("detail-close").addEventListener("click", () => $("detail").close());
  setInterval(tickAges, 1000);
  poll();
}

document.addEventListener("DOMContentLoaded", start);
