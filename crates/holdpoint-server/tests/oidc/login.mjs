// A local OpenID provider for the approval page's sign-in test
// (tests/server/browser.rs): oauth2-mock-server's discovery, authorization
// (it signs "olga" in at once) and token endpoints, with PKCE, on
// 127.0.0.1. Prints {"issuer": URL} and serves until stdin closes.
import readline from 'node:readline';
import { OAuth2Server } from 'oauth2-mock-server';

const server = new OAuth2Server();
await server.issuer.keys.generate('RS256');
server.service.on('beforeTokenSigning', (token) => {
  token.payload.sub = 'olga';
  token.payload.roles = ['finance'];
});
await server.start(0, '127.0.0.1');
process.stdout.write(JSON.stringify({ issuer: server.issuer.url }) + '\n');
for await (const _ of readline.createInterface({ input: process.stdin })) {
  // Nothing to do: the test only needs the provider running.
}
await server.stop();
