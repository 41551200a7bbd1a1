// The queue: a compact list of holds, patched in place. Rows are never
// moved or rebuilt by a refresh (a new hold is inserted next to its
// neighbour in the server's order), so focus and selection stay put; a hold
// answered elsewhere stays, greyed, saying who answered and how. A row is
// retired only once the server no longer lists the hold (a refused answer
// never retires it), and an expired hold is never counted as waiting: its
// clock stops at its expiry.

import { api, escalatedTo, isExpired, lookUp, query, refOf } from "./api.js";
import { age, countdown, el, short, summary, when } from "./dom.js";

let ids = 0;

/** How often (ms) a hold the listing stopped showing is looked up again. */
const RECHECK_MS = 5000;

export function keyOf(item) {
  return item.agent + "/" + item.snapshotId + "/" + item.tool + "/" + (refOf(item) || "");
}

export function tally(approvals, quorum) {
  const who = (approvals || []).map((a) => a.actor);
  return who.length + " of " + quorum + (who.length ? ": " + who.join(", ") : "");
}

/** Whether `me` (a principal) has approved `item` already. */
export function approvedBy(item, me) {
  return !!me && (item.approvals || []).some((a) => a.actor === me);
}

const ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"];

/** "waiting for a second approver — not you": what a partly approved hold still needs. */
export function stillNeeds(item, me) {
  const r = item.rule;
  const have = (item.approvals || []).length;
  if (!r || r.quorum <= 1 || have >= r.quorum) return "";
  const missing = r.quorum - have;
  const next = missing === 1 ? "a " + (ORDINALS[have] || "further") + " approver" : missing + " more approvers";
  return "waiting for " + next + (approvedBy(item, me) ? " — not you" : "");
}

/** How long a hold waited: until now, or until it expired (its clock stops). */
export function waited(item) {
  if (isExpired(item) && item.expiresAt) {
    const ms = Math.max(0, Date.parse(item.expiresAt) - Date.parse(item.heldSince));
    return "waited " + spanOf(ms) + ", then expired";
  }
  return "waiting " + age(item.heldSince);
}

function spanOf(ms) {
  // age() counts from a time to now; from a fixed span, the same words.
  return age(new Date(Date.now() - ms).toISOString());
}

/** The state words of a hold (live, expired, partially approved). */
function stateOf(item, me) {
  if (isExpired(item)) return { cls: "expired", text: "expired" };
  if (item.rule && item.rule.quorum > 1 && item.approvals && item.approvals.length) {
    return { cls: "partial", text: tally(item.approvals, item.rule.quorum) + (approvedBy(item, me) ? " · you approved" : "") };
  }
  if (item.forMe) return { cls: "mine", text: "waiting for you" };
  return { cls: "live", text: item.refused ? "you may not answer" : "waiting" };
}

export class Queue {
  constructor(list, onSelect) {
    this.list = list;
    this.rows = new Map(); // key -> {item, el, parts, done}
    this.onSelect = onSelect;
    this.selected = null;
    this.me = null; // the signed-in principal, to tell "you approved"
  }

  clear() {
    this.rows.clear();
    this.list.replaceChildren();
    this.selected = null;
  }

  /** Keys in display order. */
  keys() {
    return [...this.list.children].map((li) => li.dataset.key);
  }

