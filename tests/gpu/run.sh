#!/usr/bin/env bash
# The checks that need a machine with a CUDA device, in one run of a few minutes, from a bundle
# that tests/gpu/bundle.sh made on a build machine (a GPU machine need not be able to build tutti):
#
#   tests/gpu/run.sh [BUNDLE_DIR]        (default: gpu-bundle)
#
# 1. machine: GPUs, driver, topology as nvidia-smi and tutti-info see them;
# 2. gpu_check: the shared conversions and reduction functors on the GPU against CUDA's
#    conversions, the host's results (bitwise) and a float64 reference;
# 3. discovery: tutti-topo finds the GPU through the CUDA driver and NVML; its XML loads back;
# 4. smoke: one all-reduce through the cuda backend, 2 ranks sharing the GPU, with INFO logs;
# 5. collectives: every collective x type x op at 1, 2, 4 and 8 ranks sharing the GPU (threads),
#    against the float64 reference and bitwise against the host executor; then stream order with
#    the user's kernels before and after, the device at init, a timeout and an abort of a stuck
#    kernel, graph capture refused (tutti_gpu_semantics);
# 6. PyTorch with tutti's libnccl.so.2 preloaded: an all-reduce of a CUDA tensor, one rank; then
#    every torch.distributed collective and send/recv over several dtypes, world size 2 and 4 as
#    processes sharing the GPU under an MPS daemon of our own (p2p between them);
# 7. perf: the sweep tool on the cuda backend: device buffers, CUDA event timing and checking, -g 2
#    (two ranks per thread in one group), ranks sharing the GPU; -G (CUDA graphs) stops with the
#    library's refusal of collectives inside a capture;
# 8. registered buffers mapped between 2 rank processes sharing the GPU (MPS): all-gather,
#    broadcast, all-reduce with -R 1, checked, and the REG trace saying the peer mapped them;
# 9. bench: the executor's copy and reduce loops against cudaMemcpy, all-reduce on a shared GPU;
# 10. NVIDIA's nccl-tests with tutti preloaded, when NCCL_TESTS_DIR names a folder of its binaries
#    (built on that machine from its public sources against NVIDIA's nccl.h: this repository
#    neither holds nor builds them): every binary, -c 1, one rank per GPU as threads (-t); then,
#    when they were built with MPI and OpenMPI's mpirun is there, 2 and 4 processes sharing GPU 0
#    under MPS.
#
# Every step is bounded in time (and TUTTI_TIMEOUT bounds every wait inside tutti). Logs and files
# go to $OUT (default gpu-out/). The exit status is the number of failed checks.
set -uo pipefail
here=$(dirname "$0")
BUNDLE=${1:-}
if [[ -z $BUNDLE ]]; then
  if [[ -d $here/bin ]]; then BUNDLE=$here; else BUNDLE=$here/../../gpu-bundle; fi  # run inside the bundle, or from the tree
fi
cd "$BUNDLE" || { echo "no bundle at $BUNDLE (tests/gpu/bundle.sh makes it)"; exit 1; }
BUNDLE=$PWD
OUT=${OUT:-$BUNDLE/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$BUNDLE/bin:$PATH"
export NCCL_SOCKET_IFNAME=lo TUTTI_TIMEOUT=${TUTTI_TIMEOUT:-20}
failed=0
check() {  # check NAME SECONDS COMMAND...: runs COMMAND (a program or a function of this script),
           # logs to $OUT/NAME.log, kills its whole process group after SECONDS, counts a failure
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  set -m  # its own process group, so the ranks and servers it starts go with it
  ("$@") >"$OUT/$name.log" 2>&1 &
  local pid=$!
  set +m
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS - start >= limit)); then
      echo "(killed after $limit s)" >>"$OUT/$name.log"
      kill -TERM -- "-$pid" 2>/dev/null
      sleep 5
      kill -KILL -- "-$pid" 2>/dev/null
      break
    fi
    sleep 0.2
  done
  wait "$pid"
  rc=$?
  if ((rc == 0)); then
    echo "ok   $name ($((SECONDS - start)) s)"
  else
    echo "FAIL $name (exit $rc after $((SECONDS - start)) s), last lines of $OUT/$name.log:"
    tail -n 25 "$OUT/$name.log" | sed 's/^/     /'
    failed=$((failed + 1))
  fi
}

