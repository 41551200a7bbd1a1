// The approver's inbox: the queue of holds (GET /inbox, paged on the
// server's cursor), the detail pane with the answers, the calls in doubt
// and the full audit. Plain DOM modules, no dependencies; everything shown
// comes from the server and is inserted as text, never as HTML.

import { answer, api, explain, failed, failure, query, refOf, session } from "./web/api.js";
import { $, announce, el } from "./web/dom.js";
import { Queue, keyOf, summaryOf } from "./web/queue.js";
import { Detail } from "./web/detail.js";
import { AuditView, loadInDoubt } from "./web/audit.js";
import { GrantsView } from "./web/grants.js";
import { beginLogin, finishLogin, loginConfig } from "./web/login.js";

const params = new URLSearchParams(location.search);
// A notification's link to one hold: ?agent=&sessionId=&snapshotId=&ref=
const LINK = params.get("snapshotId")
  ? { agent: params.get("agent") || "", sessionId: params.get("sessionId") || "", snapshotId: params.get("snapshotId"), ref: params.get("ref") || "" }
  : null;
const POLL_MS = Math.max(250, Number(params.get("poll")) || 2000);
const PAGE = Math.max(1, Math.min(1000, Number(params.get("page")) || 50));

const state = {
  polling: null,
  view: "inbox",
  loaded: 0, // how many holds the list holds from the server's order
  cursor: null, // the server's cursor after them
  total: 0,
  tools: {},
  agents: [],
  generation: 0, // bumped when the filters change; stale answers are dropped
  filterKey: "",
  counts: { waiting: 0, expired: 0 },
  me: null, // the signed-in principal
};

const queue = new Queue($("queue"), (row) => {
  detail.show(row);
  showPosition();
});
const detail = new Detail($("detail"), {
  queue,
  tools: () => state.tools,
  me: () => state.me,
  roles: () => state.roles || [],
  openAudit: (preset) => {
    // One load, of that session only (a default load would race it).
    showView("audit", true);
    audit.open(preset);
  },
  refresh: () => setTimeout(refresh, 50),
  answered: (row, kind, text) => advance(row, kind, text),
  log,
});
queue.onFinish = (key) => {
  if (queue.selected === key) detail.update();
  updateCount();
};
const audit = new AuditView();
const grants = new GrantsView();

function setBanner(text) {
  const banner = $("banner");
  banner.textContent = text || "";
  banner.hidden = !text;
}

function log(kind, text) {
  $("no-outcomes").hidden = true;
  const li = el("li", { class: "outcome-" + kind }, el("span", { class: "muted", text: new Date().toLocaleTimeString() + " · " }), text);
  $("outcomes").prepend(li);
  while ($("outcomes").children.length > 30) $("outcomes").lastChild.remove();
}

function filters() {
  return {
    q: $("f-q").value.trim(),
    agent: $("f-agent").value,
    tool: $("f-tool").value,
    role: $("f-role").value,
    expired: $("f-expired").value,
    mine: $("f-mine").checked ? "true" : "",
    partial: $("f-partial").checked ? "true" : "",
    order: $("f-order").value,
    requester: $("f-requester").value,
    rule: $("f-rule").value,
    escalated: $("f-escalated").checked ? "true" : "",
    amountField: $("f-amount-field").value,
    minAmount: amountOf($("f-min").value),
    maxAmount: amountOf($("f-max").value),
    minAge: $("f-age").value,
  };
}

// ---- Views: the filters live in the URL (?mine=true&minAmount=10000), so a
// view is a link to keep, share or bookmark. ----

/** "25,000" / "$25k" / "25000.50" → "25000.50" (empty when not a number). */
function amountOf(text) {
  const t = String(text || "").trim().replace(/[$,\s]/g, "");
  const m = /^(\d+(?:\.\d+)?)(k|m)?$/i.exec(t);
  if (!m) return "";
  return String(Number(m[1]) * (m[2] ? (m[2].toLowerCase() === "k" ? 1000 : 1000000) : 1));
}

