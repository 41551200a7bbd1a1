// The official AG-UI client against POST /agents/{name}/agui: run,
// interrupt, resume (approve, edit, cancel), a replayed resume, new input
// while interrupted, and an expired interrupt. Usage:
//   node client.mjs BASE_URL API_KEY
// Prints one JSON object with what each step saw; tests/server/agui.rs
// checks it against the server's store.
import { HttpAgent } from "@ag-ui/client";

const [base, key] = process.argv.slice(2);

function agent(name, threadId) {
  return new HttpAgent({
    url: `${base}/agents/${name}/agui`,
    headers: { "x-api-key": key },
    threadId,
  });
}

// One run: its outcome, interrupts, tool results, text and error.
async function run(a, params = {}) {
  const seen = { outcome: null, interrupts: [], results: [], text: "", error: null, thrown: null };
  try {
    await a.runAgent(params, {
      onRunFinishedEvent: ({ outcome, interrupts }) => {
        seen.outcome = outcome;
        seen.interrupts = interrupts ?? [];
      },
      onRunErrorEvent: ({ event }) => {
        seen.error = { code: event.code, message: event.message };
      },
      onToolCallResultEvent: ({ event }) => {
        seen.results.push({ toolCallId: event.toolCallId, content: event.content });
      },
      onTextMessageContentEvent: ({ event }) => {
        seen.text += event.delta;
      },
    });
  } catch (e) {
    seen.thrown = String(e?.message ?? e);
  }
  return seen;
}

function say(a, text) {
  a.addMessage({ id: `u-${Math.random().toString(36).slice(2)}`, role: "user", content: text });
}

const out = {};

// Run, interrupt, approve.
{
  const a = agent("opsAgent", "node-approve");
  say(a, "close checking");
  out.first = await run(a);
  out.pendingAfterFirst = a.pendingInterrupts.length;
  const [i] = out.first.interrupts;
  // The client refuses new input while interrupted; the server does too.
  say(a, "close savings");
  out.clientBlocked = await run(a);
  const saved = a.pendingInterrupts;
  a.pendingInterrupts = [];
  out.serverBlocked = await run(a);
  a.messages.pop();
  a.pendingInterrupts = saved;
  const resume = [{ interruptId: i.id, status: "resolved", payload: { toolApproved: true } }];
  out.approved = await run(a, { resume });
  out.approvedToolCallId = i.toolCallId;
  // The same resume again: refused, nothing runs twice.
  out.replayed = await run(a, { resume });
}

// Approve with edits: the revised call is asked again, then approved.
{
  const a = agent("opsAgent", "node-edit");
  say(a, "close checking");
  const first = await run(a);
  const [i] = first.interrupts;
  out.edited = await run(a, {
    resume: [{ interruptId: i.id, status: "resolved", payload: { editedArgs: { account: "savings" } } }],
  });
  const [j] = out.edited.interrupts;
  out.editApproved = await run(a, { resume: [{ interruptId: j.id, status: "resolved" }] });
}

// Cancel: denied with a reason, nothing runs.
{
  const a = agent("opsAgent", "node-cancel");
  say(a, "close checking");
  const first = await run(a);
  const [i] = first.interrupts;
  out.cancelled = await run(a, {
    resume: [{ interruptId: i.id, status: "cancelled", metadata: { reason: "not today" } }],
  });
}

// A schema mismatch is a RUN_ERROR; the interrupt stays answerable.
{
  const a = agent("opsAgent", "node-schema");
  say(a, "close checking");
  const first = await run(a);
  const [i] = first.interrupts;
  out.mismatch = await run(a, {
    resume: [{ interruptId: i.id, status: "resolved", payload: { toolApproved: "yes" } }],
  });
  a.pendingInterrupts = first.interrupts;
  out.afterMismatch = await run(a, { resume: [{ interruptId: i.id, status: "cancelled" }] });
}

// Expiry: the hold of opsTtl expires at once.
{
  const a = agent("opsTtl", "node-expiry");
  say(a, "close checking");
  const first = await run(a);
  const [i] = first.interrupts;
  out.expiresAt = i.expiresAt;
  await new Promise((r) => setTimeout(r, 20));
  // The client knows it expired; the server says so too.
  out.expiredClient = await run(a, { resume: [{ interruptId: i.id, status: "resolved" }] });
  a.pendingInterrupts = [];
  out.expiredServer = await run(a, { resume: [{ interruptId: i.id, status: "resolved" }] });
  a.pendingInterrupts = first.interrupts;
  out.expiredCancelled = await run(a, { resume: [{ interruptId: i.id, status: "cancelled" }] });
}

console.log(JSON.stringify(out));
