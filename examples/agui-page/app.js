// A chat with a Holdpoint agent through the official AG-UI client.
//
// - Send: the message goes out as a run (`HttpAgent.runAgent`); the
//   assistant's text is shown delta by delta as TEXT_MESSAGE_CONTENT
//   events arrive, tool calls as they are announced and answered.
// - A tool call that waits for approval ends the run with
//   RUN_FINISHED{outcome: "interrupt"}: one card per interrupt, with its
//   message, the tool and its input, and Approve / Edit amount / Cancel.
// - Once every open interrupt has an answer, the next run carries them as
//   `resume` (AG-UI requires a resume to answer all of them): Approve is
//   `status: "resolved"`, Edit amount is `resolved` with
//   `payload.editedArgs` (the input with the new amount), Cancel is
//   `status: "cancelled"` with the reason in `metadata.reason`.
//
// docs/reference.md §19 says how Holdpoint maps these onto its decisions.

import { HttpAgent } from "@ag-ui/client";

const $ = (id) => document.getElementById(id);
const log = $("log");
const status = $("status");
const cards = $("interrupts");

let agent = newAgent();

function newAgent(threadId) {
  const a = new HttpAgent({ url: agentUrl(), threadId });
  $("thread").textContent = a.threadId;
  return a;
}

function agentUrl() {
  const name = $("agent").value.trim() || "bankingAgent";
  return new URL(`agents/${encodeURIComponent(name)}/agui`, document.baseURI).href;
}

function say(text, kind = "") {
  status.textContent = text;
  status.className = kind;
}

function entry(role, text = "") {
  const li = document.createElement("li");
  li.className = role;
  li.textContent = text;
  log.append(li);
  li.scrollIntoView({ block: "nearest" });
  return li;
}

function busy(on) {
  $("send").disabled = on || agent.pendingInterrupts.length > 0;
  $("message").disabled = on || agent.pendingInterrupts.length > 0;
  for (const b of cards.querySelectorAll("button")) {
    b.disabled = on;
  }
}

// One run of the agent, shown as it streams. `params` carries `resume`.
async function run(params = {}) {
  agent.url = agentUrl();
  const key = $("key").value.trim();
  agent.headers = key ? { "x-api-key": key } : {};
  const texts = new Map();
  const tools = new Map();
  let finished = null;
  busy(true);
  say("Working…");
  try {
    await agent.runAgent(params, {
      onTextMessageStartEvent: ({ event }) => {
        const li = entry("assistant");
        li.dataset.messageId = event.messageId;
        li.dataset.deltas = "0";
        texts.set(event.messageId, li);
      },
      onTextMessageContentEvent: ({ event }) => {
        const li = texts.get(event.messageId) ?? entry("assistant");
        texts.set(event.messageId, li);
        li.textContent += event.delta;
        li.dataset.deltas = String(Number(li.dataset.deltas ?? 0) + 1);
      },
      onToolCallStartEvent: ({ event }) => {
        const li = entry("tool", `${event.toolCallName} `);
        li.dataset.toolCallId = event.toolCallId;
        const args = document.createElement("code");
        li.append(args);
        tools.set(event.toolCallId, args);
      },
      onToolCallArgsEvent: ({ event }) => {
        const args = tools.get(event.toolCallId);
        if (args) {
          args.textContent += event.delta;
        }
      },
      onToolCallResultEvent: ({ event }) => {
        const li = entry("result", `${event.content}`);
        li.dataset.toolCallId = event.toolCallId;
      },
      onRunErrorEvent: ({ event }) => {
        finished = "error";
        entry("error", `${event.code ?? "ERROR"}: ${event.message}`);
        say(`The run failed: ${event.code ?? event.message}`, "error");
      },
      onRunFinishedEvent: ({ outcome }) => {
        finished = outcome;
      },
    });
  } catch (e) {
    finished = "error";
    say(`${e?.message ?? e}`, "error");
  }
  showInterrupts();
  busy(false);
  if (finished === "interrupt") {
    say("Waiting for your answer.");
  } else if (finished === "success") {
    say("Done.");
    $("message").focus();
  }
}