/** The filters that differ from the defaults: what a view's URL carries. */
const DEFAULTS = { expired: "false", order: "oldest" };
function viewParams(f) {
  const out = {};
  for (const [k, v] of Object.entries(f)) if (v !== "" && v !== DEFAULTS[k]) out[k] = v;
  for (const k of Object.keys(DEFAULTS)) if (f[k] === "" && DEFAULTS[k] !== "") out[k] = "";
  return out;
}

function viewQuery(f) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(viewParams(f))) q.set(k, v);
  // Settings of the page itself (not filters) stay in the URL.
  for (const k of ["poll", "page"]) if (params.get(k)) q.set(k, params.get(k));
  const s = q.toString();
  return s ? "?" + s : "";
}

function setSelect(select, value) {
  if (value && ![...select.options].some((o) => o.value === value)) select.append(el("option", { value, text: value }));
  select.value = value;
}

/** Sets the filter controls from a view's query. */
function applyView(search) {
  const p = new URLSearchParams(search);
  const get = (k) => (p.has(k) ? p.get(k) : DEFAULTS[k] || "");
  $("f-q").value = get("q");
  for (const [id, k] of [["f-agent", "agent"], ["f-tool", "tool"], ["f-role", "role"], ["f-expired", "expired"], ["f-order", "order"], ["f-requester", "requester"], ["f-rule", "rule"], ["f-amount-field", "amountField"], ["f-age", "minAge"]]) {
    setSelect($(id), get(k));
  }
  $("f-mine").checked = get("mine") === "true";
  $("f-partial").checked = get("partial") === "true";
  $("f-escalated").checked = get("escalated") === "true";
  $("f-min").value = get("minAmount");
  $("f-max").value = get("maxAmount");
}

/** Writes the filters into the address bar (no reload, no history entry per keystroke). */
function syncUrl() {
  if (state.link && !state.link.done) return;
  const want = viewQuery(filters());
  if (location.search !== want) history.replaceState(null, "", location.pathname + want);
  for (const a of document.querySelectorAll("#views a")) a.setAttribute("aria-current", String(a.getAttribute("href") === (want || "?")));
  const active = Object.keys(viewParams(filters())).filter((k) => k !== "order" && k !== "q").length;
  $("filters-count").textContent = active ? active + " active" : "";
}

/** Views everyone has, then the ones saved in this browser. */
const BUILT_IN_VIEWS = [
  ["All live", ""],
  ["Waiting for me", "?mine=true"],
  ["Waiting for me, over $10k", "?mine=true&minAmount=10000"],
  ["Escalated", "?escalated=true"],
  ["Waiting over 1 h", "?minAge=3600"],
];
const SAVED_KEY = "holdpoint.views";

function savedViews() {
  try {
    const v = JSON.parse(localStorage.getItem(SAVED_KEY) || "[]");
    return Array.isArray(v) ? v.filter((x) => x && typeof x.name === "string" && typeof x.query === "string") : [];
  } catch (_) {
    return [];
  }
}

function renderViews() {
  const links = BUILT_IN_VIEWS.map(([name, q]) => ({ name, query: q })).concat(savedViews());
  $("views").replaceChildren(
    ...links.map((v) =>
      el("li", {}, el("a", {
        href: v.query || "?",
        text: v.name,
        onclick: (e) => {
          e.preventDefault();
          applyView(v.query);
          history.pushState(null, "", location.pathname + (v.query || ""));
          refresh();
        },
      })),
    ),
  );
  syncUrl();
}

function saveView() {
  const name = $("view-name").value.trim() || describeView();
  const views = savedViews().filter((v) => v.name !== name);
  views.push({ name, query: viewQuery(filters()).replace(/[?&](poll|page)=[^&]*/g, "") });
  localStorage.setItem(SAVED_KEY, JSON.stringify(views.slice(-12)));
  $("view-name").value = "";
  renderViews();
  announce('View "' + name + '" saved; its link is in the address bar.');
}

function describeView() {
  const f = filters();
  const words = [];
  if (f.mine) words.push("waiting for me");
  if (f.minAmount) words.push("over $" + Number(f.minAmount).toLocaleString("en-US"));
  if (f.maxAmount) words.push("under $" + Number(f.maxAmount).toLocaleString("en-US"));
  if (f.requester) words.push("from " + f.requester);
  if (f.rule) words.push('rule "' + f.rule + '"');
  if (f.escalated) words.push("escalated");
  if (f.q) words.push('"' + f.q + '"');
  return words.join(", ") || "My view";
}

