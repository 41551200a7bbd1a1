// Small DOM helpers. Everything shown comes from the server and is inserted
// as text or attributes, never as HTML.

export function $(id) {
  return document.getElementById(id);
}

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function pretty(value) {
  if (value === undefined) return "";
  try {
    return JSON.stringify(value, null, 2);
  } catch (_) {
    return String(value);
  }
}

export function short(id) {
  return id && id.length > 13 ? id.slice(0, 8) + "…" : id || "";
}

function span(seconds) {
  if (seconds < 60) return seconds + " s";
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return minutes + " min" + (minutes < 10 && seconds % 60 ? " " + (seconds % 60) + " s" : "");
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return hours + " h" + (minutes % 60 ? " " + (minutes % 60) + " min" : "");
  return Math.floor(hours / 24) + " days";
}

/** How long since `since` (an RFC 3339 time). */
export function age(since) {
  return span(Math.max(0, Math.round((Date.now() - Date.parse(since)) / 1000)));
}

/** "expires in 4 min 10 s" / "expired 3 s ago" for an RFC 3339 time. */
export function countdown(at) {
  const seconds = Math.round((Date.parse(at) - Date.now()) / 1000);
  return seconds > 0 ? "expires in " + span(seconds) : "expired " + span(-seconds) + " ago";
}

export function when(at) {
  const d = new Date(at);
  return isNaN(d) ? String(at) : d.toLocaleString();
}

/** Announces `text` in the page's live region (screen readers read it). */
export function announce(text) {
  const live = $("live");
  live.textContent = "";
  // A new text node each time, so the same words are announced again.
  setTimeout(() => (live.textContent = text), 30);
}

/** A value and a "Copy" button that copies it. */
export function copyable(label, value) {
  const code = el("code", { class: "mono id", text: value });
  const button = el("button", {
    type: "button",
    class: "quiet small copy",
    "aria-label": "Copy " + label,
    text: "Copy",
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(value);
        announce(label + " copied");
      } catch (_) {
        const range = document.createRange();
        range.selectNodeContents(code);
        const selection = getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        announce(label + " selected; press Ctrl+C to copy");
      }
    },
  });
  return el("div", { class: "copyable" }, el("span", { class: "muted", text: label + " " }), code, button);
}

const AMOUNT_KEY = /amount|price|total|sum|balance|cost|value|usd|eur/i;

/** Whether `key` names an amount of money. */
export function isAmountKey(key) {
  return AMOUNT_KEY.test(key);
}

/** A number formatted for reading (2 decimals for amounts). */
export function formatNumber(key, n) {
  return isAmountKey(key)
    ? n.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })
    : n.toLocaleString("en-US");
}

/** Amounts at or above this are highlighted. */
export const LARGE = 10000;

/** An input object as a readable list of fields. */
export function fieldList(value) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return el("pre", { class: "input mono", text: pretty(value) });
  }
  const dl = el("dl", { class: "fields" });
  for (const [key, v] of Object.entries(value)) {
    let shown;
    let large = false;
    if (typeof v === "number") {
      large = isAmountKey(key) && Math.abs(v) >= LARGE;
      shown = el(
        "span",
        { class: "num" + (large ? " large" : "") },
        (isAmountKey(key) ? "$" : "") + formatNumber(key, v),
        large ? el("span", { class: "flag", text: "large amount" }) : null,
      );
    } else if (typeof v === "string") {
      shown = el("span", { text: v });
    } else if (typeof v === "boolean") {
      shown = el("span", { text: v ? "yes" : "no" });
    } else {
      shown = el("pre", { class: "mono", text: pretty(v) });
    }
    dl.append(el("div", { class: "field" + (large ? " large" : ""), dataset: { key } }, el("dt", { text: humanize(key) }), el("dd", {}, shown)));
  }
  if (!dl.children.length) dl.append(el("div", { class: "field" }, el("dt", { text: "input" }), el("dd", { text: "(none)" })));
  return dl;
}

/** `toAccount` → "To account". */
export function humanize(key) {
  const words = String(key)
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/[_-]+/g, " ")
    .trim()
    .toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** The largest amount in an input (for the list's compact summary). */
export function summary(input) {
  if (input === null || typeof input !== "object" || Array.isArray(input)) return pretty(input).slice(0, 80);
  return Object.entries(input)
    .map(([k, v]) => (typeof v === "number" ? (isAmountKey(k) ? "$" : "") + formatNumber(k, v) : typeof v === "string" ? v : JSON.stringify(v)))
    .join(" · ")
    .slice(0, 120);
}
