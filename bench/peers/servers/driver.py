#!/usr/bin/env python3
"""Drive the HTTP human-approval cycle against one agent server and measure it (issue 37 item 3).

  driver.py measure --target holdpoint|genkit|langgraph --url http://127.0.0.1:PORT --pid SERVER_PID \
                    --n N [--concurrency C] [--warmup W] [--label L] [--out results.jsonl]
  driver.py idle --target T --pid SERVER_PID [--seconds 10] [--out results.jsonl]
  driver.py summarize results.jsonl

The cycle, every step checked:
  holdpoint  POST /agents/bankingAgent {"data":{"message":{user text}}}
               -> result.finishReason "interrupted", the transferMoney toolRequest part with
                  metadata.interrupt.details "Transfer $500.00 to savings", result.sessionId
             POST /agents/bankingAgent {"data":{"resume":{"restart":[{toolRequest,
                  "metadata":{"resumed":{"approved":true}}}]}},"init":{"sessionId":SID}}
               -> result.finishReason "stop", text "Done: txn-123"                      (2 requests)
  genkit     the same two requests on POST /bankingAgent (genkit's expressHandler speaks the same
             {"data","init"} envelope); the first carries "init":{} because genkit requires it  (2 requests)
  langgraph  POST /threads {} -> thread_id
             POST /threads/{id}/runs/wait {"assistant_id":"bankingAgent","input":{"messages":[user]}}
               -> "__interrupt__"[0].value == {"details":"Transfer $500.00 to savings"}
             POST /threads/{id}/runs/wait {"assistant_id":"bankingAgent","command":{"resume":{"approved":true}}}
               -> messages[-1].content "Done: txn-123", messages[-2] the tool's result  (3 requests)

Client: a minimal HTTP/1.1 keep-alive client on a raw socket (TCP_NODELAY) with orjson, identical for
every server. --concurrency C forks C worker processes with one connection each, n/C cycles back to back.
Server CPU: utime+stime of the server PID and all its descendants from /proc/PID/stat, read right before
and after the measured cycles (warm-up excluded). Prints and appends one JSON line per measurement.
Loopback URLs only.
"""
import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time

import orjson

USER_TEXT = "Transfer $500 to my savings account."
DETAILS = "Transfer $500.00 to savings"
FINAL = "Done: txn-123"
TICK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------ /proc
def _stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[1]), (int(rest[11]) + int(rest[12])) / TICK  # ppid, utime+stime