function fillSelect(select, values, allText) {
  const current = select.value;
  const want = [""].concat(values);
  const have = [...select.options].map((o) => o.value);
  if (want.length === have.length && want.every((v, i) => v === have[i])) return;
  select.replaceChildren(...want.map((v) => el("option", { value: v, text: v || allText })));
  if (want.includes(current)) select.value = current;
  else if (current) {
    select.append(el("option", { value: current, text: current }));
    select.value = current;
  }
}

/** Holds still waiting (expired ones are counted apart: they wait for nothing). */
function liveCount(counts) {
  return Math.max(0, (counts.waiting || 0) - (counts.expired || 0));
}

function showLiveCount(counts) {
  const live = liveCount(counts);
  $("pending-count").textContent = String(live);
  document.title = (live ? "(" + live + ") " : "") + "Holdpoint approvals";
}

function updateCount() {
  const open = state.total;
  const live = liveCount(state.counts);
  const expired = state.counts.expired || 0;
  showLiveCount(state.counts);
  const shown = queue.rows.size;
  $("queue-status").textContent =
    live +
    " waiting" +
    (expired ? " · " + expired + " expired" : "") +
    (shown ? " · showing " + Math.min(state.loaded, open) + " of " + open : "") +
    (state.truncated ? " · more than one listing reads: narrow the filters" : "");
  $("empty").hidden = shown > 0 || open > 0;
  $("load-more").hidden = !state.cursor;
  $("load-more").textContent = state.cursor ? "Load more (" + Math.max(0, open - state.loaded) + " more)" : "Load more";
  showPosition();
}

/** "Row 3 of 333": the selected row among every hold the filters find. */
function showPosition() {
  const at = queue.position();
  $("row-position").textContent = at.n ? "Row " + at.n + " of " + Math.max(state.total, at.of) : "";
}

/** Refreshes the loaded window of the queue in place. */
async function refresh() {
  const f = filters();
  const key = JSON.stringify(f);
  if (key !== state.filterKey) {
    syncUrl();
    state.filterKey = key;
    state.generation++;
    state.loaded = 0;
    state.cursor = null;
    queue.clear();
    detail.empty();
  }
  const generation = state.generation;
  const limit = Math.min(1000, Math.max(PAGE, state.loaded));
  const got = await api("inbox" + query(Object.assign({}, f, { limit })));
  if (generation !== state.generation) return;
  if (!got.ok) {
    setBanner(explain(got));
    $("queue-status").textContent = explain(got);
    return;
  }
  setBanner("");
  const page = got.result;
  state.total = page.total;
  state.counts = page.counts || state.counts;
  state.truncated = page.truncated;
  mergeTools(page.tools);
  const me = page.caller || {};
  state.me = me.principal || null;
  state.roles = me.roles || [];
  queue.me = state.me;
  $("whoami").textContent = (me.principal ? "Signed in as " + me.principal : "Anonymous") + (me.roles && me.roles.length ? " · roles: " + me.roles.join(", ") : "");
  state.agents = Object.keys(page.agents);
  fillSelect($("f-agent"), state.agents, "All agents");
  fillSelect($("f-tool"), [...new Set(Object.values(page.agents).flat())].sort(), "All tools");
  fillSelect($("f-role"), page.roles, "Any role");
  fillSelect($("f-requester"), page.requesters || [], "Anyone");
  fillSelect($("f-rule"), page.rules || [], "Any rule");
  fillSelect($("f-amount-field"), page.numericFields || [], "Amount");
  queue.merge(page.items, !page.nextCursor);
  // The window covered everything loaded so far: its end is the new edge.
  if (limit >= state.loaded) {
    state.loaded = page.items.length;
    state.cursor = page.nextCursor || null;
  }
  if (state.link) openLinked(page.items);
  if (!queue.selected) {
    if (!state.link || !state.link.done) detail.empty();
  } else detail.update();
  updateCount();
  $("last-update").textContent = "updated " + new Date().toLocaleTimeString();
}

