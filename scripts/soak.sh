#!/usr/bin/env bash
# Soak: the server load test at a larger scale, repeated (not run in CI).
#   scripts/soak.sh [SCALE] [ROUNDS]
# SCALE multiplies the 10,000 paused sessions and 1,000 concurrent SSE
# streams of the CI test; ROUNDS repeats it. Uses a release build.
set -euo pipefail
scale="${1:-${HOLDPOINT_LOAD_SCALE:-5}}"
rounds="${2:-3}"
cd "$(dirname "$0")/.."
for round in $(seq 1 "$rounds"); do
  echo "== soak round $round/$rounds (scale $scale)"
  HOLDPOINT_LOAD_SCALE="$scale" cargo test --release -p holdpoint-server --test server \
    -- --exact load::paused_sessions_and_concurrent_streams_under_load --nocapture
done