// The tool and input an interrupt is about: Holdpoint's metadata (the
// current input, after any edit), else the call as the stream announced it.
function callOf(interrupt) {
  const hp = interrupt.metadata?.holdpoint;
  if (hp?.tool) {
    return { tool: hp.tool, input: hp.input ?? {} };
  }
  for (const m of agent.messages) {
    const call = m.toolCalls?.find((c) => c.id === interrupt.toolCallId);
    if (call) {
      let input = {};
      try {
        input = JSON.parse(call.function.arguments || "{}");
      } catch {
        input = call.function.arguments;
      }
      return { tool: call.function.name, input };
    }
  }
  return { tool: "(unknown)", input: {} };
}

// The answers chosen so far, by interrupt id.
let answers = new Map();

function showInterrupts() {
  cards.replaceChildren();
  answers = new Map();
  const pending = agent.pendingInterrupts;
  cards.hidden = pending.length === 0;
  for (const interrupt of pending) {
    const card = $("interrupt-card").content.firstElementChild.cloneNode(true);
    const { tool, input } = callOf(interrupt);
    card.dataset.interruptId = interrupt.id;
    card.querySelector(".interrupt-message").textContent = interrupt.message ?? `${tool} waits for approval`;
    card.querySelector(".interrupt-tool").textContent = tool;
    card.querySelector(".interrupt-input").textContent = JSON.stringify(input, null, 2);
    if (interrupt.expiresAt) {
      const p = card.querySelector(".interrupt-expiry");
      p.hidden = false;
      p.textContent = `Answer before ${new Date(interrupt.expiresAt).toLocaleString()}.`;
    }
    const editable = input && typeof input === "object" && typeof input.amount === "number";
    const edit = card.querySelector(".edit");
    edit.hidden = !editable;
    const amount = card.querySelector(".amount");
    if (editable) {
      amount.value = String(input.amount);
    }
    card.querySelector(".approve").addEventListener("click", () =>
      choose(card, { interruptId: interrupt.id, status: "resolved" }, "approved"),
    );
    edit.addEventListener("click", () => {
      card.querySelector(".edit-form").hidden = false;
      amount.focus();
      amount.select();
    });
    card.querySelector(".apply-edit").addEventListener("click", () => {
      const value = Number(amount.value);
      if (!Number.isFinite(value) || value <= 0) {
        say("Enter an amount above 0.", "error");
        return;
      }
      const editedArgs = { ...input, amount: value };
      choose(card, { interruptId: interrupt.id, status: "resolved", payload: { editedArgs } }, `approved for ${value}`);
    });
    card.querySelector(".cancel").addEventListener("click", () => {
      const reason = card.querySelector(".reason").value.trim();
      const answer = { interruptId: interrupt.id, status: "cancelled" };
      if (reason) {
        answer.metadata = { reason };
      }
      choose(card, answer, "cancelled");
    });
    cards.append(card);
  }
}

// Records one card's answer; once every open interrupt has one, resumes.
function choose(card, answer, label) {
  answers.set(answer.interruptId, answer);
  card.dataset.answer = label;
  card.classList.add("answered");
  const left = agent.pendingInterrupts.filter((i) => !answers.has(i.id)).length;
  if (left > 0) {
    say(`${left} more to answer before the agent goes on.`);
    return;
  }
  entry("user", `(${[...answers.values()].map((a) => a.status).join(", ")})`);
  run({ resume: [...answers.values()] });
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("message").value.trim();
  if (!text) {
    return;
  }
  $("message").value = "";
  entry("user", text);
  agent.addMessage({ id: `user-${Date.now()}-${log.children.length}`, role: "user", content: text });
  run();
});

$("new-thread").addEventListener("click", () => {
  agent = newAgent();
  log.replaceChildren();
  showInterrupts();
  busy(false);
  say("");
});

document.body.dataset.ready = "true";
