// Genkit JS agent server for the server-against-server approval cycle (issue 37 item 3).
//
// genkit 1.42's beta agents API (ai.defineAgent + InMemorySessionStore) served by
// @genkit-ai/express's expressHandler on POST /bankingAgent. Wire format (read from
// node_modules/@genkit-ai/express/lib/index.js): request {"data": AgentInput, "init": AgentInit},
// reply {"result": AgentOutput}. The cycle:
//   POST /bankingAgent {"data":{"message":{role:"user",content:[{text}]}}}
//     -> result.finishReason "interrupted", result.sessionId, the transferMoney toolRequest
//        part carrying metadata.interrupt = {"details":"Transfer $500.00 to savings"}
//   POST /bankingAgent {"data":{"resume":{"restart":[{toolRequest, metadata:{resumed:{approved:true}}}]}},
//                       "init":{"sessionId":SID}}
//     -> result.finishReason "stop", text "Done: txn-123"
// Same fake model and tool as ../bench_genkit.mjs. Loopback only.
//
// Usage: node genkit_server.mjs --port 18083
import express from 'express';
import { expressHandler } from '@genkit-ai/express';
import { genkit, z, InMemorySessionStore } from 'genkit/beta';

const argv = process.argv.slice(2);
const opt = (k, d) => { const i = argv.indexOf(`--${k}`); return i >= 0 ? argv[i + 1] : d; };
const PORT = +opt('port', '18083');
const HOST = '127.0.0.1';

const ai = genkit({});

// Fake model: a transferMoney call first; after the tool result, text built from it.
ai.defineModel({ name: 'fake', supports: { tools: true, multiturn: true } }, async (req) => {
  const last = req.messages[req.messages.length - 1];
  const tr = last.content.find((p) => p.toolResponse);
  if (tr) {
    return { message: { role: 'model', content: [{ text: `Done: ${tr.toolResponse.output.transactionId}` }] }, finishReason: 'stop' };
  }
  return {
    message: { role: 'model', content: [{ toolRequest: { name: 'transferMoney', ref: 'call_1', input: { amount: 500, toAccount: 'savings' } } }] },
    finishReason: 'stop',
  };
});

// Tool: interrupts the first time; completes when restarted with {approved: true}.
const transferMoney = ai.defineTool(
  {
    name: 'transferMoney',
    description: 'Transfer money to an account (requires human approval)',
    inputSchema: z.object({ amount: z.number(), toAccount: z.string() }),
    outputSchema: z.object({ success: z.boolean(), transactionId: z.string().optional() }),
  },
  async (input, { interrupt, resumed }) => {
    if (!resumed) interrupt({ details: `Transfer $${input.amount.toFixed(2)} to ${input.toAccount}` });
    if (!resumed.approved) return { success: false };
    return { success: true, transactionId: 'txn-123' };
  },
);

const agent = ai.defineAgent({
  name: 'bankingAgent',
  model: 'fake',
  tools: [transferMoney],
  store: new InMemorySessionStore(),
});

const app = express();
app.use(express.json());
app.get('/health', (_req, res) => res.json({ ok: true }));
app.post('/bankingAgent', expressHandler(agent));
const server = app.listen(PORT, HOST, () => console.log(`genkit agent server on http://${HOST}:${PORT}/bankingAgent`));
server.keepAliveTimeout = 120000;
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
