// The full audit trail (GET /audit: filtered, paged on the server's
// cursor, exported as CSV or JSON) and the calls in doubt with settle.

import { agentPath, api, escalatedTo, explain, failed, failure, outputText, query, respondPart, restartPart, settle } from "./api.js";
import { $, announce, copyable, el, fieldList, when } from "./dom.js";
import { schemaForm } from "./forms.js";
import { auditTable, inputText } from "./detail.js";

const PAGE = 50;
const FILTERS = ["agent", "tool", "actor", "decision", "sessionId", "since", "until"];

function filters() {
  const f = {};
  for (const name of ["agent", "tool", "actor", "decision", "sessionId"]) f[name] = $("audit-" + name).value.trim();
  for (const name of ["since", "until"]) {
    const v = $("audit-" + name).value;
    f[name] = v ? new Date(v).toISOString() : "";
  }
  return f;
}

export class AuditView {
  constructor() {
    this.cursor = null;
    this.records = [];
    this.seq = 0; // the newest load; an older one's answer is dropped
    $("audit-filters").addEventListener("submit", (e) => {
      e.preventDefault();
      this.load(true);
    });
    $("audit-more").addEventListener("click", () => this.load(false));
    $("audit-csv").addEventListener("click", () => this.export("csv"));
    $("audit-json").addEventListener("click", () => this.export("json"));
  }

  /**
   * Shows exactly `preset` (e.g. one session): every other filter is
   * cleared, so nothing typed earlier narrows or widens it.
   */
  open(preset) {
    for (const name of FILTERS) $("audit-" + name).value = "";
    for (const [k, v] of Object.entries(preset || {})) {
      const input = $("audit-" + k);
      if (input) input.value = v;
    }
    return this.load(true);
  }

  /**
   * Loads the first page (`fresh`) or the next. Only the newest load is
   * shown: an earlier one that answers late (other filters) is dropped.
   */
  async load(fresh) {
    const f = filters();
    const seq = ++this.seq;
    if (fresh) {
      this.cursor = null;
      this.records = [];
      $("audit-table").replaceChildren();
      $("audit-status").textContent = "Loading…";
    }
    const got = await api("audit" + query(Object.assign({}, f, { cursor: fresh ? "" : this.cursor, limit: PAGE })));
    if (seq !== this.seq) return;
    if (!got.ok) {
      $("audit-status").textContent = explain(got);
      return;
    }
    this.records = fresh ? got.result.items : this.records.concat(got.result.items);
    this.cursor = got.result.nextCursor || null;
    const total = got.result.total;
    $("audit-status").textContent = "Showing " + this.records.length + " of " + total + " decisions" + (got.result.truncated ? " (the trail is longer than one listing reads)" : "") + ".";
    $("audit-more").hidden = !this.cursor;
    $("audit-table").replaceChildren(this.records.length ? auditTable(this.records, true) : el("p", { class: "muted", text: "No decisions match." }));
  }

  /** Every matching record, following the cursor to the end. */
  async all() {
    const f = filters();
    let cursor = "";
    const out = [];
    // Bounded: at most this many pages of the largest size the server gives.
    for (let page = 0; page < 1000; page++) {
      const got = await api("audit" + query(Object.assign({}, f, { cursor, limit: 1000 })));
      if (!got.ok) throw new Error(explain(got));
      out.push(...got.result.items);
      if (!got.result.nextCursor) return out;
      cursor = got.result.nextCursor;
    }
    return out;
  }

