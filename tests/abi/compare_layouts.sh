#!/bin/sh
# Runs the layout dump built against tutti's nccl.h and compares its output with NVIDIA's facts
# (nccl_facts_<version>.txt), where "#tutti <fact> <value>" lines replace the facts tutti keeps
# apart on purpose; fails with the differing lines.
# Usage: compare_layouts.sh <dump built against tutti's header> <NVIDIA's facts>
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$1" > "$work/tutti"
# A fact's key is its line without the last field (values of replaced facts are one word).
awk '
  /^#tutti / { line = substr($0, 8); key = line; sub(/ [^ ]*$/, "", key); replaced[key] = line; next }
  /^#/ { next }
  { key = $0; sub(/ [^ ]*$/, "", key); print (key in replaced) ? replaced[key] : $0 }
' "$2" > "$work/expected"
if ! diff "$work/expected" "$work/tutti"; then
  echo "nccl.h ABI facts differ (< NVIDIA's header, > tutti's)"
  exit 1
fi
echo "$(wc -l < "$work/tutti") ABI facts identical"