echo "== machine ($(cat "$BUNDLE/COMMIT" 2>/dev/null || echo unknown commit))"
nvidia-smi -L 2>&1 || echo "nvidia-smi: not found"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | head -3
echo "cores: $(nproc)"
tutti-info 2>&1 | sed -n '/Device backends/,/selects/p'

echo "== checks"
check gpu_check 300 tutti_gpu_check
grep -E '^(ok|FAIL|device)' "$OUT/gpu_check.log" | sed 's/^/     /'

discovered() {  # the GPUs tutti-topo lists: name, PCI bus id, parent, compute capability
  grep -E '^ *\[ *[0-9]+\] GPU ' "$1" | sed -E 's/^ *\[ *[0-9]+\] //; s/  +/ /g' | sort
}
topo_discovery() {
  tutti-topo >"$OUT/topo.txt" 2>&1 || return 1
  cat "$OUT/topo.txt"
  [[ -n $(discovered "$OUT/topo.txt") ]] || { echo "no GPU in tutti-topo's output"; return 1; }
  tutti-topo --xml "$OUT/tutti-topo.xml" && tutti-topo --check "$OUT/tutti-topo.xml" &&
    tutti-topo --topo "$OUT/tutti-topo.xml" >"$OUT/topo-reloaded.txt" 2>&1 || return 1
  diff <(discovered "$OUT/topo.txt") <(discovered "$OUT/topo-reloaded.txt")
}
check topo_discovery 60 topo_discovery

# One all-reduce, 2 ranks as threads on the GPU, logged: if this fails nothing below can pass.
smoke() {
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL TUTTI_DEVICE=cuda TUTTI_ALLOW_SHARED_GPU=1 tutti_gpu_collectives 2 --smoke
}
check smoke 90 smoke
if grep -q '^ok' "$OUT/smoke.log" 2>/dev/null; then
  check collectives 420 tutti_gpu_collectives 1 2 4 8
  grep -E '^(ok|FAIL|==)|first' "$OUT/collectives.log" | sed 's/^/     /'
  check semantics 90 tutti_gpu_semantics
  grep -E '^(ok|FAIL|==)' "$OUT/semantics.log" | sed 's/^/     /'
else
  echo "skip collectives: the smoke test failed"
  failed=$((failed + 1))
fi

if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  torch_preloaded() { LD_PRELOAD="$BUNDLE/nccl/libnccl.so.2" python3 "$BUNDLE/torch_check.py" tutti; }
  check torch_with_tutti_preloaded 180 torch_preloaded
  tail -n 4 "$OUT/torch_with_tutti_preloaded.log" | sed 's/^/     /'
  # Rank processes sharing the GPU need the MPS daemon (tutti refuses them without it): one of our
  # own, with its pipes under $OUT, stopped afterwards. Between the processes: p2p (CUDA IPC).
  export CUDA_MPS_PIPE_DIRECTORY=$OUT/mps CUDA_MPS_LOG_DIRECTORY=$OUT/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d 2>"$OUT/mps-start.log"; then
    for world in 2 4; do
      torch_world() { LD_PRELOAD="$BUNDLE/nccl/libnccl.so.2" NCCL_DEBUG=WARN python3 "$BUNDLE/torch_check.py" collectives "$1"; }
      check "torch_collectives_world$world" 600 torch_world "$world"
      grep -E '^(rank|world)' "$OUT/torch_collectives_world$world.log" | sed 's/^/     /'
    done
    echo quit | nvidia-cuda-mps-control
  else
    echo "FAIL torch collectives: the MPS daemon did not start: $(cat "$OUT/mps-start.log")"
    failed=$((failed + 1))
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
else
  echo "skip PyTorch: no PyTorch with CUDA here"