/**
 * Selects the hold a link named once the list has it; when the server no
 * longer lists it, says how it ended (from the audit) instead.
 */
async function openLinked(items) {
  const link = state.link;
  if (link.done || link.looking) return;
  const match = (i) => i.snapshotId === link.snapshotId && (!link.ref || refOf(i) === link.ref) && (!link.agent || i.agent === link.agent);
  const found = items.find(match);
  if (found) {
    link.done = true;
    const row = [...queue.rows.values()].find((r) => match(r.item));
    if (row) queue.select(keyOfRow(row), true);
    announce("Opened the linked hold: " + found.tool + ".");
    return;
  }
  link.looking = true;
  const got = await api("audit" + query({ agent: link.agent, snapshotId: link.snapshotId, limit: 20 }));
  link.looking = false;
  link.done = true;
  const recs = got.ok ? got.result.items.filter((r) => !link.ref || r.ref === link.ref) : [];
  const end = recs[0];
  const text = end
    ? "The hold this link opens no longer waits: " + (end.actor || end.principal || "anonymous") + " — " + end.decision + (end.reason ? " (" + end.reason + ")" : "") + "."
    : "The hold this link opens is not waiting for you: it was answered, or it is not yours to see.";
  detail.gone(text, () => {
    $("f-q").value = "";
    refresh();
  });
  announce(text);
}

function keyOfRow(row) {
  return row.el.dataset.key;
}

function mergeTools(tools) {
  for (const [agent, byTool] of Object.entries(tools || {})) {
    state.tools[agent] = Object.assign(state.tools[agent] || {}, byTool);
  }
}

async function loadMore() {
  if (!state.cursor) return;
  if (state.loadingMore) return state.loadingMore;
  state.loadingMore = loadMoreOnce().finally(() => (state.loadingMore = null));
  return state.loadingMore;
}

async function loadMoreOnce() {
  const generation = state.generation;
  const got = await api("inbox" + query(Object.assign({}, filters(), { cursor: state.cursor, limit: PAGE })));
  if (generation !== state.generation) return;
  if (!got.ok) return setBanner(explain(got));
  mergeTools(got.result.tools);
  queue.append(got.result.items);
  state.loaded += got.result.items.length;
  state.cursor = got.result.nextCursor || null;
  state.total = got.result.total;
  state.counts = got.result.counts || state.counts;
  updateCount();
  announce("Loaded " + got.result.items.length + " more; showing " + state.loaded + " of " + state.total + ".");
}

/** The server-managed agents the caller may use (where calls can be in doubt). */
async function servedAgents() {
  const got = await api("agents");
  if (!got.ok) {
    setBanner(explain(got));
    return state.agents;
  }
  const served = got.result.filter((a) => a.stateManagement === "server");
  // Their tools' schemas: settling a call in doubt fills in its output.
  for (const a of served) {
    for (const t of a.tools || []) {
      state.tools[a.name] = state.tools[a.name] || {};
      state.tools[a.name][t.name] = Object.assign({}, state.tools[a.name][t.name] || {}, t);
    }
  }
  return served.map((a) => a.name);
}

async function doubts() {
  await loadInDoubt(await servedAgents(), log, (agent, tool) => (state.tools[agent] && state.tools[agent][tool]) || null);
}

async function poll() {
  try {
    if (state.view === "inbox") {
      await refresh();
      // The in-doubt count stays current too, less often.
      if (!(Date.now() - (state.doubtsAt || 0) < 10000)) {
        state.doubtsAt = Date.now();
        await doubts();
      }
    }
    else if (state.view === "doubt") await doubts();
    else await refreshCountOnly();
  } finally {
    state.polling = setTimeout(poll, POLL_MS);
  }
}

async function refreshCountOnly() {
  const got = await api("inbox?limit=1");
  if (got.ok) {
    state.counts = got.result.counts;
    showLiveCount(state.counts);
    state.agents = Object.keys(got.result.agents);
  }
}

