#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests.
#
#   eval "$(scripts/postgres.sh start)"   # prints: export DATABASE_URL=… HOLDPOINT_PG_DIR=…
#   scripts/postgres.sh stop              # stops it and removes its folder
#
# `start` installs Debian's postgresql package if no server binaries are
# found, makes a cluster with initdb in a temporary folder (as the postgres
# user when run as root: initdb refuses root), and starts it on a free high
# port of 127.0.0.1 with trust authentication. Tests read DATABASE_URL and
# each makes a database of its own on that server. Only the export lines go
# to stdout; progress goes to stderr.
#
# NOT DURABLE: for speed the server runs with fsync=off,
# synchronous_commit=off and full_page_writes=off. A commit is acknowledged
# before its WAL is written, so a crash of the server's processes
# (`pg_ctl restart -m immediate`, a kill -9) loses the last acknowledged
# commits, and a crash of the machine can lose more or corrupt the cluster.
# Never point a deployment at it. A test that restarts or crashes this
# server and checks what survived must turn durability on first:
# holdpoint-cluster (scripts/cluster.sh) runs `ALTER ROLE postgres SET
# synchronous_commit = on` before its immediate restart (`--pg-durable`,
# on by default; crates/holdpoint-cluster/src/infra.rs, durable_commits).
# That covers a process crash; fsync stays off, which only a machine crash
# would expose. Tests that stop their own private server use
# holdpoint-testkit's TempPostgres, which stops it with `-m fast` (committed
# work is flushed). Do not restart a server other tests are using.
set -euo pipefail

say() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

bin_dir() {
  if [ -n "${HOLDPOINT_PG_BIN:-}" ]; then
    echo "$HOLDPOINT_PG_BIN"
    return
  fi
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$(( 20000 + RANDOM % 40000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  die "no free port found"
}

start() {
  local bin
  bin="$(bin_dir)"
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    say "installing PostgreSQL (Debian package postgresql)"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    bin="$(bin_dir)"
    [ -x "$bin/initdb" ] || die "no initdb after installing postgresql"
  fi
  local dir port
  dir="$(mktemp -d "${TMPDIR:-/tmp}/holdpoint-pg.XXXXXX")"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
  port="$(free_port)"
  say "initdb in $dir/data ($bin)"
  as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync --no-instructions >&2
  # Test settings, not durable (see the header): no fsync, asynchronous
  # commits, no full-page writes; room for many pools.
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start >&2 || { cat "$dir/server.log" >&2; die "the server did not start"; }
  say "PostgreSQL listening on 127.0.0.1:$port"
  echo "export DATABASE_URL=postgres://postgres@127.0.0.1:$port/postgres"
  echo "export HOLDPOINT_PG_DIR=$dir"
}

stop() {
  local dir="${HOLDPOINT_PG_DIR:-}"
  [ -n "$dir" ] || die "HOLDPOINT_PG_DIR is not set: run stop in the shell that ran eval \"\$(scripts/postgres.sh start)\""
  [ -d "$dir/data" ] || die "$dir holds no cluster"
  local bin
  bin="$(bin_dir)"
  as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  rm -rf "$dir"
  say "stopped and removed $dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