  build(item) {
    const key = keyOf(item);
    const id = "item-h-" + ++ids;
    const heading = el("h3", { id, class: "item-title" }, el("span", { class: "tool", text: item.tool }), el("span", { class: "muted", text: " · " + item.agent }));
    const badge = el("span", { class: "badge" });
    const waited = el("span", { class: "age", dataset: { since: item.heldSince } });
    const expiry = el("span", { class: "expiry" });
    const escalation = el("span", { class: "badge escalated", hidden: true });
    const outcome = el("p", { class: "item-outcome", hidden: true });
    const section = el(
      "section",
      { class: "item-body", "aria-labelledby": id },
      el("div", { class: "item-head" }, heading, escalation, badge),
      el("p", { class: "item-summary", text: summary(item.input) }),
      el(
        "p",
        { class: "item-meta muted" },
        item.owner ? el("span", { class: "owner", text: "for " + item.owner }) : null,
        waited,
        expiry,
        el("span", { class: "mono", title: item.sessionId, text: "session " + short(item.sessionId) }),
      ),
      outcome,
    );
    const li = el(
      "li",
      {
        class: "item",
        tabindex: "-1",
        dataset: { key, agent: item.agent, tool: item.tool, session: item.sessionId, snapshot: item.snapshotId },
        onclick: () => this.select(key, true),
        onfocus: () => {
          if (this.selected !== key) this.select(key, false);
        },
      },
      section,
    );
    const row = { item, el: li, parts: { badge, waited, expiry, escalation, outcome }, done: null };
    this.update(row, item);
    return row;
  }

  /** Patches a row's changing parts in place. */
  update(row, item) {
    row.item = item;
    const s = stateOf(item, this.me);
    if (!row.done) {
      row.parts.badge.className = "badge " + s.cls;
      row.parts.badge.textContent = s.text;
      row.el.classList.toggle("expired", isExpired(item));
    }
    const to = escalatedTo(item);
    row.parts.escalation.hidden = !to.length;
    row.parts.escalation.textContent = to.length ? "escalated to " + to.join(", ") : "";
    this.tick(row);
  }

  tick(row) {
    const item = row.item;
    const expired = isExpired(item);
    // An expired hold is not waiting: its clock stops at its expiry.
    if (expired && !row.el.classList.contains("expired") && !row.done) this.update(row, item);
    row.parts.waited.textContent = waited(item);
    row.parts.expiry.textContent = !item.expiresAt || row.done ? "" : expired ? "expired at " + when(item.expiresAt) : countdown(item.expiresAt);
  }

  tickAll() {
    for (const row of this.rows.values()) this.tick(row);
  }

  /**
   * Merges the server's first `items` (in its order). `complete`: the
   * server has no more beyond them. New holds are inserted after their
   * predecessor; a loaded hold the server no longer lists (and that lies
   * within the refreshed window) is marked answered elsewhere.
   */
  merge(items, complete) {
    const seen = new Set();
    let prev = null;
    for (const item of items) {
      const key = keyOf(item);
      seen.add(key);
      let row = this.rows.get(key);
      if (row) {
        if (!row.done) this.update(row, item);
      } else {
        row = this.build(item);
        this.rows.set(key, row);
        if (prev) prev.el.after(row.el);
        else this.list.prepend(row.el);
      }
      prev = row;
    }
    const last = prev && prev.el;
    for (const [key, row] of this.rows) {
      if (seen.has(key) || row.done) continue;
      const within = complete || (last && last.compareDocumentPosition(row.el) & Node.DOCUMENT_POSITION_PRECEDING);
      if (within) this.goneElsewhere(row);
    }
    if (!this.selected && this.list.firstElementChild) this.select(this.list.firstElementChild.dataset.key, false);
  }

  /** Appends a further page (load more). */
  append(items) {
    for (const item of items) {
      const key = keyOf(item);
      if (this.rows.has(key)) continue;
      const row = this.build(item);
      this.rows.set(key, row);
      this.list.append(row.el);
    }
    if (!this.selected && this.list.firstElementChild) this.select(this.list.firstElementChild.dataset.key, false);
  }

  /** Marks a row answered: greyed, with what happened. */
  finish(key, kind, text) {
    const row = this.rows.get(key);
    if (!row) return;
    row.done = { kind, text };
    row.el.className = "item done outcome-" + kind + (this.selected === key ? " selected" : "");
    row.parts.badge.className = "badge outcome-" + kind;
    row.parts.badge.textContent = kind === "ok" ? "approved" : kind;
    row.parts.outcome.textContent = text;
    row.parts.outcome.hidden = false;
    row.parts.expiry.textContent = "";
    if (this.onFinish) this.onFinish(key);
  }

