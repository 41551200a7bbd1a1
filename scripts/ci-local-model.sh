#!/usr/bin/env bash
# CI step for the offline local model (`local/smollm2`, the crate
# holdpoint-models-local): fetches the model file, builds the crate with
# `--features llama-cpp` (which compiles llama.cpp from source) and runs its
# unit tests and smoke test (crates/holdpoint-models-local/tests/local.rs:
# a real `transferMoney` call for "Transfer $500 to my savings account."),
# then the unit tests of holdpoint-models with `--features local` (the
# registry resolving `local/…` through the new crate).
#
# Exits 0 with a line "skipped: <why>" when this machine cannot build or
# run it: no C++ compiler, cmake or libclang (after trying to install the
# missing ones, see below), the model cannot be fetched, llama.cpp's build
# fails, or the build takes longer than HOLDPOINT_LOCAL_BUILD_TIMEOUT
# seconds (default 2400). A failure of the smoke test itself, or of the
# crate's own code, exits non-zero.
#
# Missing tools are installed when HOLDPOINT_LOCAL_INSTALL is not 0 (the
# default): `apt-get install cmake libclang-dev` when running as root with
# apt, else `pip install cmake` for cmake alone.
#
# Uses CARGO_TARGET_DIR when set (share it with the rest of CI for a warm
# cache) and HOLDPOINT_MODEL_DIR as fetch-smollm2.sh does.
set -uo pipefail

cd "$(dirname "$0")/.."
started=$(date +%s)
elapsed() { echo $(($(date +%s) - started)); }
skip() {
    echo "skipped: $* (after $(elapsed) s)"
    exit 0
}
log() { echo "ci-local-model: $*"; }

have_libclang() {
    [[ -n "${LIBCLANG_PATH:-}" ]] && compgen -G "$LIBCLANG_PATH/libclang*.so*" >/dev/null && return 0
    compgen -G "/usr/lib/llvm-*/lib/libclang.so*" >/dev/null && return 0
    compgen -G "/usr/lib/llvm-*/lib/libclang-[0-9]*.so*" >/dev/null && return 0
    compgen -G "/usr/lib/*/libclang-[0-9]*.so*" >/dev/null && return 0
    compgen -G "/usr/lib64/libclang.so*" >/dev/null && return 0
    return 1
}

missing() {
    local m=()
    command -v c++ >/dev/null 2>&1 || m+=("a C++ compiler")
    command -v cmake >/dev/null 2>&1 || m+=("cmake")
    have_libclang || m+=("libclang")
    echo "${m[*]:-}"
}

# 1. Toolchain.
need=$(missing)
if [[ -n "$need" && "${HOLDPOINT_LOCAL_INSTALL:-1}" != 0 ]]; then
    log "installing missing build tools: $need"
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        if ! { apt-get update -qq && apt-get install -y -qq cmake libclang-dev g++; } >/tmp/ci-local-model-apt.log 2>&1; then
            log "apt-get failed (see /tmp/ci-local-model-apt.log)"
        fi
    fi
    if ! command -v cmake >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
        python3 -m pip install --quiet cmake >/dev/null 2>&1 || log "pip install cmake failed"
        hash -r
    fi
    need=$(missing)
fi
if [[ -n "$need" ]]; then
    skip "llama.cpp cannot be built here: missing $need"
fi
log "toolchain ready ($(elapsed) s)"

# 2. The model file.
if ! model=$(scripts/fetch-smollm2.sh); then
    skip "could not fetch the SmolLM2 model file"
fi
log "model at $model ($(elapsed) s)"
export HOLDPOINT_MODEL_DIR
HOLDPOINT_MODEL_DIR=$(dirname "$model")

# 3. Build (llama.cpp included), with a time limit.
build_log=$(mktemp)
build_started=$(date +%s)
timeout "${HOLDPOINT_LOCAL_BUILD_TIMEOUT:-2400}" bash -c '
    cargo test -p holdpoint-models-local --features llama-cpp --lib --test local --no-run &&
    cargo test -p holdpoint-models --features local --lib --no-run' >"$build_log" 2>&1
status=$?
build_time=$(($(date +%s) - build_started))
if [[ $status == 124 ]]; then
    tail -n 20 "$build_log"
    skip "the build with llama.cpp did not finish in ${HOLDPOINT_LOCAL_BUILD_TIMEOUT:-2400} s"
fi
if [[ $status != 0 ]]; then
    if grep -q "failed to run custom build command for \`llama-cpp-sys-2" "$build_log"; then
        grep -E "error|CMake|cmake" "$build_log" | tail -n 20
        skip "llama.cpp (llama-cpp-sys-2) failed to build with this toolchain"
    fi
    cat "$build_log"
    log "the build of holdpoint-models-local --features llama-cpp (or holdpoint-models --features local) failed"
    exit 1
fi
log "built in ${build_time} s"

# 4. The unit tests and the smoke test, then the registry's unit tests.
cargo test -p holdpoint-models-local --features llama-cpp --lib --test local -- --nocapture --test-threads=1 &&
    cargo test -p holdpoint-models --features local --lib
status=$?
log "done in $(elapsed) s (build ${build_time} s)"
exit $status