/** Shows `view`; `preset`: the caller loads the audit itself (with filters). */
function showView(view, preset) {
  state.view = view;
  for (const tab of document.querySelectorAll(".tab")) tab.setAttribute("aria-pressed", String(tab.dataset.view === view));
  for (const name of ["inbox", "doubt", "audit", "grants"]) $("view-" + name).hidden = name !== view;
  if (view === "grants") grants.load();
  if (view === "audit" && !preset && !$("audit-table").children.length) audit.load(true);
  if (view === "doubt") doubts();
}

function typing(target) {
  return target && (target.isContentEditable || (/^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName) && target.type !== "checkbox"));
}

// ---- Triage at volume: auto-advance, bulk answers, new rows held back. ----

// "Next hold after answering" is on unless the person turned it off: the
// choice (a preference, never a credential) is kept in localStorage, and
// ?advance=0 / ?advance=1 in the URL overrides it for that tab.
const ADVANCE_KEY = "holdpoint.advance";

/** Whether to move on after an answer: the URL's say, else the stored choice, else on. */
function advanceWanted() {
  const fromUrl = params.get("advance");
  if (fromUrl === "0" || fromUrl === "1") return fromUrl === "1";
  return localStorage.getItem(ADVANCE_KEY) !== "0";
}

/** After an answer given here, the next open hold (unless "Next hold after answering" is off). */
function advance(row, kind, text) {
  if (!$("f-advance").checked || kind === "bad" || kind === "expired") return;
  const key = keyOf(row.item);
  if (queue.selected !== key) return; // the person moved on already
  const next = queue.nextOpen(key);
  if (!next) return announce("That was the last hold shown.");
  queue.select(next, true);
  showLastAnswer(key, row.item, kind, text);
  // One announcement for both, so the outcome is not cut off by the move.
  announce(summaryOf(row.item) + ": " + (text || "done.") + " Next: " + summaryOf(queue.rows.get(next).item) + ".");
}

// What the answer just given did, at the top of the next hold's detail (so
// in the phone's sheet too), with a way back to the answered hold. The pane
// drops it when it shows another hold.
const lastAnswer = el("p", { id: "last-answer", class: "notice last-answer" });

function showLastAnswer(key, item, kind, text) {
  const back = el("button", { type: "button", class: "quiet", text: "Show it" });
  back.addEventListener("click", () => {
    hideLastAnswer();
    if (queue.rows.has(key)) queue.select(key, true);
  });
  lastAnswer.className = "notice last-answer outcome-" + kind;
  lastAnswer.replaceChildren(el("strong", { text: "Answered: " + summaryOf(item) }), " — " + (text || "done.") + " Now showing the next hold. ", back);
  $("detail").prepend(lastAnswer);
}

function hideLastAnswer() {
  lastAnswer.remove();
}

function renderPicked() {
  const n = queue.picked.size;
  $("bulk").hidden = n === 0 && !$("bulk-results").children.length;
  $("bulk-actions").hidden = n === 0;
  $("bulk-count").textContent = n + (n === 1 ? " hold picked" : " holds picked");
  $("bulk-approve").textContent = "Approve " + n;
  $("bulk-deny").textContent = "Deny " + n;
}

/** What one answer did, in words: {kind, text, item?} (item: the hold's new state, when it still waits). */
function outcomeOf(got, approve, row, me) {
  const item = row.item;
  if (!got.ok) return { kind: "bad", text: "Not done: " + explain(got) };
  const r = got.result || {};
  if (r.decided === false) {
    const approvals = r.approvals || [];
    const quorum = r.quorum || (item.rule && item.rule.quorum) || approvals.length;
    const names = approvals.map((a) => a.actor);
    return {
      kind: "partial",
      text: names.length + " of " + quorum + ": " + names.join(", ") + " — recorded; the call runs once the quorum is met.",
      item: Object.assign({}, item, { approvals, forMe: false }),
    };
  }
  const out = r.decided === true ? r.output : r;
  if (failed(out)) return { kind: "bad", text: (approve ? "Approved" : "Denied") + ", but the turn failed: " + failure(out) + "." };
  if (!approve) return { kind: "denied", text: "Denied: the call did not run." };
  const quorum = item.rule && item.rule.quorum;
  if (quorum > 1) {
    const names = (item.approvals || []).map((a) => a.actor);
    if (me && !names.includes(me)) names.push(me);
    return { kind: "ok", text: "Approved " + names.length + " of " + quorum + ": " + names.join(", ") + ": the call ran." };
  }
  return { kind: "ok", text: "Approved: the call ran." };
}

