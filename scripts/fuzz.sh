#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 60) and
# reports crashes. Developer helper, not part of CI.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Environment:
#   FUZZ_TOOLCHAIN   cargo toolchain to build with: "nightly" (default when a
#                    nightly toolchain is installed) or "stable" (then
#                    RUSTC_BOOTSTRAP=1 unlocks the -Z flags cargo-fuzz needs)
#   FUZZ_SANITIZER   address (default) or none (faster, no memory checks)
#   FUZZ_JOBS        targets run at once (default 1)
#   CARGO_TARGET_DIR builds go to $CARGO_TARGET_DIR/fuzz (default target/fuzz)
#
# Each target's seeds (fuzz/corpus/TARGET, committed) are read, never
# written: new inputs go to $CARGO_TARGET_DIR/fuzz/corpus/TARGET, so later
# runs start from what earlier runs found. Crashes land in
# fuzz/artifacts/TARGET/; replay one with
#   $CARGO_TARGET_DIR/fuzz/<host>/release/TARGET fuzz/artifacts/TARGET/crash-…
# and turn it into a test in crates/holdpoint/tests/regressions.rs.
set -euo pipefail

seconds="${1:-60}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
fuzz="$root/fuzz"
target_dir="${CARGO_TARGET_DIR:-$root/target}/fuzz"
jobs="${FUZZ_JOBS:-1}"

if ! command -v cargo-fuzz >/dev/null; then
    echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2
    exit 2
fi

toolchain="${FUZZ_TOOLCHAIN:-}"
if [[ -z "$toolchain" ]]; then
    if rustup run nightly rustc --version >/dev/null 2>&1; then toolchain=nightly; else toolchain=stable; fi
fi
cargo_cmd=(cargo "+$toolchain")
sanitizer="${FUZZ_SANITIZER:-address}"
if [[ "$toolchain" != nightly ]]; then
    # Stable rustc accepts the nightly-only -Zsanitizer flag when told it is
    # bootstrapping (the ASan runtime ships with stable's rust-std too).
    # With FUZZ_SANITIZER=none no -Z flag is needed at all.
    export RUSTC_BOOTSTRAP=1
fi
host="$(rustc "+$toolchain" -vV | sed -n 's/^host: //p')"

cd "$fuzz"
build=("${cargo_cmd[@]}" fuzz build --sanitizer "$sanitizer" --target-dir "$target_dir")
if [[ $# -gt 0 ]]; then
    targets=("$@")
    echo "building ${targets[*]} ($toolchain, sanitizer $sanitizer) into $target_dir"
    for t in "${targets[@]}"; do "${build[@]}" "$t"; done
else
    mapfile -t targets < <("${cargo_cmd[@]}" fuzz list)
    echo "building ${#targets[@]} targets ($toolchain, sanitizer $sanitizer) into $target_dir"
    "${build[@]}"
fi

run_one() {
    local t="$1"
    local bin="$target_dir/$host/release/$t"
    local work="$target_dir/corpus/$t"
    local artifacts="$fuzz/artifacts/$t"
    local log="$target_dir/logs/$t.log"
    mkdir -p "$work" "$artifacts" "$(dirname "$log")"
    local seeds=()
    [[ -d "$fuzz/corpus/$t" ]] && seeds=("$fuzz/corpus/$t")
    local status=0
    "$bin" "$work" "${seeds[@]}" \
        -max_total_time="$seconds" \
        -dict="$fuzz/json.dict" \
        -timeout=20 \
        -rss_limit_mb=2048 \
        -print_final_stats=1 \
        -artifact_prefix="$artifacts/" >"$log" 2>&1 || status=$?
    local runs execs
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    execs="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
    local found
    found="$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) | wc -l)"
    if [[ $status -ne 0 ]]; then
        printf '%-20s CRASH  runs=%s exec/s=%s artifacts=%s log=%s\n' "$t" "${runs:-?}" "${execs:-?}" "$found" "$log"
        grep -m3 -E 'panicked|ERROR: (libFuzzer|AddressSanitizer)' "$log" | sed 's/^/    /' || true
        return 1
    fi
    printf '%-20s ok     runs=%s exec/s=%s corpus=%s\n' "$t" "${runs:-?}" "${execs:-?}" "$(find "$work" -type f | wc -l)"
}

echo "running each for ${seconds}s"
failed=0
running=0
for t in "${targets[@]}"; do
    run_one "$t" &
    running=$((running + 1))
    if [[ $running -ge $jobs ]]; then
        wait -n || failed=$((failed + 1))
        running=$((running - 1))
    fi
done
while [[ $running -gt 0 ]]; do
    wait -n || failed=$((failed + 1))
    running=$((running - 1))
done

if [[ $failed -gt 0 ]]; then
    echo "$failed target(s) crashed; see fuzz/artifacts/"
    exit 1
fi
echo "no crashes"
