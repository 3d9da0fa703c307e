#!/bin/sh
# Runs the layout dump built against tutti's nccl.h and the one built against NVIDIA's, and
# fails with the differing lines if their outputs differ.
# Usage: compare_layouts.sh <dump built against tutti's header> <dump built against NVIDIA's>
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$1" > "$work/tutti"
"$2" > "$work/nvidia"
if ! diff "$work/nvidia" "$work/tutti"; then
  echo "nccl.h ABI facts differ (< NVIDIA's header, > tutti's)"
  exit 1
fi
echo "$(wc -l < "$work/tutti") ABI facts identical"