/**
 * Answers every picked hold, one request each (each its own exactly-once
 * decision and audit row), and lists what happened to each.
 */
async function bulk(approve) {
  const rows = queue.pickedRows();
  if (!rows.length || state.bulkBusy) return;
  const reason = $("bulk-reason").value.trim();
  const needsReason = rows.filter((r) => r.item.rule && r.item.rule.reasonRequired);
  if (!approve && needsReason.length && !reason) {
    $("bulk-summary").textContent = "A reason is required to deny " + needsReason.length + " of these (their rule says so): type one, then deny.";
    $("bulk-reason").focus();
    return;
  }
  state.bulkBusy = true;
  $("bulk-approve").disabled = $("bulk-deny").disabled = true;
  const results = $("bulk-results");
  results.replaceChildren();
  $("bulk").hidden = false;
  let done = 0;
  for (const [i, row] of rows.entries()) {
    const item = row.item;
    const key = keyOf(item);
    $("bulk-summary").textContent = (approve ? "Approving " : "Denying ") + (i + 1) + " of " + rows.length + "…";
    row.answering = true;
    const got = await answer(item, approve, reason || undefined);
    row.answering = false;
    const o = outcomeOf(got, approve, row, state.me);
    if (o.kind === "ok" || o.kind === "denied") {
      queue.finish(key, o.kind, o.text);
      done++;
    } else if (o.kind === "partial") {
      queue.update(row, o.item);
      queue.pick(key, false);
      done++;
    } else {
      queue.pick(key, false);
      // A refusal never retires a hold: ask whether it still waits.
      if (got.status === 404 || got.status === 409) queue.goneElsewhere(row, true);
    }
    const what = summaryOf(item) + (item.owner ? " · " + item.owner : "");
    results.append(el("li", { class: "outcome-" + o.kind, dataset: { key } }, el("strong", { text: what }), " — " + o.text));
    log(o.kind, what + " (" + item.tool + "): " + o.text);
  }
  const verb = approve ? "Approved" : "Denied";
  const text = verb + " " + done + " of " + rows.length + (done < rows.length ? "; " + (rows.length - done) + " not done (see each below)." : ".");
  $("bulk-summary").textContent = text;
  announce(text);
  $("bulk-reason").value = "";
  state.bulkBusy = false;
  $("bulk-approve").disabled = $("bulk-deny").disabled = false;
  renderPicked();
  updateCount();
  setTimeout(refresh, 50);
}

function onHeld(n) {
  $("new-rows").hidden = n === 0;
  $("new-rows").textContent = n + " new — show";
}

// ---- Phone: a tapped row opens its detail as a sheet, Approve/Deny in reach. ----

const PHONE = matchMedia("(max-width: 760px)");

function openSheet() {
  if (!PHONE.matches) return;
  $("detail").classList.add("sheet");
  document.body.classList.add("sheet-open");
  $("sheet-back").hidden = false;
  $("detail").focus({ preventScroll: true });
}

function closeSheet() {
  const key = queue.selected;
  $("detail").classList.remove("sheet");
  document.body.classList.remove("sheet-open");
  $("sheet-back").hidden = true;
  const row = key && queue.rows.get(key);
  if (row) row.el.focus({ preventScroll: false });
}

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || state.view !== "inbox") return;
  if (typing(event.target)) {
    if (event.key === "Escape") event.target.blur();
    return;
  }
  switch (event.key) {
    case "j":
      // At the end of what is loaded, j loads the next page and moves into it.
      if (queue.atEnd() && state.cursor) loadMore().then(() => (queue.move(1), showPosition()));
      else queue.move(1);
      break;
    case "x":
      if (queue.selected) queue.pick(queue.selected);
      break;
    case "k":
      queue.move(-1);
      break;
    case "a":
      detail.focusApprove();
      break;
    case "d":
      detail.focusReason();
      announce("Type a reason, then press Enter to deny.");
      break;
    case "/":
      $("f-q").focus();
      break;
    case "Escape":
      if (!$("detail").classList.contains("sheet")) return;
      closeSheet();
      break;
    default:
      return;
  }
  event.preventDefault();
}

