// The standing grants the caller may manage (GET /grants, active only),
// each with what it covers, for how long and how many uses are left, and
// Revoke (DELETE /grants/{id}; it stops matching at once).

import { explain, grants, revokeGrant } from "./api.js";
import { $, announce, el, when } from "./dom.js";

const SCOPE = {
  session: (g) => "session " + g.sessionId,
  principal: (g) => "every session of " + (g.principal || "anonymous"),
  tool: () => "everyone's calls",
};

/** What a grant covers, in words. */
export function grantText(g) {
  const scope = (SCOPE[g.scope] || (() => g.scope))(g);
  const parts = [g.tool + " of " + g.agent + ", " + scope];
  if (g.when) parts.push("when " + g.when);
  parts.push(g.expiresAt ? "until " + when(g.expiresAt) : "until revoked");
  parts.push(g.usesLeft === undefined || g.usesLeft === null ? "unlimited uses" : g.usesLeft + " uses left");
  parts.push("granted by " + g.grantedBy + (g.rule && g.rule.rule ? ' under rule "' + g.rule.rule + '"' : ""));
  return parts.join(" · ");
}

export class GrantsView {
  constructor() {
    this.seq = 0;
    $("grants-reload").addEventListener("click", () => this.load());
  }

  async load() {
    const seq = ++this.seq;
    $("grants-status").textContent = "Loading…";
    const got = await grants();
    if (seq !== this.seq) return;
    if (!got.ok) {
      $("grants-status").textContent = explain(got);
      return;
    }
    const list = got.result || [];
    $("grants-count").textContent = String(list.length);
    $("grants-status").textContent = list.length ? list.length + " active standing grant" + (list.length === 1 ? "" : "s") + "." : "No active standing grants.";
    $("grants-list").replaceChildren(...list.map((g) => this.card(g)));
  }

  card(g) {
    const status = el("span", { class: "grant-status", role: "status" });
    const revoke = el("button", {
      type: "button",
      class: "act deny",
      text: "Revoke",
      "aria-label": "Revoke the grant for " + g.tool + " (" + g.scope + ")",
      onclick: async () => {
        revoke.disabled = true;
        status.textContent = "Revoking…";
        const got = await revokeGrant(g.id);
        if (!got.ok) {
          revoke.disabled = false;
          status.textContent = "Not revoked: " + explain(got);
          return;
        }
        li.classList.add("done");
        status.textContent = "Revoked: later calls are held again.";
        announce("Grant for " + g.tool + " revoked.");
      },
    });
    const li = el("li", { class: "grant-card", dataset: { id: g.id, scope: g.scope, tool: g.tool } }, el("p", { class: "grant-text", text: grantText(g) }), el("div", { class: "row" }, revoke, status));
    return li;
  }
}