def tree_cpu_s(root):
    """CPU seconds (user+system) of `root` and every live descendant."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                procs[int(name)] = _stat(name)
            except (OSError, IndexError, ValueError):
                pass
    children = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        if pid in procs:
            total += procs[pid][1]
        stack.extend(children.get(pid, []))
    return total


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


# ------------------------------------------------------------------ HTTP
class Conn:
    """One keep-alive HTTP/1.1 connection; post() returns (status, body bytes)."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.head = f"Host: {host}:{port}\r\nContent-Type: application/json\r\nAccept: application/json\r\n".encode()

    def _fill(self):
        data = self.sock.recv(262144)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def _until(self, sep):
        while (i := self.buf.find(sep)) < 0:
            self._fill()
        out, self.buf = self.buf[:i], self.buf[i + len(sep):]
        return out

    def _exactly(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def post(self, path, body):
        self.sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\n" + self.head +
                          b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        lines = self._until(b"\r\n\r\n").split(b"\r\n")
        status = int(lines[0].split()[1])
        length, chunked, close = 0, False, False
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            k, v = k.strip().lower(), v.strip().lower()
            if k == b"content-length":
                length = int(v)
            elif k == b"transfer-encoding" and b"chunked" in v:
                chunked = True
            elif k == b"connection" and v == b"close":
                close = True
        if chunked:
            parts = []
            while (size := int(self._until(b"\r\n").split(b";")[0], 16)) > 0:
                parts.append(self._exactly(size))
                self._exactly(2)
            self._until(b"\r\n")
            data = b"".join(parts)
        else:
            data = self._exactly(length)
        if close:
            self.sock.close()
            self.__init__(self.host, self.port)
        return status, data


def check(cond, what, body=b""):
    if not cond:
        raise RuntimeError(f"cycle check failed: {what}: {body[:400]!r}")


# ------------------------------------------------------------------ cycles
def _session_cycle(path, first):
    """The two-request cycle shared by Holdpoint and Genkit (same envelope)."""

    def cycle(c):
        t0 = time.perf_counter()
        s, b = c.post(path, first)
        check(s == 200, "turn 1 status", b)
        r = orjson.loads(b)["result"]
        check(r.get("finishReason") == "interrupted", "turn 1 is interrupted", b)
        part = next(p for p in r["message"]["content"] if "interrupt" in (p.get("metadata") or {}))
        check(part["toolRequest"]["name"] == "transferMoney"
              and part["metadata"]["interrupt"].get("details") == DETAILS, "interrupt payload", b)
        resume = orjson.dumps({"data": {"resume": {"restart": [
            {"toolRequest": part["toolRequest"], "metadata": {"resumed": {"approved": True}}}]}},
            "init": {"sessionId": r["sessionId"]}})
        s, b = c.post(path, resume)
        t1 = time.perf_counter()
        check(s == 200, "turn 2 status", b)
        r = orjson.loads(b)["result"]
        text = "".join(p.get("text", "") for p in r["message"]["content"])
        check(r.get("finishReason") == "stop" and text == FINAL, "final text", b)
        return t1 - t0

    return cycle


USER_MESSAGE = {"role": "user", "content": [{"text": USER_TEXT}]}
holdpoint_cycle = _session_cycle("/agents/bankingAgent", orjson.dumps({"data": {"message": USER_MESSAGE}}))
genkit_cycle = _session_cycle("/bankingAgent", orjson.dumps({"data": {"message": USER_MESSAGE}, "init": {}}))

LG_RUN = orjson.dumps({"assistant_id": "bankingAgent",
                       "input": {"messages": [{"role": "user", "content": USER_TEXT}]}})
LG_RESUME = orjson.dumps({"assistant_id": "bankingAgent", "command": {"resume": {"approved": True}}})


def langgraph_cycle(c):
    t0 = time.perf_counter()
    s, b = c.post("/threads", b"{}")
    check(s == 200, "create thread", b)
    tid = orjson.loads(b)["thread_id"]
    s, b = c.post(f"/threads/{tid}/runs/wait", LG_RUN)
    check(s == 200, "run 1 status", b)
    intr = orjson.loads(b).get("__interrupt__")
    check(bool(intr) and intr[0]["value"] == {"details": DETAILS}, "interrupt payload", b)
    s, b = c.post(f"/threads/{tid}/runs/wait", LG_RESUME)
    t1 = time.perf_counter()
    check(s == 200, "run 2 status", b)
    v = orjson.loads(b)
    check("__interrupt__" not in v, "no second interrupt", b)
    msgs = v["messages"]
    check(msgs[-1]["content"] == FINAL, "final text", b)
    check(msgs[-2]["type"] == "tool"
          and orjson.loads(msgs[-2]["content"]) == {"success": True, "transactionId": "txn-123"}, "tool result", b)
    return t1 - t0


CYCLES = {"holdpoint": holdpoint_cycle, "genkit": genkit_cycle, "langgraph": langgraph_cycle}


# ------------------------------------------------------------------ load
def _worker(target, host, port, count, barrier, out):
    try:
        conn = Conn(host, port)
        cycle = CYCLES[target]
        barrier.wait()
        cpu0 = time.process_time()
        lat = [cycle(conn) for _ in range(count)]
        out.put(("ok", lat, time.process_time() - cpu0, time.perf_counter()))
    except BaseException as e:  # report; never leave the parent waiting
        out.put(("err", repr(e), 0.0, time.perf_counter()))
        try:
            barrier.abort()
        except Exception:
            pass


def pct(sorted_xs, q):
    return sorted_xs[min(len(sorted_xs) - 1, int(round(q * (len(sorted_xs) - 1))))]


def run_cycles(target, host, port, n, concurrency, server_pid=None, timeout=900):
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(concurrency + 1)
    out = ctx.Queue()
    per = [n // concurrency + (1 if i < n % concurrency else 0) for i in range(concurrency)]
    procs = [ctx.Process(target=_worker, args=(target, host, port, k, barrier, out), daemon=True)
             for k in per]
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=120)
    except Exception:
        errs = [out.get(timeout=5) for _ in procs if not out.empty()]
        raise RuntimeError(f"{target}: a worker failed before the start: {errs[:1]}")
    cpu0 = tree_cpu_s(server_pid) if server_pid else 0.0
    t0 = time.perf_counter()
    results = [out.get(timeout=timeout) for _ in procs]
    cpu1 = tree_cpu_s(server_pid) if server_pid else 0.0
    for p in procs:
        p.join(timeout=30)
    errs = [r[1] for r in results if r[0] != "ok"]
    if errs:
        raise RuntimeError(f"{target}: {len(errs)} worker(s) failed, first: {errs[0]}")
    wall = max(r[3] for r in results) - t0
    lat = sorted(x for r in results for x in r[1])
    return wall, lat, cpu1 - cpu0, sum(r[2] for r in results)


def measure(a):
    host, port = a.url.split("://", 1)[1].rstrip("/").rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost"):
        sys.exit("loopback URLs only")
    port = int(port)
    if a.warmup:
        run_cycles(a.target, host, port, a.warmup, min(a.concurrency, a.warmup))
    load0 = loadavg()
    wall, lat, server_cpu, client_cpu = run_cycles(a.target, host, port, a.n, a.concurrency, a.pid)
    ms = lambda v: round(v * 1e3, 3)
    rec = {
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "label": a.label, "target": a.target,
        "concurrency": a.concurrency, "n": len(lat), "warmup": a.warmup, "seconds": round(wall, 3),
        "cycles_per_s": round(len(lat) / wall, 2),
        "cycle_ms": {"p50": ms(pct(lat, 0.5)), "p99": ms(pct(lat, 0.99)), "mean": ms(statistics.fmean(lat))},
        "server_cpu_s": round(server_cpu, 3), "server_cpu_ms_per_cycle": round(server_cpu / len(lat) * 1e3, 3),
        "client_cpu_ms_per_cycle": round(client_cpu / len(lat) * 1e3, 3),
        "loadavg_before": load0, "loadavg_after": loadavg(),
    }
    line = json.dumps(rec)
    print(line, flush=True)
    if a.out:
        with open(a.out, "a") as f:
            f.write(line + "\n")


def idle(a):
    """The server's CPU rate with no requests (background loops), to subtract from the per-cycle CPU."""
    c0, t0 = tree_cpu_s(a.pid), time.perf_counter()
    time.sleep(a.seconds)
    c1, t1 = tree_cpu_s(a.pid), time.perf_counter()
    line = json.dumps({"kind": "idle", "target": a.target, "seconds": round(t1 - t0, 3),
                       "cpu_s_per_s": round((c1 - c0) / (t1 - t0), 5)})
    print(line, flush=True)
    if a.out:
        with open(a.out, "a") as f:
            f.write(line + "\n")


# ------------------------------------------------------------------ summary
NAMES = {"holdpoint": "Holdpoint `banking serve`", "langgraph": "LangGraph `langgraph dev` (in-mem)",
         "genkit": "Genkit JS express + `defineAgent`"}


def summarize(path):
    allrows = [json.loads(x) for x in open(path) if x.strip()]
    rows = [r for r in allrows if r.get("kind", "measure") == "measure"]
    idle_rate = {r["target"]: r["cpu_s_per_s"] for r in allrows if r.get("kind") == "idle"}
    med = lambda xs: statistics.median(xs)
    groups = {}
    for r in rows:
        groups.setdefault((r["concurrency"], r["target"]), []).append(r)
    print("| concurrency | server | runs | N/run | cycles/s | p50 ms | p99 ms | server CPU ms/cycle (less idle) | client CPU ms/cycle | load avg (1 min) before→after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    agg = {}
    for (conc, target), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], list(NAMES).index(kv[0][1]))):
        s = {k: med([f(r) for r in rs]) for k, f in {
            "cps": lambda r: r["cycles_per_s"], "p50": lambda r: r["cycle_ms"]["p50"],
            "p99": lambda r: r["cycle_ms"]["p99"], "cpu": lambda r: r["server_cpu_ms_per_cycle"],
            "ccpu": lambda r: r["client_cpu_ms_per_cycle"],
            "net": lambda r: (r["server_cpu_s"] - idle_rate.get(r["target"], 0.0) * r["seconds"]) / r["n"] * 1e3,
        }.items()}
        agg[(conc, target)] = s
        loads = ", ".join(f"{r['loadavg_before'][0]:.2f}→{r['loadavg_after'][0]:.2f}" for r in rs)
        runs = ", ".join(str(r["cycles_per_s"]) for r in rs)
        print(f"| {conc} | {NAMES[target]} | {len(rs)} | {rs[0]['n']} | {s['cps']:.1f} ({runs}) | {s['p50']:.2f} "
              f"| {s['p99']:.2f} | {s['cpu']:.3f} ({s['net']:.3f}) | {s['ccpu']:.3f} | {loads} |")
    if idle_rate:
        print("\nidle server CPU (s per s): " + ", ".join(f"{k} {v}" for k, v in idle_rate.items()))
    print()
    for conc in sorted({c for c, _ in agg}):
        h = agg.get((conc, "holdpoint"))
        for peer in ("langgraph", "genkit"):
            p = agg.get((conc, peer))
            if h and p:
                print(f"concurrency {conc}: Holdpoint/{peer}: cycles/s {h['cps'] / p['cps']:.1f}x, "
                      f"p50 latency {p['p50'] / h['p50']:.1f}x lower, server CPU per cycle {p['cpu'] / h['cpu']:.1f}x lower")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--target", required=True, choices=sorted(CYCLES))
    m.add_argument("--url", required=True)
    m.add_argument("--pid", type=int, help="server PID whose process tree's CPU is read")
    m.add_argument("--n", type=int, default=1000)
    m.add_argument("--concurrency", type=int, default=1)
    m.add_argument("--warmup", type=int, default=0)
    m.add_argument("--label", default="")
    m.add_argument("--out")
    i = sub.add_parser("idle")
    i.add_argument("--target", required=True, choices=sorted(CYCLES))
    i.add_argument("--pid", type=int, required=True)
    i.add_argument("--seconds", type=float, default=10.0)
    i.add_argument("--out")
    s = sub.add_parser("summarize")
    s.add_argument("path")
    a = ap.parse_args()
    if a.cmd == "measure":
        measure(a)
    elif a.cmd == "idle":
        idle(a)
    else:
        summarize(a.path)


if __name__ == "__main__":
    main()
