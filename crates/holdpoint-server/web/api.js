// The server's API as the page uses it (docs/reference.md §12).

// The credential is never kept in script-readable storage: the page trades
// it once for the server's HttpOnly, SameSite=Strict session cookie
// (POST /auth/session), which every tab then sends. Older pages kept it in
// storage under this name; it is removed.
const CREDENTIAL_KEY = "holdpoint.credential";
try {
  sessionStorage.removeItem(CREDENTIAL_KEY);
  localStorage.removeItem(CREDENTIAL_KEY);
} catch (_) {
  // storage unavailable: nothing to remove
}

export const session = {
  /** Signs in with an API key or token: the server sets the session cookie. */
  async signIn(credential) {
    pages.clear();
    return api("auth/session", { body: { credential } });
  },
  /** Signs out: the server clears the session cookie. */
  async signOut() {
    pages.clear();
    return api("auth/signout", { method: "POST" });
  },
};

// The last inbox page per URL (cleared on sign-in and sign-out), by its ETag: a refresh sends
// If-None-Match and a 304 (no body) answers with this page, parsed anew so
// that nothing a caller changed in the last copy leaks into the next.
const pages = new Map();
const MAX_PAGES = 20;

/** GET `path`, or POST `options.body` as JSON (or `options.method`); answers {ok, status, result | error}. */
export async function api(path, options) {
  const headers = { Accept: "application/json" };
  const init = { method: (options && options.method) || "GET", headers, cache: "no-store", credentials: "same-origin" };
  if (options && options.body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  const conditional = init.method === "GET" && /^inbox(\?|$)/.test(path);
  const cacheKey = path;
  const cached = conditional ? pages.get(cacheKey) : null;
  if (cached) headers["If-None-Match"] = cached.etag;
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    return { ok: false, status: 0, error: { status: "UNAVAILABLE", message: "The server cannot be reached (" + e.message + ")." } };
  }
  if (response.status === 304 && cached) {
    return { ok: true, status: 304, notModified: true, result: JSON.parse(cached.text).result };
  }
  let body = null;
  try {
    const text = await response.text();
    body = JSON.parse(text);
    const etag = response.headers.get("ETag");
    if (conditional && response.ok && etag) {
      pages.delete(cacheKey);
      pages.set(cacheKey, { etag, text });
      if (pages.size > MAX_PAGES) pages.delete(pages.keys().next().value);
    }
  } catch (_) {
    body = null;
  }
  if (response.ok && body && "result" in body) return { ok: true, status: response.status, result: body.result };
  const error = (body && body.error) || { status: "INTERNAL", message: "HTTP " + response.status };
  return { ok: false, status: response.status, error };
}

/** A query string of the non-empty entries of `params`. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "" || v === false) continue;
    q.set(k, String(v));
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

export function agentPath(agent, tail) {
  return "agents/" + encodeURIComponent(agent) + (tail ? "/" + tail : "");
}

/** Words a person can act on, for an error answer. */
export function explain(answer) {
  const e = answer.error || {};
  switch (answer.status) {
    case 0:
      return e.message;
    case 401:
      return "Sign in: enter an API key or token above. (" + e.message + ")";
    case 403:
      return "Not allowed: " + e.message;
    case 404:
      return "Not found: it is gone, or it belongs to someone else. (" + e.message + ")";
    case 409:
      return "Already answered elsewhere: someone answered this call first, so nothing was done twice.";
    case 413:
      return "Too large: " + e.message;
    default:
      return (e.status ? e.status + ": " : "") + (e.message || "something went wrong");
  }
}

/** The paused request's ref, if any. */
export function refOf(item) {
  const req = item.part && item.part.toolRequest;
  return (req && req.ref) || item.ref;
}

/** A restart directive for `item` with `resumed` data and, optionally, a replaced input. */
export function restartPart(item, resumed, newInput) {
  const req = item.part.toolRequest;
  const toolRequest = { name: req.name };
  if (req.ref !== undefined) toolRequest.ref = req.ref;
  const metadata = { resumed };
  if (newInput !== undefined) {
    toolRequest.input = newInput;
    metadata.replacedInput = req.input === undefined ? null : req.input;
  } else if (req.input !== undefined) {
    toolRequest.input = req.input;
  }
  return { toolRequest, metadata };
}

