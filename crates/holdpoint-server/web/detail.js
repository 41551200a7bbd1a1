// The detail pane of the selected hold: its context (the user's request,
// the tool, the input as fields, who may approve, the expiry, ids, the
// transcript and audit) and the answers (approve, deny, and under
// "Advanced" edit-then-approve and respond). Typed text lives in `drafts`,
// so switching items or a refresh never loses it.

import { agentPath, answer, api, escalatedTo, explain, failed, failure, grantScopes, isExpired, lookUp, outputText, refOf, respondPart, restartPart, resume, withdraw } from "./api.js";
import { $, announce, copyable, countdown, el, fieldList, humanize, pretty, short, summary, when } from "./dom.js";
import { schemaForm } from "./forms.js";
import { approvedBy, decisionKind, keyOf, stillNeeds, tally, waited } from "./queue.js";

const TOOL_APPROVAL = "genkit-middleware/toolApproval";
const snapshots = new Map(); // snapshotId -> Promise<answer>

export const drafts = new Map(); // key -> reason text

function snapshotOf(item) {
  if (!snapshots.has(item.snapshotId)) {
    snapshots.set(item.snapshotId, api(agentPath(item.agent, "getSnapshot"), { body: { data: { snapshotId: item.snapshotId } } }));
  }
  return snapshots.get(item.snapshotId);
}

function interruptText(item) {
  const data = item.interrupt || {};
  if (typeof data.message === "string") return data.message;
  if (typeof data.details === "string") return data.details;
  const keys = Object.keys(data).filter((k) => k !== "expiresAt");
  return keys.length ? pretty(data) : "The tool paused for an answer.";
}

function ruleText(item) {
  const r = item.rule;
  if (!r) {
    const gate = typeof item.interruptedBy === "string" && item.interruptedBy.startsWith(TOOL_APPROVAL);
    return (gate ? "Held by the approval gate" : "The tool asks for an answer") + "; the session's owner" + (item.owner ? " (" + item.owner + ")" : "") + " answers.";
  }
  return (
    'Rule "' + r.rule + '": ' + r.approvers.join(" or ") + " may approve" + (r.selfApproval ? " (the owner too)" : " (not the owner)") + "; " + r.quorum + (r.quorum > 1 ? " approvals needed" : " approval needed")
  );
}

/** The resume data that approves (or denies) `item`, with a reason. */
function replyData(item, approve, reason) {
  if (item.reply) {
    const data = Object.assign({}, approve ? item.reply.approve : item.reply.deny);
    if (reason && item.reply.reason) data[item.reply.reason] = reason;
    return data;
  }
  const data = { toolApproved: approve };
  if (reason) data.reason = reason;
  return data;
}

/** The user's request that led to the paused call: the last user text before it. */
function requestOf(snapshot) {
  const messages = (snapshot.state && snapshot.state.messages) || [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role !== "user") continue;
    const text = (m.content || [])
      .filter((p) => typeof p.text === "string")
      .map((p) => p.text)
      .join(" ")
      .trim();
    if (text) return text;
  }
  return "";
}

/**
 * "What will happen": the tool's preview of the held call (its summary is
 * the heading), its labelled fields, a diff and a count of what it
 * touches, and what it cannot show. Nothing when the tool made none.
 */
function previewOf(item) {
  const p = item.preview;
  if (!p) return null;
  const fields = el("dl", { class: "fields preview-fields" });
  for (const f of p.fields || []) fields.append(el("dt", { text: f.label }), el("dd", {}, el("span", { text: f.value })));
  return el(
    "section",
    { class: "preview", "aria-label": "What will happen" },
    el("h3", { text: "What will happen" }),
    (p.fields || []).length ? fields : null,
    typeof p.touches === "number" ? el("p", { class: "touches", text: "Touches " + p.touches + (p.touches === 1 ? " thing" : " things") + "." }) : null,
    p.diff ? el("pre", { class: "diff mono", text: p.diff }) : null,
    (p.unshown || []).length ? el("p", { class: "notice unshown", text: "The preview cannot show: " + p.unshown.join(", ") + "." }) : null,
  );
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
    return el("div", {}, el("strong", { text: "→ " + part.toolRequest.name }), marks.length ? el("span", { class: "muted", text: " (" + marks.join(", ") + ")" }) : null, el("pre", { class: "mono", text: pretty(part.toolRequest.input) }));
  }
  if (part.toolResponse) return el("div", {}, el("strong", { text: "← " + part.toolResponse.name }), el("pre", { class: "mono", text: pretty(part.toolResponse.output) }));
  return el("pre", { class: "mono", text: pretty(part) });
}

