#!/usr/bin/env bash
# The cluster under faults (issue 37, item 4): three `banking serve`
# replicas on one private PostgreSQL behind a loopback round-robin proxy,
# five approvers (inbox API and the `holdpoint` CLI), holds created while
# replicas are SIGKILLed and restarted and PostgreSQL is restarted once
# (`pg_ctl restart -m immediate`); then calls in doubt are settled and the
# ledger is checked. Prints a JSON summary; exits non-zero when the ledger
# is not clean. Everything listens on 127.0.0.1.
#
#   scripts/cluster.sh                         # 10 000 holds, 20 kills
#   scripts/cluster.sh --holds 200 --kills 3   # the short version CI runs
#
# Any flag of `holdpoint-cluster --help` may be given (--holds, --kills,
# --max-seconds, --create-seconds, --pg-restart false, --seed, --work-dir …).
# PostgreSQL commits synchronously (--pg-durable false restores the test
# server's synchronous_commit=off, which loses acknowledged commits on the
# immediate restart: finding c102). Progress goes to stderr every 30 s; a
# run whose time runs out checks the holds created so far ("partial").
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${CLUSTER_PROFILE:-release}"
flag=()
[ "$profile" = release ] && flag=(--release)
cargo build "${flag[@]}" -p banking --bin banking -p holdpoint-cli --bin holdpoint -p holdpoint-cluster >&2
target="${CARGO_TARGET_DIR:-target}/$profile"
exec timeout "${CLUSTER_TIMEOUT:-3600}" "$target/holdpoint-cluster" \
  --banking "$target/banking" --holdpoint "$target/holdpoint" \
  --pg-script scripts/postgres.sh "$@"