/** A respond directive giving `output` as the tool's result. */
export function respondPart(item, output) {
  const req = item.part.toolRequest;
  const toolResponse = { name: req.name, output };
  if (req.ref !== undefined) toolResponse.ref = req.ref;
  return { toolResponse, metadata: { interruptResponse: true } };
}

/**
 * Approve or deny through POST /agents/{name}/answer (docs/reference.md
 * §10.7); `approve` is true / false or a decision ("withdraw"); `grant`
 * ({scope, ttl?, uses?}) goes with an approval (§10.9).
 */
export function answer(item, approve, reason, grant) {
  const decision = typeof approve === "string" ? approve : approve ? "approve" : "deny";
  const data = { snapshotId: item.snapshotId, tool: item.tool, decision };
  const ref = refOf(item);
  if (ref !== undefined) data.ref = ref;
  if (reason) data.reason = reason;
  if (grant) data.grant = grant;
  return api(agentPath(item.agent, "answer"), { body: { data } });
}

/** The requester takes back their own pending request (decision `withdraw`). */
export function withdraw(item, reason) {
  return answer(item, "withdraw", reason);
}

/**
 * The standing grants a hold's answer may offer (docs/reference.md §10.9):
 * none unless a rule with quorum 1 whose condition evaluated governs it and
 * the tool does not ask itself; `tool` only for a holder of one of the
 * rule's approver roles.
 */
export function grantScopes(item, roles) {
  const r = item.rule;
  if (!r || r.quorum > 1 || r.error || item.reply || item.refused) return [];
  const scopes = ["session", "principal"];
  if ((roles || []).some((role) => (r.approvers || []).includes(role))) scopes.push("tool");
  return scopes;
}

/** The active standing grants the caller may manage (GET /grants). */
export function grants() {
  return api("grants" + query({ active: true, limit: 1000 }));
}

/** Revokes a standing grant (DELETE /grants/{id}). */
export function revokeGrant(id) {
  return api("grants/" + encodeURIComponent(id), { method: "DELETE" });
}

/** An ordinary resume of `item`'s snapshot with one directive. */
export function resume(item, directive) {
  const resume = directive.toolResponse ? { respond: [directive] } : { restart: [directive] };
  return api(agentPath(item.agent), { body: { data: { resume }, init: { snapshotId: item.snapshotId } } });
}

/** Settles a call in doubt (docs/reference.md §8.3). */
export function settle(item, directive) {
  const resume = directive.toolResponse ? { respond: [directive] } : { restart: [directive] };
  return api(agentPath(item.agent, "settle"), { body: { data: { snapshotId: item.snapshotId, resume } } });
}

/**
 * Whether `item` still waits, as GET /inbox lists it now (live or
 * expired): `{waiting: true, item}` with the server's current view of it,
 * `{waiting: false}` when it is no longer listed, `{error}` (words) when
 * the server could not be asked. An answer the server refused is never
 * taken to mean the hold is gone without asking this.
 */
export async function lookUp(item) {
  const got = await api("inbox" + query({ agent: item.agent, q: item.snapshotId, limit: 1000 }));
  if (!got.ok) return { error: explain(got) };
  const ref = refOf(item) || "";
  const found = got.result.items.find((i) => i.snapshotId === item.snapshotId && i.tool === item.tool && (refOf(i) || "") === ref);
  return found ? { waiting: true, item: Object.assign({ agent: item.agent }, found) } : { waiting: false };
}

/** Whether an agent's answer is a failed turn (HTTP 200, `finishReason: failed`). */
export function failed(out) {
  return !!out && out.finishReason === "failed";
}

/** The error of a failed turn, in words. */
export function failure(out) {
  const e = (out && out.error) || {};
  return (e.status ? e.status + ": " : "") + (e.message || "no reason given");
}

/** Whether `at` (RFC 3339) has passed. */
export function passed(at) {
  return !!at && Date.parse(at) <= Date.now();
}

/** Whether a hold has expired: as the server said, or since by the clock. */
export function isExpired(item) {
  return !!item.expired || passed(item.expiresAt);
}

/** The roles an escalation added to a hold (interrupt data `escalatedTo`). */
export function escalatedTo(item) {
  const to = item.interrupt && item.interrupt.escalatedTo;
  return Array.isArray(to) ? to.filter((r) => typeof r === "string") : [];
}

/** The text of an agent's reply. */
export function outputText(result) {
  const content = (result && result.message && result.message.content) || [];
  return content
    .filter((p) => typeof p.text === "string")
    .map((p) => p.text)
    .join(" ")
    .trim();
}
