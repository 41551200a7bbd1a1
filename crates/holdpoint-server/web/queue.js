// The queue: a compact list of holds, patched in place. Rows are never
// moved or rebuilt by a refresh (a new hold is inserted next to its
// neighbour in the server's order), so focus and selection stay put; a hold
// answered elsewhere stays, greyed, saying who answered and how.

import { api, query, refOf } from "./api.js";
import { age, countdown, el, short, summary } from "./dom.js";

let ids = 0;

export function keyOf(item) {
  return item.agent + "/" + item.snapshotId + "/" + item.tool + "/" + (refOf(item) || "");
}

export function tally(approvals, quorum) {
  const who = (approvals || []).map((a) => a.actor);
  return who.length + " of " + quorum + (who.length ? ": " + who.join(", ") : "");
}

/** The state words of a hold (live, expired, partially approved). */
function stateOf(item) {
  if (item.expired) return { cls: "expired", text: "expired" };
  if (item.rule && item.rule.quorum > 1 && item.approvals && item.approvals.length) return { cls: "partial", text: tally(item.approvals, item.rule.quorum) };
  if (item.forMe) return { cls: "mine", text: "waiting for you" };
  return { cls: "live", text: item.refused ? "you may not answer" : "waiting" };
}

export class Queue {
  constructor(list, onSelect) {
    this.list = list;
    this.rows = new Map(); // key -> {item, el, parts, done}
    this.onSelect = onSelect;
    this.selected = null;
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
    const outcome = el("p", { class: "item-outcome", hidden: true });
    const section = el(
      "section",
      { class: "item-body", "aria-labelledby": id },
      el("div", { class: "item-head" }, heading, badge),
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
    const row = { item, el: li, parts: { badge, waited, expiry, outcome }, done: null };
    this.update(row, item);
    return row;
  }

  /** Patches a row's changing parts in place. */
  update(row, item) {
    row.item = item;
    const s = stateOf(item);
    if (!row.done) {
      row.parts.badge.className = "badge " + s.cls;
      row.parts.badge.textContent = s.text;
      row.el.classList.toggle("expired", !!item.expired);
    }
    this.tick(row);
  }

  tick(row) {
    row.parts.waited.textContent = "waiting " + age(row.item.heldSince);
    row.parts.expiry.textContent = row.item.expiresAt && !row.done ? countdown(row.item.expiresAt) : "";
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

  async goneElsewhere(row) {
    const key = keyOf(row.item);
    row.done = { kind: "elsewhere", text: "Answered elsewhere…" };
    this.finish(key, "elsewhere", "Answered elsewhere; looking up who…");
    const item = row.item;
    const got = await api("audit" + query({ agent: item.agent, snapshotId: item.snapshotId, limit: 20 }));
    let text = "Answered elsewhere (the session is no longer visible to you).";
    if (got.ok) {
      // Newest first: the decision that ended the hold.
      const rec = got.result.items.find((r) => r.tool === item.tool);
      if (rec) {
        const who = rec.actor || rec.principal || "someone";
        text = "Answered elsewhere: " + who + " — " + rec.decision + (rec.reason ? " (" + rec.reason + ")" : "") + ".";
        row.done.kind = rec.decision;
      }
    }
    this.finish(key, row.done.kind === "elsewhere" ? "elsewhere" : decisionKind(row.done.kind), text);
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
