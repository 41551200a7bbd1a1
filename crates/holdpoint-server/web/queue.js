// The queue: a compact list of holds, patched in place. Rows are never
// moved or rebuilt by a refresh (a new hold is inserted next to its
// neighbour in the server's order), so focus and selection stay put; a hold
// answered elsewhere stays, greyed, saying who answered and how. A row is
// retired only once the server no longer lists the hold (a refused answer
// never retires it), and an expired hold is never counted as waiting: its
// clock stops at its expiry.
//
// A row says what is at stake ("$18,300.00 → acct-4471 · bob · 0/2 · waiting
// 4 min", from the server's `summary`, the words notifications use); its
// heading and checkbox label are that summary. A hold that arrives above
// the selected row is held back behind "n new — show", so rows never move
// under the cursor. Rows can be picked (checkboxes) for bulk answers.

import { api, escalatedTo, isExpired, lookUp, query, refOf } from "./api.js";
import { age, countdown, el, short, summary, when } from "./dom.js";

/** What is at stake in a hold, in words: the server's summary (input as a fallback). */
export function summaryOf(item) {
  return item.summary || summary(item.input) || item.tool;
}

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
    this.picked = new Set(); // keys picked for a bulk answer
    this.held = 0; // new rows held back above the selection ("n new — show")
    this.onPick = null;
    this.onHeld = null;
  }

  clear() {
    this.rows.clear();
    this.list.replaceChildren();
    this.selected = null;
    this.picked.clear();
    this.held = 0;
    if (this.onPick) this.onPick();
    if (this.onHeld) this.onHeld(0);
  }

  /** Keys in display order (rows held back are not shown, so not counted). */
  keys() {
    return [...this.list.children].filter((li) => !li.hidden).map((li) => li.dataset.key);
  }

  /** Shows the new rows held back above the selection. */
  showHeld() {
    for (const li of this.list.children) li.hidden = false;
    this.held = 0;
    if (this.onHeld) this.onHeld(0);
  }

  /** The selected row's place: {n, of} among the rows shown (n from 1; 0: none). */
  position() {
    const keys = this.keys();
    return { n: keys.indexOf(this.selected) + 1, of: keys.length };
  }

  /** Picks or unpicks `key` for a bulk answer. */
  pick(key, on) {
    const row = this.rows.get(key);
    if (!row) return;
    const want = on === undefined ? !this.picked.has(key) : on;
    if (want && !row.done) this.picked.add(key);
    else this.picked.delete(key);
    row.parts.pick.checked = this.picked.has(key);
    row.el.classList.toggle("picked", this.picked.has(key));
    if (this.onPick) this.onPick();
  }

  /** The picked rows still open, in display order. */
  pickedRows() {
    return this.keys()
      .filter((k) => this.picked.has(k))
      .map((k) => this.rows.get(k))
      .filter((r) => r && !r.done);
  }

  /** The next open row after `key` (else the one before), for auto-advance. */
  nextOpen(key) {
    const keys = this.keys();
    const at = keys.indexOf(key);
    const open = (k) => k !== key && !this.rows.get(k).done;
    return keys.slice(at + 1).find(open) || keys.slice(0, Math.max(0, at)).reverse().find(open) || null;
  }

  build(item) {
    const key = keyOf(item);
    const id = "item-h-" + ++ids;
    const what = summaryOf(item);
    const heading = el("h3", { id, class: "item-title", text: what });
    const badge = el("span", { class: "badge" });
    const count = el("span", { class: "tally-short" });
    const waited = el("span", { class: "age", dataset: { since: item.heldSince } });
    const expiry = el("span", { class: "expiry" });
    const escalation = el("span", { class: "badge escalated", hidden: true });
    const outcome = el("p", { class: "item-outcome", hidden: true });
    const pick = el("input", {
      type: "checkbox",
      class: "pick-box",
      "aria-label": "Pick for a bulk answer: " + what + (item.owner ? ", " + item.owner : ""),
      onclick: (e) => e.stopPropagation(),
      onchange: (e) => this.pick(key, e.target.checked),
    });
    const section = el(
      "section",
      { class: "item-body", "aria-labelledby": id },
      el("div", { class: "item-head" }, heading, escalation, badge),
      el(
        "p",
        { class: "item-meta muted" },
        item.owner ? el("span", { class: "owner", title: "requested by " + item.owner, text: "for " + item.owner }) : null,
        count,
        waited,
        expiry,
        el("span", { class: "tool", text: item.tool + " · " + item.agent }),
        el("span", { class: "mono session", title: item.sessionId, text: "session " + short(item.sessionId) }),
      ),
      outcome,
    );
    const li = el(
      "li",
      {
        class: "item",
        tabindex: "-1",
        dataset: { key, agent: item.agent, tool: item.tool, session: item.sessionId, snapshot: item.snapshotId },
        onclick: (e) => {
          if (e.target.closest(".pick")) return;
          this.select(key, true);
          if (this.onTap) this.onTap(key);
        },
        onfocus: () => {
          if (this.selected !== key) this.select(key, false);
        },
      },
      el("label", { class: "pick", title: "Pick for a bulk answer" }, pick),
      section,
    );
    const row = { item, el: li, parts: { badge, count, waited, expiry, escalation, outcome, pick }, done: null };
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
    const r = item.rule;
    row.parts.count.textContent = r && r.quorum > 1 ? (item.approvals || []).length + "/" + r.quorum : "";
    row.parts.count.title = r && r.quorum > 1 ? tally(item.approvals, r.quorum) + " approvals" : "";
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
    // Rows shown before this merge: a new one above the selection is held back.
    const selectedEl = this.selected && this.rows.get(this.selected) ? this.rows.get(this.selected).el : null;
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
        if (selectedEl && row.el.compareDocumentPosition(selectedEl) & Node.DOCUMENT_POSITION_FOLLOWING) {
          row.el.hidden = true;
          this.held++;
        }
      }
      prev = row;
    }
    if (this.onHeld) this.onHeld(this.held);
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
    row.parts.pick.checked = false;
    row.parts.pick.disabled = true;
    row.el.classList.remove("picked");
    if (this.picked.delete(key) && this.onPick) this.onPick();
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

  /** Whether the selection is on the last row shown. */
  atEnd() {
    const keys = this.keys();
    return keys.length > 0 && keys[keys.length - 1] === this.selected;
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
