// Serves the AG-UI example page and passes its API calls on to Holdpoint,
// so the page and the API share one origin (the server has no CORS, and
// needs none). Node's standard library only.
//
//   node serve.mjs [--port 8081] [--api http://127.0.0.1:8080]
//
// - GET /, /app.js, /app.css: the page (this folder).
// - GET /node_modules/...: the ESM builds of @ag-ui/client and its
//   dependencies from ./node_modules (`npm ci` here), named by the page's
//   import map. An import without an extension (rxjs's ESM build has them)
//   is answered with the `.js` file of that name, as a bundler resolves it.
// - /agents/...: passed on to the Holdpoint server at --api, streaming both
//   ways (the AG-UI answer is Server-Sent Events). Every header goes through
//   unchanged except Host, which names the API server: the server still
//   checks the browser's Origin and the caller's credentials itself.
//
// The first line printed says where the page is (`--port 0` picks a free
// port).

import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import http from "node:http";
import https from "node:https";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const port = Number(option("port", process.env.PORT ?? "8081"));
const api = new URL(option("api", process.env.HOLDPOINT_URL ?? "http://127.0.0.1:8080"));
// Loopback unless told otherwise: the page is a development tool.
const host = option("host", "127.0.0.1");

const pageFiles = new Map([
  ["/", "index.html"],
  ["/index.html", "index.html"],
  ["/app.js", "app.js"],
  ["/app.css", "app.css"],
]);

const types = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
};

const modules = path.join(here, "node_modules");

async function isFile(p) {
  try {
    return (await stat(p)).isFile();
  } catch {
    return false;
  }
}

// The file a GET names, or null: the page's own files, or a file under
// ./node_modules (never outside it).
async function resolve(pathname) {
  if (pageFiles.has(pathname)) {
    return path.join(here, pageFiles.get(pathname));
  }
  if (!pathname.startsWith("/node_modules/")) {
    return null;
  }
  let relative;
  try {
    relative = decodeURIComponent(pathname.slice("/node_modules/".length));
  } catch {
    return null;
  }
  const file = path.resolve(modules, relative);
  if (!file.startsWith(modules + path.sep)) {
    return null;
  }
  for (const candidate of [file, `${file}.js`, path.join(file, "index.js")]) {
    if (await isFile(candidate)) {
      return candidate;
    }
  }
  return null;
}

function proxy(req, res) {
  const headers = { ...req.headers, host: api.host };
  const upstream = (api.protocol === "https:" ? https : http).request(
    {
      protocol: api.protocol,
      hostname: api.hostname,
      port: api.port || (api.protocol === "https:" ? 443 : 80),
      method: req.method,
      path: req.url,
      headers,
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", (e) => {
    if (!res.headersSent) {
      res.writeHead(502, { "content-type": "application/json" });
    }
    res.end(JSON.stringify({ error: { message: `the Holdpoint server at ${api.origin} did not answer: ${e.message}` } }));
  });
  req.pipe(upstream);
}

const server = http.createServer(async (req, res) => {
  const { pathname } = new URL(req.url ?? "/", "http://page");
  if (pathname.startsWith("/agents/") || pathname === "/agents") {
    proxy(req, res);
    return;
  }
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.writeHead(405, { allow: "GET, HEAD" }).end();
    return;
  }
  const file = await resolve(pathname);
  if (!file) {
    res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
    return;
  }
  res.writeHead(200, {
    "content-type": types[path.extname(file)] ?? "application/octet-stream",
    "cache-control": "no-cache",
  });
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  createReadStream(file).pipe(res);
});

server.listen(port, host, () => {
  const { port: bound } = server.address();
  console.log(`AG-UI page: http://${host}:${bound}/ (API calls go to ${api.origin})`);
});