function restart() {
  hideLastAnswer();
  clearTimeout(state.polling);
  state.filterKey = "";
  poll();
}

async function signIn() {
  try {
    const token = await finishLogin();
    if (token) {
      const got = await session.signIn(token);
      if (got.ok) announce("Signed in.");
      else setBanner(explain(got));
    }
  } catch (e) {
    setBanner(e.message);
  }
  const config = await loginConfig();
  if (config) {
    $("sign-in").hidden = false;
    $("sign-in").addEventListener("click", () => beginLogin(config).catch((e) => setBanner(e.message)));
  }
}

async function start() {
  if (LINK) {
    // Show that hold (live or expired) and select it; "Show all holds" clears the search.
    state.link = Object.assign({}, LINK);
    $("f-q").value = LINK.snapshotId;
    $("f-expired").value = "";
    if (LINK.agent) fillSelect($("f-agent"), [LINK.agent], "All agents");
    $("f-agent").value = LINK.agent;
  }
  await signIn();
  $("credentials").addEventListener("submit", async (event) => {
    event.preventDefault();
    const credential = $("token").value.trim();
    $("token").value = "";
    if (!credential) return;
    const got = await session.signIn(credential);
    if (got.ok) announce("Signed in as " + got.result.principal + ".");
    else setBanner(explain(got));
    restart();
  });
  $("sign-out").addEventListener("click", async () => {
    const got = await session.signOut();
    if (!got.ok) {
      setBanner(explain(got));
      return;
    }
    $("token").value = "";
    $("whoami").textContent = "Not signed in.";
    announce("Signed out.");
    restart();
  });
  let searchTimer = null;
  if (!LINK && location.search) applyView(location.search);
  renderViews();
  window.addEventListener("popstate", () => {
    applyView(location.search);
    refresh();
  });
  $("save-view").addEventListener("click", saveView);
  for (const id of ["f-min", "f-max"]) {
    $(id).addEventListener("input", () => {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(refresh, 400);
    });
  }
  $("f-advance").checked = advanceWanted();
  $("f-advance").addEventListener("change", () => {
    localStorage.setItem(ADVANCE_KEY, $("f-advance").checked ? "1" : "0");
    if (!$("f-advance").checked) hideLastAnswer();
    announce($("f-advance").checked ? "After an answer, the next hold is shown." : "After an answer, the answered hold stays shown.");
  });
  queue.onPick = renderPicked;
  queue.onHeld = onHeld;
  queue.onTap = openSheet;
  $("new-rows").addEventListener("click", () => {
    queue.showHeld();
    updateCount();
    announce("New holds shown.");
  });
  $("bulk-approve").addEventListener("click", () => bulk(true));
  $("bulk-deny").addEventListener("click", () => bulk(false));
  $("bulk-clear").addEventListener("click", () => {
    for (const key of [...queue.picked]) queue.pick(key, false);
    $("bulk-results").replaceChildren();
    $("bulk-summary").textContent = "";
    renderPicked();
  });
  $("sheet-back").addEventListener("click", closeSheet);
  PHONE.addEventListener("change", () => {
    if (!PHONE.matches) closeSheet();
    $("filter-fold").open = !PHONE.matches || $("filter-fold").open;
  });
  $("filter-fold").open = !PHONE.matches;
  $("filters").addEventListener("submit", (e) => e.preventDefault());
  $("filters").addEventListener("change", () => refresh());
  $("f-q").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(refresh, 250);
  });
  $("load-more").addEventListener("click", loadMore);
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showView(tab.dataset.view));
  document.addEventListener("keydown", onKey);
  setInterval(() => {
    queue.tickAll();
    detail.tick();
  }, 1000);
  detail.empty();
  poll();
}

start();
