// Forms built from a JSON Schema (a tool's input or output schema): one
// field per property of an object schema, a JSON text area for anything
// else. `read()` gives the value back, or an error naming the field.

import { el, humanize, pretty } from "./dom.js";

let counter = 0;

function resolve(schema, root) {
  if (schema && typeof schema.$ref === "string" && root) {
    const path = schema.$ref.replace(/^#\//, "").split("/");
    let node = root;
    for (const p of path) node = node && node[p];
    if (node) return node;
  }
  return schema || {};
}

function kindOf(schema) {
  if (Array.isArray(schema.enum)) return "enum";
  let t = schema.type;
  if (Array.isArray(t)) t = t.find((x) => x !== "null");
  if (t === "integer" || t === "number" || t === "string" || t === "boolean") return t;
  return "json";
}

function field(name, schema, value, required) {
  const id = "f" + ++counter;
  const kind = kindOf(schema);
  const label = el("label", { for: id, text: humanize(name) + (required ? "" : " (optional)") });
  let input;
  if (kind === "boolean") {
    input = el("input", { id, type: "checkbox" });
    input.checked = value === true;
  } else if (kind === "enum") {
    input = el("select", { id }, ...schema.enum.map((v) => el("option", { value: JSON.stringify(v), text: String(v) })));
    if (value !== undefined) input.value = JSON.stringify(value);
  } else if (kind === "json") {
    input = el("textarea", { id, rows: 2, spellcheck: "false" });
    input.value = value === undefined ? "" : pretty(value);
  } else {
    input = el("input", { id, type: kind === "string" ? "text" : "number", step: kind === "integer" ? "1" : "any" });
    input.value = value === undefined || value === null ? "" : String(value);
  }
  const read = () => {
    if (kind === "boolean") return { value: input.checked };
    if (kind === "enum") return { value: JSON.parse(input.value) };
    const text = input.value.trim();
    if (!text) return required ? { error: humanize(name) + " is required" } : { skip: true };
    if (kind === "string") return { value: input.value };
    if (kind === "json") {
      try {
        return { value: JSON.parse(text) };
      } catch (e) {
        return { error: humanize(name) + " is not valid JSON: " + e.message };
      }
    }
    const n = Number(text);
    if (!Number.isFinite(n) || (kind === "integer" && !Number.isInteger(n))) return { error: humanize(name) + " must be " + (kind === "integer" ? "a whole number" : "a number") };
    return { value: n };
  };
  return { node: el("div", { class: "form-field", dataset: { field: name } }, label, input), read };
}

/** A form for `schema` filled with `value`: {node, read() → {value} | {error}}. */
export function schemaForm(schema, value) {
  const root = schema || {};
  const s = resolve(root, root);
  if (kindOf(s) === "json" && s.properties && typeof s.properties === "object") {
    const required = new Set(s.required || []);
    const current = value && typeof value === "object" ? value : {};
    const fields = Object.entries(s.properties).map(([name, sub]) => [name, field(name, resolve(sub, root), current[name], required.has(name))]);
    return {
      node: el("div", { class: "schema-form" }, ...fields.map(([, f]) => f.node)),
      read() {
        const out = {};
        for (const [name, f] of fields) {
          const got = f.read();
          if (got.error) return got;
          if (!got.skip) out[name] = got.value;
        }
        return { value: out };
      },
    };
  }
  const f = field("value", s, value, true);
  return { node: el("div", { class: "schema-form" }, f.node), read: f.read };
}