  async export(format) {
    let rows;
    try {
      rows = await this.all();
    } catch (e) {
      $("audit-status").textContent = e.message;
      return;
    }
    let text;
    let type;
    if (format === "json") {
      text = JSON.stringify(rows, null, 2);
      type = "application/json";
    } else {
      // What was decided (the input in words) beside its hash.
      const cols = ["at", "agent", "sessionId", "snapshotId", "tool", "ref", "decision", "actor", "principal", "reason", "inputSummary", "input", "inputHash", "originalInputHash", "settles", "id"];
      const cell = (r, c) => (c === "inputSummary" ? inputText(r) : c === "input" ? (r.input !== undefined ? r.input : r.heldInput) : r[c]);
      text = [cols.join(",")].concat(rows.map((r) => cols.map((c) => csvCell(cell(r, c))).join(","))).join("\r\n") + "\r\n";
      type = "text/csv";
    }
    const url = URL.createObjectURL(new Blob([text], { type }));
    const a = el("a", { href: url, download: "holdpoint-audit." + format, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    announce("Exported " + rows.length + " decisions as " + format.toUpperCase() + ".");
    $("audit-status").textContent = "Exported " + rows.length + " decisions as " + format.toUpperCase() + ".";
  }
}

/**
 * The calls in doubt of every agent, each with settle; `toolOf(agent,
 * tool)` gives a tool's definition (its output schema builds the form).
 */
export async function loadInDoubt(agents, log, toolOf) {
  const list = $("doubt-list");
  const found = [];
  const problems = [];
  await Promise.all(
    agents.map(async (agent) => {
      const got = await api(agentPath(agent, "inDoubt"));
      if (got.ok) got.result.forEach((item) => found.push(Object.assign({ agent }, item)));
      else if (got.status !== 403) problems.push(agent + ": " + explain(got));
    }),
  );
  $("doubt-count").textContent = String(found.length);
  $("doubt-status").textContent = problems.join(" ") || (found.length ? "" : "No calls are in doubt.");
  const known = new Set([...list.children].map((li) => li.dataset.key));
  const keys = new Set(found.map((i) => i.agent + "/" + i.snapshotId + "/" + i.tool));
  // Items already shown stay as they are (a form being filled is kept).
  for (const li of [...list.children]) if (!keys.has(li.dataset.key) && !li.classList.contains("done")) li.remove();
  for (const item of found) {
    const key = item.agent + "/" + item.snapshotId + "/" + item.tool;
    if (!known.has(key)) list.append(doubtCard(item, key, log, toolOf ? toolOf(item.agent, item.tool) : null));
  }
}

function doubtCard(item, key, log, info) {
  const id = "doubt-h-" + key.replace(/[^a-zA-Z0-9]/g, "-");
  const result = el("div", { class: "notice", hidden: true, role: "status" });
  // The tool's result, field by field from its output schema (like Respond).
  const output = schemaForm(info && info.outputSchema, undefined);
  const show = (kind, text) => {
    result.className = "notice outcome-" + kind;
    result.textContent = text;
    result.hidden = false;
    announce(text);
    log(kind, item.tool + " (" + item.agent + "): " + text);
  };
  let busy = false;
  const run = async (directive, label) => {
    if (busy) return;
    busy = true;
    for (const b of li.querySelectorAll("button")) b.disabled = true;
    const got = await settle(item, directive);
    busy = false;
    const again = () => {
      for (const b of li.querySelectorAll("button")) b.disabled = false;
    };
    if (!got.ok) {
      again();
      return show("bad", "Not settled: " + explain(got) + " The call is still in doubt.");
    }
    if (failed(got.result)) {
      // The server's outcome, and whether the call is still in doubt.
      const now = await api(agentPath(item.agent, "inDoubt"));
      const still = now.ok && now.result.some((i) => i.snapshotId === item.snapshotId && i.tool === item.tool);
      if (still || !now.ok) again();
      else li.classList.add("done");
      return show(
        "bad",
        "Not settled: the server answered with a failed turn (" +
          failure(got.result) +
          "). " +
          (still ? "The call is still in doubt." : now.ok ? "It is no longer listed in doubt: check the audit." : "Whether it is still in doubt is not known (" + explain(now) + ")."),
      );
    }
    li.classList.add("done");
    // Settled once: the ways to settle it again go away.
    settleForm.remove();
    rerun.remove();
    const said = outputText(got.result);
    show(label === "respond" ? "responded" : "ok", (label === "respond" ? "Settled with what happened." : "Settled: the call ran again.") + (said ? " The agent said: " + said : ""));
  };
  const confirm = el("button", { type: "button", class: "act deny", hidden: true, text: "Yes, run it again", onclick: () => run(restartPart(item, item.reply ? item.reply.approve : { toolApproved: true }), "restart") });
  const decided = item.decided || [];
  const to = escalatedTo(item);
  const settleForm = el(
    "fieldset",
    {},
    el("legend", { text: "It ran: answer with what happened" }),
    el("p", { class: "muted small", text: info && info.outputSchema ? "The tool's result:" : "The tool's result, as JSON:" }),
    output.node,
    el("button", {
      type: "button",
      class: "act",
      text: "Settle with this result",
      onclick: () => {
        const got = output.read();
        if (got.error) return show("bad", got.error);
        run(respondPart(item, got.value), "respond");
      },
    }),
  );
  const rerun = el(
    "div",
    { class: "row rerun" },
    el("button", { type: "button", class: "quiet", text: "Re-run it…", onclick: () => ((confirm.hidden = false), confirm.focus(), announce("Running it again may repeat its effect. Confirm to run it.")) }),
    confirm,
  );
  const li = el(
    "li",
    { class: "doubt", dataset: { key, tool: item.tool } },
    el(
      "section",
      { "aria-labelledby": id },
      el("h3", { id, text: item.tool + " · " + item.agent }),
      el("p", { class: "muted", text: "A resume claimed this call and its process stopped: it may or may not have run. Held since " + when(item.heldSince) + "." }),
      to.length ? el("p", { class: "notice escalated-line", text: "Escalated: nobody answered in time, so " + to.join(", ") + " could answer it too." }) : null,
      fieldList(item.input),
      el(
        "ul",
        { class: "decided" },
        ...decided.map((r) => el("li", { text: when(r.at) + " · " + r.decision + " by " + (r.actor || r.principal || "anonymous") + (r.reason ? " · " + r.reason : "") })),
      ),
      el("div", { class: "ids" }, copyable("Session", item.sessionId), copyable("Snapshot", item.snapshotId)),
      settleForm,
      rerun,
      result,
    ),
  );
  return li;
}

// One CSV cell. A cell a spreadsheet would read as a formula (beginning
// with =, +, -, @, TAB or CR: the OWASP set) is quoted with a leading
// apostrophe, so opening an export never runs what a caller typed.
function csvCell(v) {
  const s = v === undefined || v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
  const formula = /^[=+\-@\t\r]/.test(s);
  return /[",\n\r]/.test(s) || formula ? '"' + (formula ? "'" : "") + s.replace(/"/g, '""') + '"' : s;
}