export function transcriptOf(snapshot) {
  const messages = (snapshot.state && snapshot.state.messages) || [];
  return el("ol", { class: "transcript" }, ...messages.map((m) => el("li", { class: m.role }, el("div", { class: "role", text: m.role }), ...(m.content || []).map(describePart))));
}

/**
 * What a decision was about, in words: the input it decided ("Amount:
 * $18,300.00 · To account: acct-4471"), from the record's `input` (an
 * edit, with what it replaced) or the listing's `heldInput`; the hash only
 * when neither is known.
 */
export function inputText(r) {
  const words = (v) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.keys(v).length
        ? Object.entries(v)
            .map(([k, x]) => humanize(k) + ": " + summary({ [k]: x }))
            .join(" · ")
        : "(no input)"
      : summary(v);
  if (r.input !== undefined && r.input !== null) return words(r.input) + (r.originalInput !== undefined ? " (edited from " + words(r.originalInput) + ")" : "");
  if (r.heldInput !== undefined) return words(r.heldInput);
  return "input " + short(r.inputHash);
}

/** A stacked-on-phone table of audit records. */
export function auditTable(records, withSession) {
  const heads = ["When", "Agent", "Tool", "Decision", "By", "On behalf of", "Reason", "Input"];
  if (withSession) heads.splice(2, 0, "Session");
  const rows = records.map((r) => {
    const cells = [
      ["When", when(r.at)],
      ["Agent", r.agent || ""],
      ["Tool", r.tool],
      ["Decision", r.decision + (r.settles ? " (settle)" : "")],
      ["By", r.actor || r.principal || "anonymous"],
      ["On behalf of", r.principal || "anonymous"],
      ["Reason", r.reason || ""],
      ["Input", inputText(r)],
    ];
    if (withSession) cells.splice(2, 0, ["Session", short(r.sessionId)]);
    return el(
      "tr",
      { dataset: { decision: r.decision, tool: r.tool, session: r.sessionId } },
      ...cells.map(([label, text]) => el("td", { "data-label": label, class: label === "Decision" ? "decision decision-" + decisionKind(r.decision) : label === "By" ? "actor" : label === "Input" ? "audit-input" : null, text })),
    );
  });
  return el("table", { class: "table stack" }, el("thead", {}, el("tr", {}, ...heads.map((h) => el("th", { scope: "col", text: h })))), el("tbody", {}, ...rows));
}

