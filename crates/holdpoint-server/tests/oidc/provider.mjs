// A local OpenID provider for the JWKS and discovery tests: the
// oauth2-mock-server library serving discovery, JWKS and token endpoints
// on 127.0.0.1, driven over stdin/stdout one JSON object per line.
//
//   start  -> {"issuer": URL}
//   {"op": "token", "kid": K, "claims": {...}}  -> {"token": JWT}
//   {"op": "rotate", "kid": K, "alg"?: A}       -> {"kid": K}  (a new key, RS256 by default)
//   {"op": "stats"}                             -> {"jwks": N}  (JWKS requests served)
import http from 'node:http';
import readline from 'node:readline';
import { OAuth2Issuer, OAuth2Service } from 'oauth2-mock-server';

const issuer = new OAuth2Issuer();
await issuer.keys.generate('RS256', { kid: 'k1' });
const service = new OAuth2Service(issuer);
const handler = service.requestHandler;
let jwks = 0;
const server = http.createServer((req, res) => {
  if (req.url === '/jwks') jwks += 1;
  handler(req, res);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
issuer.url = `http://127.0.0.1:${server.address().port}`;
const say = (value) => process.stdout.write(JSON.stringify(value) + '\n');
say({ issuer: issuer.url });

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const cmd = JSON.parse(line);
  if (cmd.op === 'token') {
    const token = await issuer.buildToken({
      kid: cmd.kid,
      scopesOrTransform: (_header, payload) => Object.assign(payload, cmd.claims),
    });
    say({ token });
  } else if (cmd.op === 'rotate') {
    await issuer.keys.generate(cmd.alg ?? 'RS256', { kid: cmd.kid });
    say({ kid: cmd.kid });
  } else if (cmd.op === 'stats') {
    say({ jwks });
  } else {
    say({ error: `unknown op ${cmd.op}` });
  }
}
server.close();
