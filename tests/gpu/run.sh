#!/usr/bin/env bash
# The checks that need a machine with a CUDA device, in one run of a few minutes:
#
#   tests/gpu/run.sh [BUILD_DIR]        (default: build; configured and built when it has no tools)
#
# 1. tutti_gpu_check: the shared conversions and reduction functors on the GPU against CUDA's
#    conversions, the host's results (bitwise) and a float64 reference.
# 2. Discovery: tutti-topo finds the GPU(s) through the CUDA driver and NVML; its XML loads back.
# 3. NVIDIA's NCCL (PyTorch's, when PyTorch with CUDA is there) dumps its topology of this
#    machine; tutti must load that file and see the same GPUs.
# 4. TUTTI_DEVICE=auto refuses to start on this machine (no CUDA backend yet), with the reason;
#    PyTorch with tutti preloaded gets that error rather than a crash or a hang.
# 5. Host-mode sweeps at 8 and 16 local ranks, every result checked (-c 1).
# 6. The whole test suite (ctest) with as many jobs as cores, when TUTTI_GPU_CTEST is not 0.
#
# Logs and files go to $OUT (default gpu-out/). The exit status is the number of failed checks.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
if [[ ! -x $BUILD/tools/tutti-topo ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DTUTTI_CUDA=ON && ninja -C "$BUILD" || exit 1
fi
export NCCL_SOCKET_IFNAME=lo
failed=0
check() {  # check NAME COMMAND...: runs COMMAND, logs to $OUT/NAME.log, counts a failure
  local name=$1 start=$SECONDS
  shift
  if "$@" >"$OUT/$name.log" 2>&1; then
    echo "ok   $name ($((SECONDS - start)) s)"
  else
    echo "FAIL $name ($((SECONDS - start)) s), last lines of $OUT/$name.log:"
    tail -n 15 "$OUT/$name.log" | sed 's/^/     /'
    failed=$((failed + 1))
  fi
}

echo "== machine"
nvidia-smi -L 2>&1 || echo "nvidia-smi: not found"
nvidia-smi topo -m 2>&1 | head -20
echo "cores: $(nproc)"
"$BUILD/tools/tutti-info" 2>&1 | sed -n '/Device backends/,/selects/p'

echo "== checks"
check gpu_check "$BUILD/tests/gpu/tutti_gpu_check"
grep -E '^(ok|FAIL|device)' "$OUT/gpu_check.log" | sed 's/^/     /'

discovered() {  # the GPUs tutti-topo lists: name, PCI bus id, parent, compute capability
  grep -E '^ *\[ *[0-9]+\] GPU ' "$1" | sed -E 's/^ *\[ *[0-9]+\] //; s/  +/ /g' | sort
}
topo_discovery() {
  "$BUILD/tools/tutti-topo" >"$OUT/topo.txt" 2>&1 || return 1
  cat "$OUT/topo.txt"
  [[ -n $(discovered "$OUT/topo.txt") ]] || { echo "no GPU in tutti-topo's output"; return 1; }
  "$BUILD/tools/tutti-topo" --xml "$OUT/tutti-topo.xml" && "$BUILD/tools/tutti-topo" --check "$OUT/tutti-topo.xml" &&
    "$BUILD/tools/tutti-topo" --topo "$OUT/tutti-topo.xml" >"$OUT/topo-reloaded.txt" 2>&1 || return 1
  diff <(discovered "$OUT/topo.txt") <(discovered "$OUT/topo-reloaded.txt")
}
check topo_discovery topo_discovery

if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  nccl_dump() {
    NCCL_TOPO_DUMP_FILE="$OUT/nccl-topo.xml" NCCL_DEBUG=INFO timeout 180 python3 tests/gpu/torch_check.py dump || return 1
    "$BUILD/tools/tutti-topo" --check "$OUT/nccl-topo.xml" &&
      "$BUILD/tools/tutti-topo" --topo "$OUT/nccl-topo.xml" >"$OUT/topo-from-nccl.txt" 2>&1 || return 1
    cat "$OUT/topo-from-nccl.txt"
    echo "GPUs as tutti discovered them / as NCCL's dump describes them:"
    diff <(discovered "$OUT/topo.txt" | awk '{print $2, $3, $NF}') <(discovered "$OUT/topo-from-nccl.txt" | awk '{print $2, $3, $NF}')
  }
  check nccl_topology_dump nccl_dump
  torch_preloaded() {
    LD_PRELOAD="$PWD/$BUILD/nccl/libnccl.so.2" timeout 180 python3 tests/gpu/torch_check.py tutti
  }
  check torch_with_tutti_preloaded torch_preloaded
else
  echo "skip PyTorch checks: no PyTorch with CUDA here"
fi

auto_refuses() {
  local out
  out=$(env -u TUTTI_DEVICE timeout 60 "$BUILD/perf/all_reduce_perf" --local 2 -b 8 -e 8 -n 1 -w 0 2>&1)
  local rc=$?
  echo "$out (exit $rc)"
  [[ $rc -ne 0 && $rc -ne 124 && $out == *"CUDA device backend is not implemented"* ]]
}
check device_auto_refuses auto_refuses

sweep() {  # sweep NAME RANKS MAXBYTES: a checked host-mode sweep, failing on any wrong result
  local log="$OUT/sweep_$1_$2.txt"
  TUTTI_DEVICE=host timeout 240 "$BUILD/perf/$1" --local "$2" -b 8 -e "$3" -f 4 -c 1 -n 10 -w 2 | tee "$log" || return 1
  grep -q 'Out of bounds values : 0 OK' "$log"
}
check sweep_all_reduce_8 sweep all_reduce_perf 8 256M
check sweep_all_reduce_16 sweep all_reduce_perf 16 64M
check sweep_alltoall_8 sweep alltoall_perf 8 64M
check sweep_all_gather_16 sweep all_gather_perf 16 16M
check sweep_reduce_scatter_16 sweep reduce_scatter_perf 16 64M

if [[ ${TUTTI_GPU_CTEST:-1} != 0 ]]; then
  check ctest ctest --test-dir "$BUILD" -j "$(nproc)" --output-on-failure --timeout 240
  grep -E 'tests passed|Failed|Not Run|Timeout' "$OUT/ctest.log" | tail -n 40 | sed 's/^/     /'
fi

echo "== $failed check(s) failed"
exit "$failed"