fi

# Every sweep checks its results (-c 1) and exits non-zero on a wrong value.
perf_sweep() {
  local gpu=(env TUTTI_DEVICE=cuda TUTTI_ALLOW_SHARED_GPU=1)
  "${gpu[@]}" all_reduce_perf --local 2 -b 8 -e 16M -f 4 -c 1 -n 5 -w 2 &&
    "${gpu[@]}" all_reduce_perf --local 4 -g 2 -b 8 -e 1M -f 8 -c 1 -n 5 &&
    "${gpu[@]}" sendrecv_perf --local 2 -b 8 -e 1M -f 8 -c 1 -n 5
}
check perf_sweep 240 perf_sweep
# Collectives inside a CUDA graph capture are refused for now (ncclInvalidUsage naming the
# capture): -G must stop with that error, not hang or run wrong.
graph_capture_refused() {
  ! env TUTTI_DEVICE=cuda TUTTI_ALLOW_SHARED_GPU=1 all_reduce_perf --local 2 -b 8 -e 1M -f 8 -c 1 -n 5 -G 3 &&
    grep -q 'captured into a CUDA graph' "$OUT/graph_capture_refused.log"
}
check graph_capture_refused 60 graph_capture_refused
grep -E '^# (GPUs|Out of bounds)|^#  Rank' "$OUT/perf_sweep.log" | sed 's/^/     /'

# Registered buffers mapped between rank processes (runtime/peer_buffers.h): 2 processes sharing the
# GPU under an MPS daemon of our own, all-gather, broadcast and all-reduce on ncclMemAlloc buffers
# registered with -R 1, checked (-c 1); rank 0's REG trace must say a peer mapped its buffers, and
# no rank's that one was copied.
mapped_registered() {
  local port=$((20000 + RANDOM % 20000)) rc=0 coll r
  for coll in all_gather_perf broadcast_perf all_reduce_perf; do
    local pids=()
    for r in 0 1; do
      env TUTTI_DEVICE=cuda TUTTI_ALLOW_SHARED_GPU=1 NCCL_DEBUG=TRACE NCCL_DEBUG_SUBSYS=REG NCCL_COMM_ID=127.0.0.1:$port \
        RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 "$coll" -b 1M -e 16M -f 4 -c 1 -n 5 -w 2 -R 1 \
        >"$OUT/mapped_${coll}_$r.log" 2>&1 &
      pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
    port=$((port + 1))
  done
  ((rc == 0)) && grep -q 'is mapped by' "$OUT"/mapped_*_0.log && ! grep -q 'is copied' "$OUT"/mapped_*.log
}
export CUDA_MPS_PIPE_DIRECTORY=$OUT/mps CUDA_MPS_LOG_DIRECTORY=$OUT/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d 2>"$OUT/mps-start-mapped.log"; then
  check mapped_registered 240 mapped_registered
  grep -h -E 'is (mapped by|copied)|Out of bounds' "$OUT"/mapped_*_0.log | head -n 6 | sed 's/^/     /'
  echo quit | nvidia-cuda-mps-control
else
  echo "FAIL mapped registered buffers: the MPS daemon did not start: $(cat "$OUT/mps-start-mapped.log")"
  failed=$((failed + 1))
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY

check bench 300 tutti_gpu_bench
cat "$OUT/bench.log"

