// Sign-in with OpenID Connect: the authorization code flow with PKCE, run
// in the page against the issuer GET /auth/login names. The token it gets
// (the ID token, else the access token) is sent once to POST /auth/session:
// the server verifies it like any bearer token and answers with its session
// cookie; the page does not keep the token.

import { api } from "./api.js";

const PENDING_KEY = "holdpoint.oidc";

function b64url(bytes) {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function random(n) {
  return b64url(crypto.getRandomValues(new Uint8Array(n)));
}

/** The server's sign-in settings, or null when it has none. */
export async function loginConfig() {
  const got = await api("auth/login");
  return got.ok ? got.result : null;
}

async function discover(issuer) {
  const r = await fetch(issuer + "/.well-known/openid-configuration", { cache: "no-store" });
  if (!r.ok) throw new Error("The sign-in provider's discovery document is unavailable (HTTP " + r.status + ").");
  return r.json();
}

/** Sends the browser to the issuer's authorization endpoint. */
export async function beginLogin(config) {
  const meta = await discover(config.issuer);
  const verifier = random(32);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  const challenge = b64url(new Uint8Array(digest));
  const state = random(16);
  const redirect = location.origin + location.pathname;
  sessionStorage.setItem(
    PENDING_KEY,
    JSON.stringify({ verifier, state, redirect, token: meta.token_endpoint, clientId: config.clientId, search: location.search }),
  );
  const q = new URLSearchParams({
    response_type: "code",
    client_id: config.clientId,
    redirect_uri: redirect,
    scope: config.scope,
    state,
    code_challenge: challenge,
    code_challenge_method: "S256",
  });
  location.assign(meta.authorization_endpoint + "?" + q.toString());
}

/**
 * Finishes a sign-in the issuer redirected back to this page with: the
 * token, or null when the page was not opened by one. Throws with words a
 * person can act on.
 */
export async function finishLogin() {
  const q = new URLSearchParams(location.search);
  if (!q.has("code") && !q.has("error")) return null;
  const saved = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "null");
  sessionStorage.removeItem(PENDING_KEY);
  history.replaceState(null, "", location.pathname + ((saved && saved.search) || ""));
  if (q.has("error")) throw new Error("Sign-in was refused: " + q.get("error") + (q.get("error_description") ? " (" + q.get("error_description") + ")" : ""));
  if (!saved || q.get("state") !== saved.state) throw new Error("This sign-in answer does not belong to this tab's request; sign in again.");
  const body = new URLSearchParams({
    grant_type: "authorization_code",
    code: q.get("code"),
    redirect_uri: saved.redirect,
    client_id: saved.clientId,
    code_verifier: saved.verifier,
  });
  const r = await fetch(saved.token, { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" }, body, cache: "no-store" });
  const got = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error("The sign-in provider refused the code: " + (got.error_description || got.error || "HTTP " + r.status));
  const token = got.id_token || got.access_token;
  if (!token) throw new Error("The sign-in provider answered without a token.");
  return token;
}
