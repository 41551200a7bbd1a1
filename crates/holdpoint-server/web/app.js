// The approver's inbox: the queue of holds (GET /inbox, paged on the
// server's cursor), the detail pane with the answers, the calls in doubt
// and the full audit. Plain DOM modules, no dependencies; everything shown
// comes from the server and is inserted as text, never as HTML.

import { api, explain, query, refOf, session } from "./web/api.js";
import { $, announce, el } from "./web/dom.js";
import { Queue } from "./web/queue.js";
import { Detail } from "./web/detail.js";
import { AuditView, loadInDoubt } from "./web/audit.js";
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

const queue = new Queue($("queue"), (row) => detail.show(row));
const detail = new Detail($("detail"), {
  queue,
  tools: () => state.tools,
  me: () => state.me,
  openAudit: (preset) => {
    // One load, of that session only (a default load would race it).
    showView("audit", true);
    audit.open(preset);
  },
  refresh: () => setTimeout(refresh, 50),
  log,
});
queue.onFinish = (key) => {
  if (queue.selected === key) detail.update();
  updateCount();
};
const audit = new AuditView();

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
  };
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
}

/** Refreshes the loaded window of the queue in place. */
async function refresh() {
  const f = filters();
  const key = JSON.stringify(f);
  if (key !== state.filterKey) {
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
  queue.me = state.me;
  $("whoami").textContent = (me.principal ? "Signed in as " + me.principal : "Anonymous") + (me.roles && me.roles.length ? " · roles: " + me.roles.join(", ") : "");
  state.agents = Object.keys(page.agents);
  fillSelect($("f-agent"), state.agents, "All agents");
  fillSelect($("f-tool"), [...new Set(Object.values(page.agents).flat())].sort(), "All tools");
  fillSelect($("f-role"), page.roles, "Any role");
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
  for (const name of ["inbox", "doubt", "audit"]) $("view-" + name).hidden = name !== view;
  if (view === "audit" && !preset && !$("audit-table").children.length) audit.load(true);
  if (view === "doubt") doubts();
}

function typing(target) {
  return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
}

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || state.view !== "inbox") return;
  if (typing(event.target)) {
    if (event.key === "Escape") event.target.blur();
    return;
  }
  switch (event.key) {
    case "j":
      queue.move(1);
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
    default:
      return;
  }
  event.preventDefault();
}

function restart() {
  clearTimeout(state.polling);
  state.filterKey = "";
  poll();
}

async function signIn() {
  try {
    const token = await finishLogin();
    if (token) {
      session.set(token);
      $("token").value = token;
      announce("Signed in.");
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
  $("token").value = session.credential;
  $("credentials").addEventListener("submit", (event) => {
    event.preventDefault();
    session.set($("token").value.trim());
    restart();
  });
  $("forget-token").addEventListener("click", () => {
    session.set("");
    $("token").value = "";
    restart();
  });
  let searchTimer = null;
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
