#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address: the sources they reach are
# compiled here, instrumented, apart from the main build) and runs each for a bounded time.
# Exits 77 (skipped) when clang cannot build a libFuzzer program (Debian: apt-get install clang).
#
# Usage: fuzz.sh <work dir> [seconds per target, default 20]
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
work=$1
seconds=${2:-20}
mkdir -p "$work"

clang=""
for c in clang++ clang++-14 clang++-15 clang++-16; do
  if command -v "$c" >/dev/null && echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
       "$c" -x c++ -fsanitize=fuzzer - -o "$work/probe" 2>/dev/null; then clang=$c; break; fi
done
if [ -z "$clang" ]; then echo "skipped: no clang that builds libFuzzer programs (apt-get install clang)"; exit 77; fi
launcher=""
command -v ccache >/dev/null && launcher=ccache

# target name: its sources besides the fuzz target itself
declare -A sources=(
  [fuzz_bootstrap_frames]="bootstrap/wire.cpp $(cd "$src" && echo base/*.cpp)"
  [fuzz_socket_stream]="transports/net/socket/socket_backend.cpp $(cd "$src" && echo base/*.cpp)"
)
status=0
# Objects are shared by the targets within one run, never kept from an earlier run: a header that
# changed since would not show in a source file's time, and a stale object fails the link.
rm -rf "$work/obj"
for target in "${!sources[@]}"; do
  objects=()
  for s in "tests/faults/$target.cpp" ${sources[$target]}; do
    o="$work/obj/${s//\//_}.o"
    # Shared by the targets: compiled once per run of this script (see above).
    [ -f "$o" ] && [ "$o" -nt "$src/$s" ] && { objects+=("$o"); continue; }
    mkdir -p "$work/obj"
    $launcher "$clang" -std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address -I"$src" -I"$src/include" -c "$src/$s" -o "$o" ||
      { echo "$target: compiling $s failed"; exit 1; }
    objects+=("$o")
  done
  "$clang" -fsanitize=fuzzer,address "${objects[@]}" -lpthread -ldl -o "$work/$target" || { echo "$target: link failed"; exit 1; }
  mkdir -p "$work/corpus-$target"
  echo "$target: fuzzing for $seconds s"
  # -timeout: one input that takes 10 s has hung (every read in the target is bounded by 5 s).
  if ! "$work/$target" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$work/crash-$target-" "$work/corpus-$target" 2>"$work/$target.log"; then
    tail -40 "$work/$target.log"
    echo "$target: FAILED (the input is in $work/crash-$target-*)"
    status=1
  else
    grep -E "^Done|cov:" "$work/$target.log" | tail -2
  fi
done
exit $status
