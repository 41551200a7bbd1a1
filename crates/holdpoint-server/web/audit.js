// The full audit trail (GET /audit: filtered, paged on the server's
// cursor, exported as CSV or JSON) and the calls in doubt with settle.

import { agentPath, api, explain, outputText, query, respondPart, restartPart, settle } from "./api.js";
import { $, announce, copyable, el, fieldList, when } from "./dom.js";
import { schemaForm } from "./forms.js";
import { auditTable } from "./detail.js";

const PAGE = 50;

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
    $("audit-filters").addEventListener("submit", (e) => {
      e.preventDefault();
      this.load(true);
    });
    $("audit-more").addEventListener("click", () => this.load(false));
    $("audit-csv").addEventListener("click", () => this.export("csv"));
    $("audit-json").addEventListener("click", () => this.export("json"));
  }

  /** Sets filters (e.g. one session) and loads the first page. */
  open(preset) {
    for (const [k, v] of Object.entries(preset || {})) {
      const input = $("audit-" + k);
      if (input) input.value = v;
    }
    return this.load(true);
  }

  async load(fresh) {
    const f = filters();
    if (fresh) this.cursor = null;
    const got = await api("audit" + query(Object.assign({}, f, { cursor: fresh ? "" : this.cursor, limit: PAGE })));
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
      const cols = ["at", "agent", "sessionId", "snapshotId", "tool", "ref", "decision", "actor", "principal", "reason", "inputHash", "originalInputHash", "settles", "id"];
      text = [cols.join(",")].concat(rows.map((r) => cols.map((c) => csvCell(r[c])).join(","))).join("\r\n") + "\r\n";
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

/** The calls in doubt of every agent, each with settle. */
export async function loadInDoubt(agents, log) {
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
    if (!known.has(key)) list.append(doubtCard(item, key, log));
  }
}

function doubtCard(item, key, log) {
  const id = "doubt-h-" + key.replace(/[^a-zA-Z0-9]/g, "-");
  const result = el("div", { class: "notice", hidden: true, role: "status" });
  const output = schemaForm(null, undefined);
  const show = (kind, text) => {
    result.className = "notice outcome-" + kind;
    result.textContent = text;
    result.hidden = false;
    announce(text);
    log(kind, item.tool + " (" + item.agent + "): " + text);
  };
  const run = async (directive, label) => {
    const got = await settle(item, directive);
    if (!got.ok) return show("bad", explain(got));
    li.classList.add("done");
    const said = outputText(got.result);
    show(label === "respond" ? "responded" : "ok", (label === "respond" ? "Settled with what happened." : "Settled: the call ran again.") + (said ? " The agent said: " + said : ""));
  };
  const confirm = el("button", { type: "button", class: "act deny", hidden: true, text: "Yes, run it again", onclick: () => run(restartPart(item, { toolApproved: true }), "restart") });
  const decided = item.decided || [];
  const li = el(
    "li",
    { class: "doubt", dataset: { key, tool: item.tool } },
    el(
      "section",
      { "aria-labelledby": id },
      el("h3", { id, text: item.tool + " · " + item.agent }),
      el("p", { class: "muted", text: "A resume claimed this call and its process stopped: it may or may not have run. Held since " + when(item.heldSince) + "." }),
      fieldList(item.input),
      el(
        "ul",
        { class: "decided" },
        ...decided.map((r) => el("li", { text: when(r.at) + " · " + r.decision + " by " + (r.actor || r.principal || "anonymous") + (r.reason ? " · " + r.reason : "") })),
      ),
      el("div", { class: "ids" }, copyable("Session", item.sessionId), copyable("Snapshot", item.snapshotId)),
      el(
        "fieldset",
        {},
        el("legend", { text: "It ran: answer with what happened" }),
        el("label", { class: "muted small", text: "The tool's result, as JSON:" }),
        output.node,
        el(
          "button",
          {
            type: "button",
            class: "act",
            text: "Settle with this result",
            onclick: () => {
              const got = output.read();
              if (got.error) return show("bad", got.error);
              run(respondPart(item, got.value), "respond");
            },
          },
        ),
      ),
      el(
        "div",
        { class: "row" },
        el("button", { type: "button", class: "quiet", text: "Re-run it…", onclick: () => ((confirm.hidden = false), confirm.focus(), announce("Running it again may repeat its effect. Confirm to run it.")) }),
        confirm,
      ),
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