  /**
   * A hold the listing no longer shows: the audit says how it ended, and
   * the row is retired with who decided (for a quorum, everyone who
   * approved). A hold with no decision recorded is asked for again
   * (it may still wait: an expired one a "live" listing leaves out); it is
   * retired only once the server says it no longer waits.
   */
  async goneElsewhere(row, force) {
    // A hold being answered on this page is told by that answer, not guessed here.
    if (row.done || row.checking || (!force && (row.answering || (row.checkedAt && Date.now() - row.checkedAt < RECHECK_MS)))) return;
    row.checking = true;
    try {
      await this.lookUpEnd(row);
    } finally {
      row.checking = false;
      row.checkedAt = Date.now();
    }
  }

  async lookUpEnd(row) {
    const item = row.item;
    const key = keyOf(item);
    const got = await api("audit" + query({ agent: item.agent, snapshotId: item.snapshotId, limit: 100 }));
    if (row.done) return;
    const ref = refOf(item) || "";
    // Newest first: the decision that ended the hold, and the approvals before it.
    const records = got.ok ? got.result.items.filter((r) => r.tool === item.tool && (r.ref || "") === ref) : [];
    const end = records[0];
    if (!end || (item.rule && item.rule.quorum > 1 && end.decision === "approve" && approvalsIn(records).length < item.rule.quorum)) {
      // No decision ended it (yet): still waiting, or expired out of a "live" listing.
      const now = await lookUp(item);
      if (row.done) return;
      if (now.waiting) {
        this.update(row, Object.assign({}, item, now.item));
        return;
      }
      if (now.error) return;
      this.finish(key, "elsewhere", got.ok ? "No longer waiting (no decision recorded that you may read)." : "Answered elsewhere (the session is no longer visible to you).");
      return;
    }
    const who = end.actor || end.principal || "anonymous";
    let text;
    if (end.decision === "approve" && item.rule && item.rule.quorum > 1) {
      const names = approvalsIn(records);
      text = "Approved " + names.length + " of " + item.rule.quorum + ": " + names.join(", ") + ". The last approval was " + who + "'s, given elsewhere.";
    } else {
      text = "Answered elsewhere: " + who + " — " + end.decision + (end.reason ? " (" + end.reason + ")" : "") + ".";
    }
    this.finish(key, decisionKind(end.decision), text);
  }

  select(key, focus) {
    const row = this.rows.get(key);
    if (!row) return;
    for (const r of this.rows.values()) {
      r.el.classList.toggle("selected", r.el === row.el);
      r.el.setAttribute("aria-current", r.el === row.el ? "true" : "false");
      r.el.tabIndex = r.el === row.el ? 0 : -1;
    }
    this.selected = key;
    if (focus) row.el.focus({ preventScroll: false });
    this.onSelect(row);
  }

  /** Moves the selection by `step` rows (j/k). */
  move(step) {
    const keys = this.keys();
    if (!keys.length) return;
    const at = keys.indexOf(this.selected);
    const next = keys[Math.max(0, Math.min(keys.length - 1, at < 0 ? 0 : at + step))];
    this.select(next, true);
    this.rows.get(next).el.scrollIntoView({ block: "nearest" });
  }

  open() {
    return [...this.rows.values()].filter((r) => !r.done).length;
  }
}

/** Who approved, oldest first, once each, from audit records newest first. */
function approvalsIn(records) {
  const names = [];
  for (const r of [...records].reverse()) {
    if (r.decision !== "approve") continue;
    const who = r.actor || r.principal || "anonymous";
    if (!names.includes(who)) names.push(who);
  }
  return names;
}

/** The outcome class of an audit decision. */
export function decisionKind(decision) {
  switch (decision) {
    case "approve":
      return "ok";
    case "deny":
      return "denied";
    case "expired":
    case "expire":
      return "expired";
    case "edit":
      return "edited";
    case "respond":
      return "responded";
    default:
      return "other";
  }
}