export class Detail {
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx; // {queue, tools(), openAudit(filter), refresh()}
    this.row = null;
    this.parts = null;
  }

  /** Shows `row` (rebuilding the pane only when another item is chosen). */
  show(row) {
    if (this.row && this.row.el === row.el) return this.update();
    this.row = row;
    this.build();
  }

  /** Says that a linked hold no longer waits, with a way back to the list. */
  gone(text, showAll) {
    this.row = null;
    this.root.replaceChildren(
      el("h2", { id: "detail-title", text: "The linked hold" }),
      el("p", { id: "link-gone", class: "notice outcome-elsewhere", text }),
      el("button", { type: "button", class: "quiet", text: "Show all holds", onclick: showAll }),
    );
  }

  empty() {
    this.row = null;
    this.root.replaceChildren(el("h2", { id: "detail-title", text: "Nothing selected" }), el("p", { class: "muted", text: "Choose a hold in the list (or press j)." }));
  }

  build() {
    const row = this.row;
    const item = row.item;
    const key = keyOf(item);
    const tools = this.ctx.tools();
    const info = (tools[item.agent] && tools[item.agent][item.tool]) || null;
    const state = el("span", { class: "badge" });
    const tallyEl = el("p", { class: "tally" });
    const expiry = el("p", { class: "expiry-line" });
    const request = el("p", { class: "request", text: "Loading the request…" });
    const result = el("div", { id: "detail-result", class: "notice", hidden: true });
    const reason = el("input", { id: "reason", class: "reason", type: "text", autocomplete: "off", "aria-describedby": "reason-hint" });
    reason.value = drafts.get(key) || "";
    reason.addEventListener("input", () => drafts.set(key, reason.value));
    const approve = el("button", { type: "button", id: "approve", class: "act approve", text: "Approve", "aria-describedby": "detail-title approve-why" });
    const deny = el("button", { type: "submit", id: "deny", class: "act deny", text: "Deny", "aria-describedby": "detail-title" });
    // Why Approve (or every answer) is off, in words; empty when it is on.
    const why = el("p", { id: "approve-why", class: "notice warn why", hidden: true });
    const escalation = el("p", { class: "notice escalated-line", hidden: true });
    approve.addEventListener("click", () => this.decide(true));
    const rule = item.rule || {};
    const me = this.ctx.me ? this.ctx.me() : null;
    const roles = this.ctx.roles ? this.ctx.roles() : [];
    // The rule's preset reasons fill the reason field (one's own stays possible).
    const presets = (rule.denyReasons || []).length
      ? el(
          "select",
          { id: "reason-preset", "aria-label": "Preset reasons", onchange: (e) => ((reason.value = e.target.value), drafts.set(key, reason.value), reason.focus()) },
          el("option", { value: "", text: "Pick a reason…" }),
          ...rule.denyReasons.map((r) => el("option", { value: r, text: r })),
        )
      : null;
    // "Approve, and don't ask again for …": only where the rule allows a grant.
    const scopes = grantScopes(item, roles);
    const scopeWords = {
      session: "this session",
      principal: "all of " + (item.owner || "this requester") + "'s sessions",
      tool: "everyone's " + item.tool + " calls",
    };
    const grantScope = el("select", { id: "grant-scope" }, el("option", { value: "", text: "Just this once" }), ...scopes.map((sc) => el("option", { value: sc, text: "Don't ask again for " + scopeWords[sc] })));
    const grantTtl = el(
      "select",
      { id: "grant-ttl", "aria-label": "For how long" },
      ...[
        ["1h", "for 1 hour"],
        ["8h", "for 8 hours"],
        ["1d", "for 1 day"],
        ["7d", "for 7 days"],
        ["", "until revoked"],
      ].map(([v, t]) => el("option", { value: v, text: t })),
    );
    const grantUses = el("input", { id: "grant-uses", type: "number", min: "1", step: "1", placeholder: "any", inputmode: "numeric" });
    const grantBox = scopes.length
      ? el(
          "fieldset",
          { class: "grant" },
          el("legend", { text: "Approve, and don't ask again for …" }),
          el("div", { class: "row" }, el("label", { for: "grant-scope", class: "visually-hidden", text: "Grant" }), grantScope, grantTtl, el("label", { for: "grant-uses", text: "Uses" }), grantUses),
          el("p", { class: "muted small", text: "A standing grant lets later matching calls run without asking; revoke it under Grants." }),
        )
      : null;
    // Large amounts (the rule's `confirm`) ask once more before approving.
    const confirmYes = el("button", { type: "button", id: "approve-confirm", class: "act approve", text: "Yes, approve", onclick: () => ((this.confirmed = true), (confirmBox.hidden = true), this.decide(true)) });
    const confirmBox = el(
      "div",
      { id: "confirm-box", class: "notice warn", role: "alertdialog", "aria-labelledby": "confirm-text", hidden: true },
      el("p", { id: "confirm-text", text: "Approve " + (item.summary || summary(item.input)) + "? Rule \"" + (rule.rule || "") + "\" asks you to confirm." }),
      el("div", { class: "row" }, confirmYes, el("button", { type: "button", class: "quiet", id: "approve-cancel", text: "Cancel", onclick: () => ((confirmBox.hidden = true), approve.focus()) })),
    );
    // The requester may take back their own request, whatever the rule.
    const withdrawButton =
      item.owner && me && item.owner === me
        ? el("button", { type: "button", id: "withdraw", class: "act quiet", text: "Withdraw my request", onclick: () => this.withdraw() })
        : null;
    const form = el(
      "form",
      { class: "answer", onsubmit: (e) => (e.preventDefault(), this.decide(false)) },
      el("label", { for: "reason", text: "Reason" + (rule.reasonRequired ? " (required to deny)" : "") }),
      el("div", { class: "row" }, reason, presets, approve, deny, withdrawButton),
      grantBox,
      confirmBox,
      why,
      el("p", { id: "reason-hint", class: "muted small", text: "Recorded in the audit; the agent hears a denial's reason." + (rule.reasonRequired ? " This rule needs a reason to deny." : "") + " Enter denies." }),
    );
    this.confirmed = false;

    const editForm = schemaForm(info && info.inputSchema, item.input);
    const respondForm = schemaForm(info && info.outputSchema, undefined);
    const editButton = el("button", { type: "button", class: "act", text: "Approve edited input", onclick: () => this.edit(editForm) });
    const respondButton = el("button", { type: "button", class: "act", text: "Respond without running", onclick: () => this.respond(respondForm) });
    const advanced = el(
      "details",
      { class: "advanced" },
      el("summary", { text: "Advanced: edit then approve, or respond" }),
      el(
        "fieldset",
        {},
        el("legend", { text: "Edit the input, then approve" }),
        el("p", { class: "muted small", text: "The call is restarted with the new input (recorded as an edit); a rule may hold the revised call again." }),
        editForm.node,
        editButton,
      ),
      el(
        "fieldset",
        {},
        el("legend", { text: "Respond instead" }),
        el("p", { class: "muted small", text: "Give the tool's result yourself; the tool does not run (recorded as respond)." }),
        respondForm.node,
        respondButton,
      ),
    );
    const transcript = el("details", { class: "inline-transcript" }, el("summary", { text: "Transcript" }), el("div", { class: "transcript-body", text: "Loading…" }));
    const audit = el("details", { class: "inline-audit" }, el("summary", { text: "Audit of this session" }), el("div", { class: "audit-body", text: "Loading…" }));
    audit.addEventListener("toggle", () => audit.open && this.loadAudit(audit.lastChild));

    this.root.replaceChildren(
      ...[
      el("div", { class: "detail-head" }, el("h2", { id: "detail-title", text: item.summary || item.tool + " · " + item.agent }), state),
      el("p", { class: "requester muted" }, item.owner ? el("span", {}, "Requested by ", el("strong", { text: item.owner }), " · ") : null, item.tool + " · " + item.agent),
      el("p", { class: "interrupt", text: interruptText(item) }),
      el("h3", { text: "What the user asked" }),
      request,
      info && info.description ? el("div", {}, el("h3", { text: "The tool" }), el("p", { class: "tool-description", text: info.description })) : null,
      previewOf(item),
      el("h3", { text: "Input" }),
      fieldList(item.input),
      el("h3", { text: "Who may approve" }),
      el("p", { class: "rule", text: ruleText(item) }),
      tallyEl,
      escalation,
      expiry,
      el("div", { class: "ids" }, copyable("Session", item.sessionId), copyable("Snapshot", item.snapshotId), refOf(item) ? copyable("Call", refOf(item)) : null),
      form,
      result,
      advanced,
      transcript,
      audit,
      el("p", {}, el("button", { type: "button", class: "link", id: "open-audit", text: "Open this session in the full audit", onclick: () => this.ctx.openAudit({ sessionId: item.sessionId, agent: item.agent }) })),
      ].filter(Boolean),
    );
    this.parts = { state, tallyEl, expiry, escalation, why, request, result, reason, approve, deny, editButton, respondButton, transcript, withdrawButton, grantScope, grantTtl, grantUses, confirmBox };
    this.update();
    snapshotOf(item).then((got) => {
      if (!this.row || this.row.el !== row.el) return;
      if (!got.ok) {
        request.textContent = "(" + explain(got) + ")";
        transcript.lastChild.textContent = explain(got);
        return;
      }
      request.textContent = requestOf(got.result) || "(no text)";
      transcript.lastChild.replaceChildren(transcriptOf(got.result));
    });
  }

  /**
   * Patches the changing parts (state, tally, expiry, escalation) in
   * place, and turns off what the signed-in person may no longer do, with
   * the reason in words.
   */
  update() {
    if (!this.row || !this.parts) return;
    const item = this.row.item;
    const p = this.parts;
    const done = this.row.done;
    const expired = isExpired(item);
    const me = this.ctx.me ? this.ctx.me() : null;
    p.state.className = "badge " + (done ? "outcome-" + done.kind : expired ? "expired" : "live");
    p.state.textContent = done ? (done.kind === "ok" ? "approved" : done.kind) : expired ? "expired" : "waiting";
    const r = item.rule;
    const needs = stillNeeds(item, me);
    p.tallyEl.textContent = r && r.quorum > 1 ? "Approvals: " + tally(item.approvals, r.quorum) + (needs ? " — " + needs : "") : "";
    p.tallyEl.hidden = !(r && r.quorum > 1);
    const to = escalatedTo(item);
    p.escalation.hidden = !to.length;
    p.escalation.textContent = to.length ? "Escalated: nobody answered in time, so " + to.join(", ") + " may answer it too." : "";
    const closed = !!done;
    const mine = approvedBy(item, me);
    let why = "";
    if (closed) why = "";
    else if (item.refused) why = "You may not answer this one: " + item.refused;
    else if (expired) why = "Approve is off: this hold expired" + (item.expiresAt ? " at " + when(item.expiresAt) : "") + " and can no longer be approved. A denial still reaches the agent.";
    else if (item.unapprovable) why = "Approve is off: this call cannot be approved as is — " + item.unapprovable + ". Deny it, or edit it (the edited call is held again).";
    else if (mine) why = "Approve is off: you approved this already; " + (needs || "it needs another approver") + ".";
    p.approve.disabled = closed || !!item.refused || expired || !!item.unapprovable || mine || this.sending;
    p.deny.disabled = closed || !!item.refused || this.sending;
    p.editButton.disabled = closed || !!item.refused || expired || this.sending;
    // Responding runs nothing but settles the call as done: an approval too.
    p.respondButton.disabled = closed || !!item.refused || !!item.unapprovable || this.sending;
    if (p.withdrawButton) p.withdrawButton.disabled = closed || this.sending;
    p.why.textContent = why;
    p.why.hidden = !why;
    this.tick();
    // A retired hold says how it ended, unless an answer given here said so.
    if (done && p.result.dataset.done !== "true") this.notice(done.kind, done.text, "row");
  }

  tick() {
    if (!this.row || !this.parts) return;
    const item = this.row.item;
    const expired = isExpired(item);
    // An expired hold's clock stops: it says when it expired, not "ago".
    this.parts.expiry.textContent =
      (item.expiresAt
        ? expired
          ? "Expired: it can no longer be approved; a denial still reaches the agent. It expired at " + when(item.expiresAt) + " (" + waited(item) + "). "
          : countdown(item.expiresAt) + ". "
        : "No expiry. ") + "Held since " + when(item.heldSince) + ".";
    this.parts.expiry.className = "expiry-line" + (expired ? " notice expired" : "");
    // It expired while shown: Approve goes off (update() sets it before calling here).
    if (expired && !this.parts.approve.disabled && !this.row.done && !this.sending) this.update();
  }

  notice(kind, text, from) {
    const box = this.parts.result;
    box.className = "notice outcome-" + kind;
    box.textContent = text;
    box.dataset.from = from || "here";
    box.dataset.done = String(!!(this.row && this.row.done));
    box.hidden = false;
  }

  focusReason() {
    if (this.parts) this.parts.reason.focus();
  }

  focusApprove() {
    if (this.parts && !this.parts.approve.disabled) {
      this.parts.approve.focus();
      announce("Press Enter to approve " + this.row.item.tool + ".");
    }
  }

  /**
   * Sends one answer and shows what the server really did: a refusal or a
   * failed turn is red and leaves the hold as it is; a hold is retired
   * only when it no longer waits (asked of the server, never assumed from
   * a 404 or 409).
   */
  async send(label, run) {
    const row = this.row;
    const item = row.item;
    const key = keyOf(item);
    const p = this.parts;
    const me = this.ctx.me ? this.ctx.me() : null;
    this.sending = true;
    row.answering = true;
    this.update();
    this.notice("pending", "Sending…");
    const got = await run();
    const what = item.tool + " (" + item.agent + ", session " + short(item.sessionId) + ")";
    const settleRow = (kind, text) => {
      this.ctx.queue.finish(key, kind, text);
      drafts.delete(key);
    };
    // After a refusal or a failed turn: does the hold still wait?
    const stillWaits = async () => {
      const now = await lookUp(item);
      if (now.waiting) {
        this.ctx.queue.update(row, Object.assign({}, row.item, now.item));
        return " The hold is still waiting: nothing was decided.";
      }
      if (now.error) return " Whether it still waits is not known (" + now.error + ").";
      return null;
    };
    let kind;
    let text;
    if (!got.ok) {
      const e = got.error || {};
      kind = "bad";
      text = explain(got);
      if (got.status === 400 && /expired/i.test(e.message || "")) {
        kind = "expired";
        text = "Expired: this approval can no longer be approved (" + e.message + ").";
      } else if (got.status === 409 || got.status === 404) {
        const refused = "Not done: the server refused it (HTTP " + got.status + (e.status ? " " + e.status : "") + ": " + (e.message || "no reason given") + ").";
        const tail = await stillWaits();
        if (tail === null) {
          // Gone: the audit says who answered it, and how.
          await this.ctx.queue.goneElsewhere(row, true);
          const decided = row.done && row.done.kind !== "elsewhere";
          kind = decided ? "elsewhere" : "bad";
          text = (decided ? explain(got) : refused) + (row.done ? " " + row.done.text : "");
        } else {
          text = refused + tail;
        }
      } else {
        // Any other refusal or error: say it, and whether the hold still waits.
        if (got.status >= 500) text = label.failed + " The server answered: " + text;
        const tail = await stillWaits();
        if (tail === null) {
          text += " It no longer waits.";
          settleRow(kind, text);
        } else {
          text += tail;
        }
      }
    } else if (got.result && got.result.decided === false) {
      const approvals = got.result.approvals || [];
      const quorum = got.result.quorum || (item.rule && item.rule.quorum) || approvals.length;
      const next = Object.assign({}, row.item, { approvals, forMe: false });
      next.rule = Object.assign({}, row.item.rule || {}, { quorum });
      kind = "partial";
      text =
        tally(approvals, quorum) +
        " approvals recorded" +
        (got.result.counted === false ? " (yours was counted already)" : "") +
        "; the call runs once the quorum is met: " +
        (stillNeeds(next, me) || "waiting for another approver") +
        ".";
      this.ctx.queue.update(row, next);
    } else {
      const out = got.result && got.result.decided === true ? got.result.output : got.result;
      const said = outputText(out);
      const tail = said ? " The agent said: " + said : "";
      if (failed(out)) {
        kind = "bad";
        text = label.failed + " The turn failed: " + failure(out) + ".";
        const waits = await stillWaits();
        if (waits === null) settleRow(kind, text);
        else text += waits;
      } else {
        kind = label.kind;
        let done = label.done;
        const r = item.rule;
        if (label.kind === "ok" && r && r.quorum > 1) {
          const names = (item.approvals || []).map((a) => a.actor);
          if (me && !names.includes(me)) names.push(me);
          done = "Approved " + names.length + " of " + r.quorum + ": " + names.join(", ") + ": the call ran.";
        }
        text = done + (out && out.finishReason === "interrupted" ? " The agent paused again: a new hold is waiting." : "") + tail;
        settleRow(kind, text);
      }
    }
    this.sending = false;
    row.answering = false;
    this.update();
    // The pane may show another hold by now: the answer's words go to its own.
    if (this.row === row) this.notice(kind, text);
    announce(what + ": " + text);
    this.ctx.log(kind, what + ": " + text);
    this.ctx.refresh();
    if (this.ctx.answered) this.ctx.answered(row, kind, text);
  }

  decide(approve) {
    if (!this.row || (approve ? this.parts.approve.disabled : this.parts.deny.disabled)) return;
    const p = this.parts;
    const reason = p.reason.value.trim();
    const item = this.row.item;
    const rule = item.rule || {};
    if (!approve && rule.reasonRequired && !reason) {
      this.notice("bad", 'A reason is required to deny under rule "' + rule.rule + '": type or pick one, then deny.');
      p.reason.focus();
      announce("A reason is required to deny.");
      return;
    }
    if (approve && rule.confirm && !this.confirmed) {
      p.confirmBox.hidden = false;
      $("approve-confirm").focus();
      announce($("confirm-text").textContent);
      return;
    }
    this.confirmed = false;
    let grant = null;
    if (approve && p.grantScope.value) {
      grant = { scope: p.grantScope.value };
      if (p.grantTtl.value) grant.ttl = p.grantTtl.value;
      const uses = Number(p.grantUses.value);
      if (p.grantUses.value && Number.isInteger(uses) && uses >= 1) grant.uses = uses;
    }
    const granted = grant ? " Later matching calls will not ask (" + p.grantScope.selectedOptions[0].text.replace(/^Don't ask again for /, "") + (grant.ttl ? ", " + p.grantTtl.selectedOptions[0].text : "") + (grant.uses ? ", " + grant.uses + " uses" : "") + ")." : "";
    return this.send(
      approve
        ? { kind: "ok", done: "Approved: the call ran." + granted, failed: "Approved, but it did not complete." }
        : { kind: "denied", done: "Denied" + (reason ? ' with reason "' + reason + '"' : "") + ": the call did not run.", failed: "Denied, but the turn did not complete." },
      () => answer(item, approve, reason, grant),
    );
  }

  /** The requester takes back their own request (audited `withdraw`). */
  withdraw() {
    const p = this.parts;
    if (!this.row || !p.withdrawButton || p.withdrawButton.disabled) return;
    const item = this.row.item;
    const reason = p.reason.value.trim();
    return this.send({ kind: "withdrawn", done: "Withdrawn: you took back your request; the call did not run and the agent was told.", failed: "Withdrawn, but the turn did not complete." }, () => withdraw(item, reason));
  }

  edit(form) {
    const got = form.read();
    if (got.error) return this.notice("bad", got.error);
    const item = this.row.item;
    const reason = this.parts.reason.value.trim();
    return this.send({ kind: "edited", done: "Edited: restarted with the new input.", failed: "The edit did not complete." }, () => resume(item, restartPart(item, replyData(item, true, reason), got.value)));
  }

  respond(form) {
    const got = form.read();
    if (got.error) return this.notice("bad", got.error);
    const item = this.row.item;
    return this.send({ kind: "responded", done: "Responded: the tool did not run; the agent got your result.", failed: "The response did not complete." }, () => resume(item, respondPart(item, got.value)));
  }

  async loadAudit(box) {
    const item = this.row.item;
    const got = await api(agentPath(item.agent, "audit") + "?sessionId=" + encodeURIComponent(item.sessionId));
    if (!got.ok) return box.replaceChildren(el("p", { class: "notice bad", text: explain(got) }));
    box.replaceChildren(got.result.length ? auditTable(got.result, false) : el("p", { class: "muted", text: "No decisions recorded for this session yet." }));
  }
}

export function focusResult() {
  const r = $("detail-result");
  if (r) r.focus();
}