# nccl-tests prints "Out of bounds values : N OK|FAILED" and exits non-zero on a wrong value.
nccl_tests_ok() { grep -q 'Out of bounds values : 0 OK' "$1"; }
nccl_tests_threads() {  # every binary, one rank per GPU as threads of one process
  local gpus bin rc=0
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') || gpus=1
  ((gpus >= 1)) || gpus=1
  for bin in "$NCCL_TESTS_DIR"/*_perf; do
    echo "== $(basename "$bin") -t $gpus"
    env LD_PRELOAD="$BUNDLE/nccl/libnccl.so.2" LD_LIBRARY_PATH="$BUNDLE/nccl:$LD_LIBRARY_PATH" TUTTI_DEVICE=cuda \
      "$bin" -b 8 -e 32M -f 8 -c 1 -n 5 -w 1 -t "$gpus" -g 1 >"$OUT/nccl_tests_$(basename "$bin").log" 2>&1 &&
      nccl_tests_ok "$OUT/nccl_tests_$(basename "$bin").log" || { echo "FAIL $(basename "$bin")"; rc=1; }
    grep -E 'Out of bounds|Avg bus bandwidth' "$OUT/nccl_tests_$(basename "$bin").log"
  done
  return $rc
}
nccl_tests_processes() {  # every binary, $1 processes sharing GPU 0 (NCCL_TESTS_DEVICE=0) under MPS
  local np=$1 bin rc=0 log
  for bin in "$NCCL_TESTS_DIR"/*_perf; do
    log=$OUT/nccl_tests_np${np}_$(basename "$bin").log
    echo "== $(basename "$bin") mpirun -np $np"
    mpirun --allow-run-as-root --oversubscribe -np "$np" -x LD_PRELOAD="$BUNDLE/nccl/libnccl.so.2" \
      -x LD_LIBRARY_PATH="$BUNDLE/nccl:$LD_LIBRARY_PATH" -x TUTTI_DEVICE=cuda -x TUTTI_ALLOW_SHARED_GPU=1 \
      -x NCCL_TESTS_DEVICE=0 -x NCCL_SOCKET_IFNAME -x TUTTI_TIMEOUT -x CUDA_MPS_PIPE_DIRECTORY \
      "$bin" -b 8 -e 8M -f 8 -c 1 -n 5 -w 1 >"$log" 2>&1 && nccl_tests_ok "$log" || { echo "FAIL $(basename "$bin")"; rc=1; }
    grep -E 'Out of bounds|Avg bus bandwidth' "$log"
  done
  return $rc
}
if [[ -n ${NCCL_TESTS_DIR:-} ]]; then
  if compgen -G "$NCCL_TESTS_DIR/*_perf" >/dev/null; then
    check nccl_tests_threads 420 nccl_tests_threads
    grep -E '^(==|FAIL)|Out of bounds' "$OUT/nccl_tests_threads.log" | sed 's/^/     /'
    if mpirun --version 2>/dev/null | grep -q 'Open MPI' && ldd "$NCCL_TESTS_DIR/all_reduce_perf" 2>/dev/null | grep -q libmpi; then
      export CUDA_MPS_PIPE_DIRECTORY=$OUT/mps CUDA_MPS_LOG_DIRECTORY=$OUT/mps-log
      if nvidia-cuda-mps-control -d 2>"$OUT/mps-start-nccl-tests.log"; then
        for np in 2 4; do
          check "nccl_tests_np$np" 420 nccl_tests_processes "$np"
          grep -E '^(==|FAIL)|Out of bounds' "$OUT/nccl_tests_np$np.log" | sed 's/^/     /'
        done
        echo quit | nvidia-cuda-mps-control
      else
        echo "FAIL nccl-tests as processes: the MPS daemon did not start: $(cat "$OUT/mps-start-nccl-tests.log")"
        failed=$((failed + 1))
      fi
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    else
      echo "skip nccl-tests as processes: no OpenMPI mpirun, or its binaries were built without MPI"
    fi
  else
    echo "FAIL nccl-tests: no *_perf binary in NCCL_TESTS_DIR=$NCCL_TESTS_DIR"
    failed=$((failed + 1))
  fi
else
  echo "skip nccl-tests: NCCL_TESTS_DIR is not set (a folder of its binaries built on this machine)"
fi

echo "== $failed check(s) failed"
exit "$failed"
