#!/bin/sh
# Checks the dynamic symbols of tutti's libraries against NVIDIA's libnccl.so.2 of the release
# tutti's nccl.h declares (nccl_exports_<version>.txt): the drop-in exports exactly those names
# with the same binding (pnccl* strong, nccl* weak aliases of them) and SONAME, plus exactly the
# names other NCCL-compatible libraries share beyond NVIDIA's (the extensions list); libtutti.so
# exports the same plus exactly the tutti* functions of tutti.h. Given an older NVIDIA library,
# also checks that the list keeps every name it exports: NCCL never removes one.
# Usage: check_exports.sh <expected list> <extensions list> <our libnccl.so.2> <our libtutti.so> <tutti.h>
#        [NVIDIA's library]
set -eu
expected=$1 extensions=$2 ours=$3 tutti=$4 tutti_header=$5 older=${6:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# "binding name" per defined dynamic symbol, sorted by name (T: global function, W: weak, ...).
symbols() { nm -D --defined-only "$1" | awk 'NF == 3 {print $2, $3}' | sort -k2; }

# Every weak nccl* must sit at the address of its strong pnccl* twin, as in NVIDIA's library,
# so that a profiler interposing ncclX can still reach pncclX.
check_aliases() {
  nm -D --defined-only "$1" | awk -v lib="$1" '
    NF == 3 { address[$3] = $1; binding[$3] = $2 }
    END {
      bad = 0
      for (name in binding)
        if (binding[name] == "W" && name ~ /^nccl/) {
          twin = "p" name
          if (!(twin in address) || address[twin] != address[name]) {
            print lib ": " name " is not an alias of " twin; bad = 1
          }
        }
      exit bad
    }' || failed=1
}

grep -v '^#' "$expected" | sort -k2 > "$work/nvidia"
nvidia=$expected
if [ ! -s "$work/nvidia" ]; then echo "no symbols read from $expected"; exit 1; fi
grep -v '^#' "$extensions" | sort -k2 > "$work/shared"
if [ ! -s "$work/shared" ]; then echo "no symbols read from $extensions"; exit 1; fi
if grep -Fxf "$work/nvidia" "$work/shared"; then echo "$extensions repeats names of $expected (above)"; exit 1; fi
# What the libraries' NCCL part must be: NVIDIA's names and the shared extensions, by name.
sort -k2 "$work/nvidia" "$work/shared" > "$work/expected"
if [ -n "$older" ]; then
  symbols "$older" > "$work/older"
  if [ ! -s "$work/older" ]; then echo "no symbols read from $older"; exit 1; fi
  sort "$work/older" > "$work/older.sorted"
  sort "$work/nvidia" > "$work/nvidia.sorted"
  comm -23 "$work/older.sorted" "$work/nvidia.sorted" > "$work/missing"
  if [ -s "$work/missing" ]; then
    echo "$expected lacks names that $older exports:"
    cat "$work/missing"
    failed=1
  fi
fi

symbols "$ours" > "$work/ours"
if ! diff "$work/expected" "$work/ours" > "$work/ours.diff"; then
  echo "$ours: exports differ from $nvidia and $extensions (< expected only, > tutti only):"
  cat "$work/ours.diff"
  failed=1
fi
check_aliases "$ours"
if ! readelf -d "$ours" | grep -q 'SONAME.*\[libnccl\.so\.2\]'; then
  echo "$ours: SONAME is not libnccl.so.2"
  failed=1
fi

symbols "$tutti" > "$work/tutti"
grep -v ' tutti' "$work/tutti" > "$work/tutti_nccl" || true
if ! diff "$work/expected" "$work/tutti_nccl" > "$work/tutti.diff"; then
  echo "$tutti: NCCL exports differ from $nvidia and $extensions (< expected only, > tutti only):"
  cat "$work/tutti.diff"
  failed=1
fi
check_aliases "$tutti"
# The extensions: every function tutti.h declares, as a strong symbol, and nothing else.
grep -o '\btutti[A-Za-z0-9_]*(' "$tutti_header" | tr -d '(' | sort -u | sed 's/^/T /' > "$work/declared"
grep ' tutti' "$work/tutti" | sort -k2 > "$work/extensions" || true
if ! diff "$work/declared" "$work/extensions" > "$work/extensions.diff"; then
  echo "$tutti: tutti* exports differ from the functions $tutti_header declares (< declared, > exported):"
  cat "$work/extensions.diff"
  failed=1
fi

if [ "$failed" -ne 0 ]; then exit 1; fi
echo "exports match the $(wc -l < "$work/nvidia") symbols of $(basename "$expected") and the $(wc -l < "$work/shared") of $(basename "$extensions"); libtutti.so adds $(wc -l < "$work/extensions") tutti* functions"
