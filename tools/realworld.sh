#!/usr/bin/env bash
# Builds the real components the end-to-end tests run against, from the kit in ../shared/realworld
# (beside this repository, as on the developers' machines and in CI), using the package registries
# only:
#   - llama.cpp's own llama-server (OpenAI-compatible) and a tiny random-weight model (~2 min);
#   - Grafana k6 v0.48.0 (~2 min).
# Cached under $PHASEMETER_REALWORLD (default $HOME/.cache/phasemeter-realworld), keyed by the kit's
# version (a hash of its files): a second run takes a second, a changed kit builds anew. Writes
# paths.properties there, which the tests read; prints it.
#
#   bash tools/realworld.sh            # build (or reuse) both
#   PHASEMETER_REALWORLD_KIT=/path/to/realworld bash tools/realworld.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIT="${PHASEMETER_REALWORLD_KIT:-$ROOT/../shared/realworld}"
CACHE="${PHASEMETER_REALWORLD:-$HOME/.cache/phasemeter-realworld}"
if [ ! -f "$KIT/llama/build.sh" ] || [ ! -f "$KIT/k6/build.sh" ]; then
  echo "tools/realworld.sh: no kit at $KIT (llama/build.sh, k6/build.sh); set PHASEMETER_REALWORLD_KIT" >&2
  exit 2
fi
key() { (cd "$1" && find . -type f ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-12; }
# Builds one component; a build that fails (a download cut short, a binary that no longer runs
# after an image upgrade) is wiped and tried once more from scratch.
build() {
  local script="$1" out="$2" got
  if got="$(bash "$script" "$out" | tail -1)"; then echo "$got"; return 0; fi
  echo "tools/realworld.sh: $script failed; building $out again from scratch" >&2
  rm -rf "$out"
  bash "$script" "$out" | tail -1
}
LLAMA_OUT="$CACHE/llama-$(key "$KIT/llama")"
K6_OUT="$CACHE/k6-$(key "$KIT/k6")"
mkdir -p "$CACHE"
start=$(date +%s)
echo "tools/realworld.sh: llama-server -> $LLAMA_OUT" >&2
LLAMA_SERVER="$(build "$KIT/llama/build.sh" "$LLAMA_OUT")"
echo "tools/realworld.sh: k6 -> $K6_OUT" >&2
K6="$(build "$KIT/k6/build.sh" "$K6_OUT")"
MODEL="$LLAMA_OUT/model/tiny-llama-random-15M-f16.gguf"
[ -x "$LLAMA_SERVER" ] && [ -f "$MODEL" ] && [ -x "$K6" ] || { echo "tools/realworld.sh: build incomplete" >&2; exit 1; }
cat >"$CACHE/paths.properties.tmp" <<PROPS
# Written by tools/realworld.sh; read by the end-to-end tests.
llama.server=$LLAMA_SERVER
llama.model=$MODEL
llama.version=$("$LLAMA_SERVER" --version 2>&1 | head -1 | sed "s/^version: //")
k6=$K6
k6.version=$("$K6" version 2>/dev/null | head -1 | awk '{print $2}')
PROPS
mv "$CACHE/paths.properties.tmp" "$CACHE/paths.properties"
# Builds of other kit versions are dead weight.
for old in "$CACHE"/llama-* "$CACHE"/k6-*; do
  [ -d "$old" ] && [ "$old" != "$LLAMA_OUT" ] && [ "$old" != "$K6_OUT" ] && rm -rf "$old"
done
echo "tools/realworld.sh: ready in $(( $(date +%s) - start )) s" >&2
cat "$CACHE/paths.properties"
