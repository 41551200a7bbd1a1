// A Genkit JS agent served over HTTP by @genkit-ai/express, for the
// holdpoint-client tests: a scripted model (no network) that asks for
// transferMoney, an interrupting transferMoney tool, an in-memory store.
// Usage: node server.mjs PORT (prints "listening PORT" when ready).
import express from 'express';
import { genkit, z, InMemorySessionStore } from 'genkit/beta';
import { expressHandler } from '@genkit-ai/express';

const ai = genkit({});

// Answers with a transferMoney call after a user message, and with text
// after a tool response.
ai.defineModel({ name: 'scripted', supports: { tools: true, multiturn: true } }, async (req, sendChunk) => {
  const last = req.messages[req.messages.length - 1];
  if (last.role === 'tool' || last.content.some((p) => p.toolResponse)) {
    sendChunk?.({ content: [{ text: 'Done: ' }] });
    sendChunk?.({ content: [{ text: 'txn-123' }] });
    return { message: { role: 'model', content: [{ text: 'Done: txn-123' }] }, finishReason: 'stop' };
  }
  return {
    message: {
      role: 'model',
      content: [{ toolRequest: { name: 'transferMoney', ref: 'call-1', input: { amount: 500, toAccount: 'savings' } } }],
    },
    finishReason: 'stop',
  };
});

let runs = 0;
const transferMoney = ai.defineTool(
  {
    name: 'transferMoney',
    description: 'Transfers money; needs approval',
    inputSchema: z.object({ amount: z.number(), toAccount: z.string() }),
    outputSchema: z.string(),
  },
  async (input, { interrupt, resumed }) => {
    if (!resumed) interrupt({ details: `Transfer $${input.amount.toFixed(2)} to ${input.toAccount}` });
    if (resumed.approved !== true) throw new Error('declined');
    runs += 1;
    return 'txn-123';
  }
);

const agent = ai.defineAgent({
  name: 'bankingAgent',
  model: 'scripted',
  tools: [transferMoney],
  store: new InMemorySessionStore(),
});

const app = express();
app.use(express.json());
app.post('/bankingAgent', expressHandler(agent));
app.post('/bankingAgent/getSnapshot', expressHandler(agent.getSnapshotDataAction));
app.post('/bankingAgent/abort', expressHandler(agent.abortAgentAction));
app.get('/runs', (_, res) => res.json({ runs }));
const port = Number(process.argv[2] || 0);
const server = app.listen(port, '127.0.0.1', () => {
  console.log(`listening ${server.address().port}`);
});
