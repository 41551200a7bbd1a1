#!/usr/bin/env bash
# Server against server (issue 37 item 3): the HTTP approval cycle against Holdpoint's `banking serve`,
# LangGraph's Agent Server (`langgraph dev`, in-memory runtime) and Genkit JS (express + defineAgent),
# one server at a time on 127.0.0.1, the same client (driver.py) for all three.
#
# Installs into $WORK (default /var/tmp/holdpoint-peer-servers): a Python venv from requirements.txt and
# node_modules from package.json + package-lock.json (npm ci). Starts each server, measures its idle CPU,
# warms it up, runs N sequential cycles and N cycles at $CONC concurrent, stops it by PID. Every driver
# call is under `timeout`. Results: results/servers-<UTC>.jsonl here, and the summary table on stdout.
#
# Knobs (environment): ROUNDS (1; order of the servers rotates each round), CONC (64), IDLE_S (10),
# HP_N_SEQ HP_N_CONC LG_N_SEQ LG_N_CONC GK_N_SEQ GK_N_CONC, SERVERS ("holdpoint langgraph genkit"),
# BANKING (path of the release binary; default $CARGO_TARGET_DIR or ../../../target, release/banking).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
WORK="${WORK:-/var/tmp/holdpoint-peer-servers}"
BANKING="${BANKING:-${CARGO_TARGET_DIR:-$REPO/target}/release/banking}"
ROUNDS="${ROUNDS:-1}"
CONC="${CONC:-64}"
IDLE_S="${IDLE_S:-10}"
HP_N_SEQ="${HP_N_SEQ:-2000}";  HP_N_CONC="${HP_N_CONC:-6400}"
LG_N_SEQ="${LG_N_SEQ:-10}";    LG_N_CONC="${LG_N_CONC:-128}"
GK_N_SEQ="${GK_N_SEQ:-300}";   GK_N_CONC="${GK_N_CONC:-1280}"
SERVERS="${SERVERS:-holdpoint langgraph genkit}"
HP_PORT=18181; LG_PORT=18182; GK_PORT=18183

# ---- install (idempotent)
mkdir -p "$WORK"
if [ ! -x "$WORK/py/bin/langgraph" ]; then
  python3 -m venv "$WORK/py"
  "$WORK/py/bin/pip" install -q -r "$HERE/requirements.txt"
fi
mkdir -p "$WORK/node"
if ! cmp -s "$HERE/package-lock.json" "$WORK/node/package-lock.json" || [ ! -d "$WORK/node/node_modules/genkit" ]; then
  cp "$HERE/package.json" "$HERE/package-lock.json" "$WORK/node/"
  (cd "$WORK/node" && npm ci --no-audit --no-fund --loglevel=error)
fi
cp "$HERE/genkit_server.mjs" "$WORK/node/"          # ESM resolves packages next to the script
mkdir -p "$WORK/lg" && cp "$HERE/langgraph/graph.py" "$HERE/langgraph/langgraph.json" "$WORK/lg/"
if [ ! -x "$BANKING" ]; then
  (cd "$REPO" && cargo build --release -p banking)
fi

PY="$WORK/py/bin/python"
mkdir -p "$HERE/results"
OUT="$HERE/results/servers-$(date -u +%Y%m%dT%H%M%SZ).jsonl"
LOGDIR="$WORK/logs"; mkdir -p "$LOGDIR"

SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID"
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$SERVER_PID" 2>/dev/null && kill -9 "$SERVER_PID"
  fi
  SERVER_PID=""
}
trap stop_server EXIT INT TERM

wait_ready() {  # any HTTP answer on the URL, bounded to 120 s
  for _ in $(seq 240); do
    curl -s -o /dev/null --max-time 2 "$1" && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited early" >&2; return 1; }
    sleep 0.5
  done
  echo "server not ready: $1" >&2; return 1
}

start_server() {
  case "$1" in
    holdpoint)
      "$BANKING" serve --addr "127.0.0.1:$HP_PORT" --store memory: --model scripted \
        >"$LOGDIR/holdpoint.log" 2>&1 &
      SERVER_PID=$!; URL="http://127.0.0.1:$HP_PORT"; wait_ready "$URL/healthz";;
    langgraph)
      # --no-reload: one process; the env vars turn off its version check, analytics and tracing.
      (cd "$WORK/lg" && exec env LANGGRAPH_CLI_NO_ANALYTICS=1 LANGGRAPH_NO_VERSION_CHECK=true \
         LANGSMITH_TRACING=false "$WORK/py/bin/langgraph" dev --no-browser --no-reload \
         --host 127.0.0.1 --port "$LG_PORT" --n-jobs-per-worker "$CONC") >"$LOGDIR/langgraph.log" 2>&1 &
      SERVER_PID=$!; URL="http://127.0.0.1:$LG_PORT"; wait_ready "$URL/ok";;
    genkit)
      (cd "$WORK/node" && exec node genkit_server.mjs --port "$GK_PORT") >"$LOGDIR/genkit.log" 2>&1 &
      SERVER_PID=$!; URL="http://127.0.0.1:$GK_PORT"; wait_ready "$URL/health";;
  esac
}

measure_server() {
  local side="$1" nseq nconc wseq wconc
  case "$side" in
    holdpoint) nseq=$HP_N_SEQ; nconc=$HP_N_CONC; wseq=500; wconc=$((CONC * 10));;
    langgraph) nseq=$LG_N_SEQ; nconc=$LG_N_CONC; wseq=2;   wconc=$CONC;;
    genkit)    nseq=$GK_N_SEQ; nconc=$GK_N_CONC; wseq=50;  wconc=$CONC;;
  esac
  start_server "$side"
  echo "== $side pid $SERVER_PID $URL (load $(cut -d' ' -f1-3 /proc/loadavg))"
  timeout 60 "$PY" "$HERE/driver.py" idle --target "$side" --pid "$SERVER_PID" --seconds "$IDLE_S" --out "$OUT"
  timeout 900 "$PY" "$HERE/driver.py" measure --target "$side" --url "$URL" --pid "$SERVER_PID" \
    --n "$nseq" --warmup "$wseq" --label "round$2" --out "$OUT"
  timeout 900 "$PY" "$HERE/driver.py" measure --target "$side" --url "$URL" --pid "$SERVER_PID" \
    --n "$nconc" --concurrency "$CONC" --warmup "$wconc" --label "round$2" --out "$OUT"
  stop_server
}

read -r -a ORDER <<<"$SERVERS"
for round in $(seq "$ROUNDS"); do
  for side in "${ORDER[@]}"; do measure_server "$side" "$round"; done
  ORDER=("${ORDER[@]:1}" "${ORDER[0]}")    # rotate: each server goes first once in 3 rounds
done

echo "== results: $OUT"
echo "machine: $(nproc) CPUs, load average now $(cut -d' ' -f1-3 /proc/loadavg); $(node --version); $("$PY" --version); $("$BANKING" --version 2>/dev/null || echo banking)"
"$PY" "$HERE/driver.py" summarize "$OUT"
