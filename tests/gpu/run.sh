#!/usr/bin/env bash
# The checks that need a machine with a CUDA device, from a bundle that tests/gpu/bundle.sh made on a
# build machine (a GPU machine need not be able to build tutti; never build the bundle there), sized
# to the time a GPU is lent: every step has a limit of its own, and the limits add up to at most
# 240 s for the whole run and 60 s for --smoke (`run.sh --budget` checks both).
#
#   tests/gpu/run.sh [--smoke] [BUNDLE_DIR]          (default: the bundle it sits in, else gpu-bundle)
#   tests/gpu/run.sh [--smoke] --emulated BUILD_DIR  (no GPU: a build tree over the emulated CUDA driver)
#   tests/gpu/run.sh --steps | --budget | --help
#
# The steps, in order (`--steps` lists each with its limit):
#  preflight     GPUs, driver, compute mode (nvidia-smi); /dev/shm; python, torch and NVIDIA's NCCL
#                (the nccl wheel's) versions; `ldd` of every bundled binary and library, failing on
#                any "not found"; the CUDA driver's version and device attributes (VMM, POSIX
#                descriptor handles, dma-buf, GPUDirect RDMA, SMs, compute capability) through
#                ctypes, failing where the driver is older than the bundle's CUDA runtime;
#                tutti-info, which must select the cuda backend.
#  smoke_ll, smoke_simple
#                one all-reduce of 4 KiB and one of 4 MiB with 1 and 2 ranks sharing the GPU
#                (tutti_gpu_collectives --smoke), then all_reduce_perf with 1 and 2 ranks, checked:
#                with NCCL_PROTO=LL (Simple carries what LL cannot;
#                messages up to 16 KiB go as LL lines) and NCCL_PROTO=Simple, under
#                CUDA_MODULE_LOADING=EAGER. Every later step runs only when both passed. When one
#                failed: smoke_one_channel reruns it with NCCL_MAX_NCHANNELS=1, smoke_sanitizer
#                under compute-sanitizer (where the machine has it), and the run stops.
#  semantics     stream order, the device at init, a timeout, abort of a stuck kernel, capture refused.
#  collectives   every collective x type x op at 2 and 4 ranks sharing the GPU (threads), against
#                the float64 reference and bitwise against the host executor.
#  bench         the executor's copy and reduce loops against cudaMemcpy, all-reduce on a shared GPU.
#  perf_sweep    the sweep tool on the cuda backend: device buffers, CUDA events, -g 2, checked.
#  graph_capture all_reduce_perf -G must stop with the library's refusal of a capture.
#  topology      tutti-topo finds the GPU through the CUDA driver and NVML; its XML loads back.
#  mps_start     one CUDA MPS daemon for every later step whose rank processes share the GPU, its
#                pipes and logs in a temporary folder, stopped at exit (mps_stop, by a trap).
#                Without nvidia-cuda-mps-control those steps are skipped, saying so.
#  multiprocess  all_reduce_perf and sendrecv_perf as 2 rank processes sharing the GPU (p2p).
#  torch_one_rank
#                PyTorch, one rank: all-reduce of 4 KiB to 128 MiB through tutti (libnccl.so.2
#                preloaded) and through NVIDIA's NCCL (torch's own) in the same step, time and
#                algbw per size side by side; tutti's log must carry its version line
#                ("NCCL version X+tutti-Y") and its communicator the cuda backend, NVIDIA's must not.
#  torch_world2  every torch.distributed collective and send/recv over several dtypes, 2 rank
#                processes under MPS, tutti preloaded (and its version line in the log).
#  mapped_registered
#                registered buffers mapped between 2 rank processes: all-gather, broadcast,
#                all-reduce with -R 1, checked, and the REG trace saying the peer mapped them.
#  nccl_tests    NVIDIA's nccl-tests with tutti preloaded, when NCCL_TESTS_DIR names a folder of its
#                binaries (built on that machine: this repository neither holds nor builds them):
#                every binary, one rank per GPU as threads; all_reduce_perf again with NVIDIA's
#                NCCL for the comparison; 2 processes under MPS when they were built with MPI.
# Graph capture, topology and everything after the smoke run only in the full run.
#
# --emulated BUILD_DIR runs the same script on a machine without a GPU, from a build tree: the steps
# that need a real GPU or the CUDA runtime (the tutti_gpu_* binaries, nvidia-smi, MPS, torch,
# compute-sanitizer, nccl-tests) say "skipped: no GPU"; the rest (tutti's library, its tools and the
# perf tools) run on the emulated CUDA driver, BUILD_DIR/emulated-cuda/libcuda.so.1, with
# TUTTI_DEVICE=cuda and smaller sizes. Rank processes sharing the emulated device find a stand-in
# for the MPS daemon's control pipe (the emulated driver needs no daemon).
#
# Every external command runs inside a step, whose whole process group is sent TERM one second
# before the step's limit and KILL at it (and TUTTI_TIMEOUT bounds every wait inside tutti). The
# output folder $OUT (default gpu-out/ in the bundle) receives two files: logs.tar.gz (every log)
# and summary.txt (what stdout shows: per step PASS/FAIL/SKIP, seconds and key figures). The exit
# status is the number of failed checks.
# shellcheck disable=SC2317  # the steps are functions that check() runs by name
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# name, limit in seconds, the runs that have it (smoke: --smoke and the full run; full: the full
# run only), whether the whole step needs a real GPU (gpu: skipped under --emulated), what it does.
step_table() {
  cat <<'EOF'
preflight          18 smoke  -    machine, versions, ldd of the bundle, the CUDA driver's attributes, tutti-info
smoke_ll           10 smoke  -    all-reduce, 1 and 2 ranks, NCCL_PROTO=LL, checked
smoke_simple       10 smoke  -    all-reduce, 1 and 2 ranks, NCCL_PROTO=Simple, checked
smoke_one_channel   8 smoke  -    (only when a smoke failed) the failed smoke again, NCCL_MAX_NCHANNELS=1
smoke_sanitizer    12 smoke  gpu  (only when a smoke failed) the failed smoke under compute-sanitizer
semantics          14 full   gpu  stream order, device at init, timeout, abort, capture refused
collectives        28 full   gpu  every collective x type x op, 2 and 4 ranks, bitwise as the host
bench              12 full   gpu  copy and reduce loops against cudaMemcpy; all-reduce on a shared GPU
perf_sweep         18 full   -    all_reduce_perf, -g 2 and sendrecv_perf on the cuda backend, checked
graph_capture       6 full   -    all_reduce_perf -G stops with the refusal of a capture
topology            6 full   -    tutti-topo finds the GPU; its XML loads back the same
mps_start           5 full   -    one MPS daemon for every step with rank processes sharing the GPU
multiprocess       10 full   -    all_reduce_perf and sendrecv_perf, 2 rank processes (MPS)
torch_one_rank     24 full   gpu  torch all-reduce, one rank: tutti against NVIDIA's NCCL
torch_world2       22 full   gpu  torch.distributed collectives, 2 rank processes (MPS), tutti
mapped_registered  12 full   -    registered buffers mapped between 2 rank processes (MPS)
nccl_tests         16 full   gpu  NVIDIA's nccl-tests with tutti (NCCL_TESTS_DIR), and against NCCL
mps_stop            3 full   -    the MPS daemon told to quit (at exit)
pack                2 smoke  -    logs.tar.gz (at exit)
EOF
}
FULL_BUDGET=240 SMOKE_BUDGET=60
declare -a STEPS=()
declare -A LIMIT=() RUNS=() NEEDS=() WHAT=() STATUS=()
while read -r name limit runs needs what; do
  STEPS+=("$name") LIMIT[$name]=$limit RUNS[$name]=$runs NEEDS[$name]=$needs WHAT[$name]=$what
done < <(step_table)

# Key figures: the lines of a step's log that the summary shows (at most 20 per step).
declare -A FIGURES=(
  [preflight]='^(==|FAIL|WARN|driver|device [0-9]|GPU|python|torch[ :]|NCCL|nvidia-nccl|/dev/shm|tutti |  cuda|ldd)|selects|skipped'
  [semantics]='^(ok|FAIL|==)'
  [collectives]='^(ok|FAIL|==)|first'
  [bench]='^(\||##|FAIL)'
  [topology]='GPU|^FAIL|differ'
  [torch_one_rank]='.'  # these steps print their figures and nothing else
  [nccl_tests]='.'
  [torch_world2]='^(ok|FAIL|world|rank|raised)'
)
FIGURES_DEFAULT='^(ok|FAIL|WARN|==)|skipped|Out of bounds|Avg bus bandwidth|is (mapped by|copied)|ring transports'

sum_limits() {  # sum_limits full|smoke: what the step limits of that run add up to
  local name sum=0
  for name in "${STEPS[@]}"; do
    [[ $1 == full || ${RUNS[$name]} == smoke ]] && sum=$((sum + LIMIT[$name]))
  done
  echo "$sum"
}
budget() {  # the steps and their limits; non-zero when a run's limits add up to more than it may take
  local name full smoke
  printf '%-18s %5s  %-5s %-4s %s\n' step limit runs gpu what
  for name in "${STEPS[@]}"; do
    printf '%-18s %4ss  %-5s %-4s %s\n' "$name" "${LIMIT[$name]}" "${RUNS[$name]}" "${NEEDS[$name]}" "${WHAT[$name]}"
  done
  full=$(sum_limits full) smoke=$(sum_limits smoke)
  echo "full run: the step limits add up to $full s (at most $FULL_BUDGET)"
  echo "--smoke:  the step limits add up to $smoke s (at most $SMOKE_BUDGET)"
  ((full <= FULL_BUDGET && smoke <= SMOKE_BUDGET))
}

usage() { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

SMOKE_ONLY=0 EMULATED=0 TARGET=
while (($#)); do
  case $1 in
    --smoke) SMOKE_ONLY=1 ;;
    --emulated)
      EMULATED=1
      TARGET=${2:-}
      [[ -n $TARGET ]] || { echo "run.sh: --emulated needs a build folder" >&2; exit 2; }
      shift ;;
    --budget) budget; exit ;;
    --steps) budget >/dev/null; step_table; exit 0 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) TARGET=$1 ;;
  esac
  shift
done

# Where everything is: a bundle's bin/, lib/ and nccl/, or a build tree's perf/, tools/ and libraries.
if ((EMULATED)); then
  BUILD=$(cd "$TARGET" 2>/dev/null && pwd) || { echo "run.sh: no build folder at $TARGET" >&2; exit 2; }
  DRIVER=$BUILD/emulated-cuda/libcuda.so.1
  if [[ ! -e $DRIVER ]]; then
    echo "run.sh: no emulated CUDA driver at $DRIVER (the libcuda.so.1 stand-in; build it first: ninja -C $BUILD tutti_emulated_cuda)" >&2
    exit 1
  fi
  ROOT=$BUILD
  NCCL_LIB=$BUILD/nccl/libnccl.so.2
  export LD_LIBRARY_PATH="$BUILD/emulated-cuda:$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$BUILD/perf:$BUILD/tools:$PATH"
  # What the emulated driver stands for: a GPU (its memory counts as device memory, not the host's),
  # on a PCI bus id the topology places, as discovery finds a real one.
  export TUTTI_EMULATED_MEMORY=device TUTTI_EMULATED_BUS_IDS=0000:17:00.0
  # A GPU's 16 channels are 16 x 4 host threads per rank here: 4 channels keep every step well
  # inside its limit on a machine of two cores, and still run several blocks per launch.
  export NCCL_MAX_NCHANNELS=4
  PERF_NAMES=(all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv)
  BINARIES=("$BUILD/libtutti.so.0" "$NCCL_LIB" "$DRIVER" "$BUILD/tools/tutti-info" "$BUILD/tools/tutti-topo")
  for p in "${PERF_NAMES[@]}"; do BINARIES+=("$BUILD/perf/${p}_perf"); done
  RUNTIME_NEEDED=0  # the stand-in's version is its own business
  BIG=1M MID=256K   # the emulated device runs kernels on host threads: smaller sweeps
  OUT=${OUT:-$BUILD/gpu-out-emulated}
else
  if [[ -z $TARGET ]]; then
    if [[ -d $here/bin ]]; then TARGET=$here; else TARGET=$here/../../gpu-bundle; fi  # inside the bundle, or from the tree
  fi
  BUNDLE=$(cd "$TARGET" 2>/dev/null && pwd) || { echo "run.sh: no bundle at $TARGET (tests/gpu/bundle.sh makes it on a build machine)" >&2; exit 2; }
  ROOT=$BUNDLE
  NCCL_LIB=$BUNDLE/nccl/libnccl.so.2
  export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$BUNDLE/bin:$PATH"
  BINARIES=("$BUNDLE"/bin/* "$BUNDLE"/lib/* "$BUNDLE"/nccl/*)
  # The bundled libcudart's CUDA version (e.g. 13.0) needs a driver of that major version or newer
  # (within a major version, CUDA's minor version compatibility holds).
  runtime=$(cat "$BUNDLE/CUDA_RUNTIME" 2>/dev/null || echo 0)
  RUNTIME_NEEDED=$((10#${runtime%%.*} * 1000))
  BIG=16M MID=1M
  OUT=${OUT:-$BUNDLE/gpu-out}
fi
TORCH_CHECK=$ROOT/torch_check.py
[[ -f $TORCH_CHECK ]] || TORCH_CHECK=$here/torch_check.py
PYTHON=${PYTHON:-python3}
if ! mkdir -p "$OUT" || ! OUT=$(cd "$OUT" && pwd); then echo "run.sh: cannot make the output folder $OUT" >&2; exit 2; fi
rm -f "$OUT/logs.tar.gz" "$OUT/summary.txt"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tutti-gpu.XXXXXX") || exit 2
LOGS=$WORK/logs
MPS_PIPES=$WORK/mps MPS_LOGS=$WORK/logs/mps
mkdir -p "$LOGS" "$MPS_PIPES" "$MPS_LOGS"
MPS_ENV=(CUDA_MPS_PIPE_DIRECTORY="$MPS_PIPES" CUDA_MPS_LOG_DIRECTORY="$MPS_LOGS")
export NCCL_SOCKET_IFNAME=lo TUTTI_TIMEOUT=${TUTTI_TIMEOUT:-10}
unset LD_PRELOAD CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY

failed=0 STEP_PID='' STEP_NAME='' FINISHED=0 INTERRUPTED=0
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((10#$t / 1000)); }

# record NAME STATUS SECONDS [NOTE]: the step's summary line, its key figures, and on a failure the
# last lines of its log.
record() {
  local name=$1 status=$2 seconds=$3 note=${4:-} log=$LOGS/$1.log
  STATUS[$name]=$status
  say "$(printf '%-4s  %-18s %5s s  (limit %s s)%s' "$status" "$name" "$seconds" "${LIMIT[$name]}" "${note:+  $note}")"
  [[ -f $log ]] || return 0
  [[ $status == SKIP ]] && return 0
  local figures lines
  figures=$(grep -E "${FIGURES[$name]:-$FIGURES_DEFAULT}" "$log" | head -n 20)
  if [[ -n $figures ]]; then
    mapfile -t lines <<<"$figures"
    printf '      %s\n' "${lines[@]}" | tee -a "$OUT/summary.txt"
  fi
  if [[ $status == FAIL ]]; then  # the log's last lines, less those shown already
    say "      -- last lines of $name.log:"
    tail -n 10 "$log" | grep -v -x -F -f <(printf '%s\n' "$figures") | sed 's/^/      | /' | tee -a "$OUT/summary.txt"
  fi
}

# check NAME [COMMAND...]: runs COMMAND (a program or a function of this script; by default the
# function NAME) with its output in $LOGS/NAME.log, in a process group of its own that is sent TERM
# one second before the step's limit and KILL at it; what it left running is ended too. Exit status
# 0 is PASS, 77 SKIP (the log's first line says why), anything else FAIL (counted).
check() {
  local name=$1 rc killed=0 termed=0 start now seconds
  shift
  (($#)) || set -- "$name"
  [[ -n ${LIMIT[$name]:-} ]] || { say "FAIL  $name: not in the step table (run.sh is wrong)"; failed=$((failed + 1)); return 1; }
  if ((EMULATED)) && [[ ${NEEDS[$name]} == gpu ]]; then
    echo "skipped: no GPU" >"$LOGS/$name.log"
    record "$name" SKIP 0 "skipped: no GPU"
    return 0
  fi
  start=$(now_ms)
  local term_at=$((start + LIMIT[$name] * 1000 - 1000)) kill_at=$((start + LIMIT[$name] * 1000))
  set -m  # its own process group, so that the ranks and servers it starts go with it
  ("$@") </dev/null >"$LOGS/$name.log" 2>&1 &
  STEP_PID=$! STEP_NAME=$name
  set +m
  while kill -0 "$STEP_PID" 2>/dev/null; do
    now=$(now_ms)
    if ((now >= kill_at)); then
      kill -KILL -- "-$STEP_PID" 2>/dev/null
      killed=1
      break
    elif ((now >= term_at && !termed)); then
      kill -TERM -- "-$STEP_PID" 2>/dev/null
      termed=1 killed=1
    fi
    sleep 0.1
  done
  wait "$STEP_PID"
  rc=$?
  [[ $name == mps_start ]] || kill -KILL -- "-$STEP_PID" 2>/dev/null  # what it left behind (not the daemon it started)
  STEP_PID='' STEP_NAME=''
  seconds=$((($(now_ms) - start + 50) / 100))
  seconds=$((seconds / 10)).$((seconds % 10))
  if ((killed)); then
    echo "(ended at its limit of ${LIMIT[$name]} s)" >>"$LOGS/$name.log"
    failed=$((failed + 1))
    record "$name" FAIL "$seconds" "ended at its limit"
  elif ((rc == 0)); then
    record "$name" PASS "$seconds"
  elif ((rc == 77)); then
    record "$name" SKIP "$seconds" "$(head -n 1 "$LOGS/$name.log")"
  else
    failed=$((failed + 1))
    record "$name" FAIL "$seconds" "exit $rc"
  fi
}

skip() {  # skip NAME WHY: a step that does not run, in the summary
  echo "skipped: $2" >"$LOGS/$1.log"
  record "$1" SKIP 0 "skipped: $2"
}

# At exit, also on TERM or INT: the running step ended, the MPS daemon stopped, the logs packed.
finish() {
  ((FINISHED)) && return
  FINISHED=1
  if [[ -n $STEP_PID ]]; then
    kill -TERM -- "-$STEP_PID" 2>/dev/null
    sleep 1
    kill -KILL -- "-$STEP_PID" 2>/dev/null
    STEP_PID=
    echo "(interrupted)" >>"$LOGS/$STEP_NAME.log"
  fi
  if ((INTERRUPTED)); then
    failed=$((failed + 1))
    say "FAIL  the run was interrupted (TERM or INT)${STEP_NAME:+ during $STEP_NAME}"
  fi
  ((!EMULATED)) && [[ -p $MPS_PIPES/control ]] && check mps_stop  # a daemon of ours is up
  say "== $failed check(s) failed; logs in $OUT/logs.tar.gz"
  cp "$OUT/summary.txt" "$LOGS/summary.txt"
  timeout -k 1 $((LIMIT[pack] - 1)) tar -czf "$OUT/logs.tar.gz" -C "$WORK" logs ||
    echo "run.sh: packing the logs failed" | tee -a "$OUT/summary.txt"
  rm -rf "$WORK"
}
trap 'finish; exit "$failed"' EXIT
trap 'INTERRUPTED=1; exit' TERM INT

gpu() { ((!EMULATED)); }  # a real GPU (and the CUDA runtime) is there
no_gpu() { echo "$1: skipped: no GPU"; }

# --- the steps ----------------------------------------------------------------------------------

# The CUDA driver through ctypes (tutti-info does not print device attributes): cuInit, the driver's
# CUDA version, and for each device the attributes tutti's paths depend on (enum values from the
# toolkit's cuda.h). Entry points a driver does not export by name (the emulated driver exports only
# cuInit, cuDriverGetVersion and cuGetProcAddress_v2) come through cuGetProcAddress_v2. Fails without
# a driver or device, or with a driver older than $1 (a CUDA version code such as 13000: what the
# bundled runtime needs: its major version).
DRIVER_PROBE='
import ctypes, sys
need = int(sys.argv[1])
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as error:
    print("FAIL no CUDA driver: libcuda.so.1:", error); sys.exit(1)
where = next((line.split()[-1] for line in open("/proc/self/maps") if "libcuda.so" in line), "?")
INT, P_INT = ctypes.c_int, ctypes.POINTER(ctypes.c_int)
def entry(name, *argtypes):
    try:
        function = getattr(cuda, name)
    except AttributeError:
        resolve = cuda.cuGetProcAddress_v2
        resolve.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), INT, ctypes.c_uint64, P_INT]
        pointer, status = ctypes.c_void_p(), INT(0)
        result = resolve(name.encode(), ctypes.byref(pointer), 12000, 0, ctypes.byref(status))
        if result != 0 or not pointer.value:
            raise LookupError(f"{name}: not exported, and cuGetProcAddress_v2 gives CUresult {result}")
        function = ctypes.CFUNCTYPE(INT, *argtypes)(pointer.value)
    function.argtypes, function.restype = list(argtypes), INT
    return function
try:
    result = entry("cuInit", ctypes.c_uint)(0)
    if result != 0:
        print(f"FAIL cuInit: CUresult {result} (libcuda at {where})"); sys.exit(1)
    version, count = INT(0), INT(0)
    entry("cuDriverGetVersion", P_INT)(ctypes.byref(version))
    entry("cuDeviceGetCount", P_INT)(ctypes.byref(count))
    device_get = entry("cuDeviceGet", P_INT, INT)
    get_name = entry("cuDeviceGetName", ctypes.c_char_p, INT, INT)
    get_bus = entry("cuDeviceGetPCIBusId", ctypes.c_char_p, INT, INT)
    get_attribute = entry("cuDeviceGetAttribute", P_INT, INT, INT)
except (AttributeError, LookupError) as error:
    print(f"FAIL the CUDA driver at {where} lacks an entry point: {error}"); sys.exit(1)
v = version.value
print(f"driver: CUDA {v // 1000}.{v % 1000 // 10} ({v}), {count.value} device(s), libcuda at {where}")
ok = count.value > 0
if not ok:
    print("FAIL the CUDA driver reports no device")
if need and v < need:
    print(f"FAIL the driver runs CUDA up to {v // 1000}.{v % 1000 // 10}, the bundled CUDA runtime needs a CUDA "
          f"{need // 1000} driver: a newer driver, or a bundle built with an older toolkit")
    ok = False
ATTRIBUTES = [("SMs", 16), ("cc major", 75), ("cc minor", 76), ("VMM", 102), ("POSIX fd handles", 103),
              ("GPUDirect RDMA", 116), ("dma-buf", 124), ("compute mode", 20), ("MPS", 133)]
for ordinal in range(min(count.value, 8)):
    device, name, bus = INT(0), ctypes.create_string_buffer(256), ctypes.create_string_buffer(64)
    if device_get(ctypes.byref(device), ordinal) != 0:
        print(f"FAIL cuDeviceGet({ordinal})"); ok = False; continue
    get_name(name, 256, device.value)
    get_bus(bus, 64, device.value)
    values = {}
    for label, attribute in ATTRIBUTES:
        value = INT(0)
        result = get_attribute(ctypes.byref(value), attribute, device.value)
        values[label] = str(value.value) if result == 0 else f"?(CUresult {result})"
    capability = values.pop("cc major") + "." + values.pop("cc minor")
    rest = ", ".join(k + " " + x for k, x in values.items())
    print(f"device {ordinal}: {name.value.decode(errors=chr(63))}, bus {bus.value.decode()}, "
          f"compute capability {capability}, {rest}")
sys.exit(0 if ok else 1)
'

preflight() {
  local rc=0 f out missing
  echo "== $( ((EMULATED)) && echo "build tree $BUILD, emulated CUDA driver" || echo "bundle $BUNDLE, commit $(cat "$BUNDLE/COMMIT" 2>/dev/null || echo unknown), CUDA runtime $(cat "$BUNDLE/CUDA_RUNTIME" 2>/dev/null || echo unknown)")"
  echo "== host $(hostname), kernel $(uname -r), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "/dev/shm: $(df -h --output=size,avail /dev/shm 2>/dev/null | tail -n 1 | awk '{print $1 " (" $2 " free)"}')"
  if gpu; then
    out=$(timeout 5 nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,compute_mode,persistence_mode,clocks.max.sm \
      --format=csv,noheader 2>&1) || { echo "FAIL nvidia-smi: ${out:-timed out or absent}"; rc=1; out=; }
    while IFS= read -r f; do [[ -n $f ]] && echo "GPU $f"; done <<<"$out"
  else
    no_gpu nvidia-smi
  fi
  if gpu; then
    timeout 14 "$PYTHON" "$TORCH_CHECK" versions 2>&1 || echo "WARN python/torch versions: exit $? (timed out or no python)"
  else
    echo "python $(timeout 3 "$PYTHON" -c 'import platform; print(platform.python_version())' 2>&1)"
    no_gpu "torch and NVIDIA's NCCL"
  fi
  missing=0
  for f in "${BINARIES[@]}"; do
    [[ -f $f ]] || { echo "FAIL ldd: $f is missing"; missing=$((missing + 1)); continue; }
    out=$(timeout 3 ldd "$f" 2>&1)
    grep -q 'not a dynamic executable' <<<"$out" && continue
    if grep -q 'not found' <<<"$out"; then
      echo "FAIL ldd: $f needs $(grep 'not found' <<<"$out" | awk '{print $1}' | tr '\n' ' ')(not found)"
      missing=$((missing + 1))
    fi
  done
  ((missing == 0)) && echo "ldd: ${#BINARIES[@]} binaries and libraries, every library found" || rc=1
  timeout 5 "$PYTHON" -c "$DRIVER_PROBE" "$RUNTIME_NEEDED" 2>&1 || rc=1
  out=$(timeout 5 env TUTTI_DEVICE=auto tutti-info 2>&1) || { echo "FAIL tutti-info: exit $?"; rc=1; }
  grep -E 'tutti |^  (host|cuda)|selects' <<<"$out"
  grep -q 'selects: cuda' <<<"$out" || { echo "FAIL tutti-info: TUTTI_DEVICE=auto does not select the cuda backend"; rc=1; }
  if [[ -n ${NCCL_TESTS_DIR:-} ]]; then echo "NCCL_TESTS_DIR=$NCCL_TESTS_DIR: $(compgen -G "$NCCL_TESTS_DIR/*_perf" | wc -l) binaries"; fi
  return "$rc"
}

# smoke PROTO [VARIABLE=value...]: one all-reduce of 4 KiB and one of 4 MiB, 1 and 2 ranks sharing
# the GPU, then all_reduce_perf with 1 and 2 ranks, checked; TUTTI_TIMEOUT=4 so that a stuck
# kernel gives up (and says where) before the step's limit.
smoke() {
  local proto=$1 rc=0 n
  shift
  local run=(env CUDA_MODULE_LOADING=EAGER NCCL_PROTO="$proto" TUTTI_DEVICE=cuda TUTTI_ALLOW_SHARED_GPU=1 TUTTI_TIMEOUT=4 "$@")
  echo "== NCCL_PROTO=$proto${*:+ $*}"
  if gpu; then
    "${run[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL tutti_gpu_collectives 1 2 --smoke || rc=1
  else
    no_gpu "tutti_gpu_collectives (the CUDA runtime)"
  fi
  for n in 1 2; do
    echo "== all_reduce_perf --local $n"
    "${run[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT all_reduce_perf --local "$n" -b 1K -e 4M -f 64 -c 1 -n 2 -w 1 || rc=1
  done
  return "$rc"
}
smoke_ll() { smoke LL; }
smoke_simple() { smoke Simple; }
smoke_one_channel() {  # smoke_one_channel PROTO...: the failed smokes with one channel
  local proto rc=0
  for proto in "$@"; do smoke "$proto" NCCL_MAX_NCHANNELS=1 || rc=1; done
  return "$rc"
}
smoke_sanitizer() {  # smoke_sanitizer PROTO: the first failed smoke under compute-sanitizer's memcheck
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [[ -x $sanitizer ]] || { echo "skipped: no compute-sanitizer on this machine"; return 77; }
  env CUDA_MODULE_LOADING=EAGER NCCL_PROTO="$1" TUTTI_DEVICE=cuda TUTTI_ALLOW_SHARED_GPU=1 TUTTI_TIMEOUT=4 \
    "$sanitizer" --tool memcheck --error-exitcode 1 --print-limit 20 tutti_gpu_collectives 1 2 --smoke
}

semantics() { tutti_gpu_semantics; }
collectives() { tutti_gpu_collectives 2 4; }
bench() { tutti_gpu_bench $((64 << 20)); }

on_gpu() { env TUTTI_DEVICE=cuda TUTTI_ALLOW_SHARED_GPU=1 "$@"; }
# Every sweep checks its results (-c 1) and exits non-zero on a wrong value.
perf_sweep() {
  echo "== all_reduce_perf --local 2" && on_gpu all_reduce_perf --local 2 -b 8 -e "$BIG" -f 4 -c 1 -n 5 -w 2 &&
    echo "== all_reduce_perf --local 4 -g 2" && on_gpu all_reduce_perf --local 4 -g 2 -b 8 -e "$MID" -f 8 -c 1 -n 5 &&
    echo "== sendrecv_perf --local 2" && on_gpu sendrecv_perf --local 2 -b 8 -e "$MID" -f 8 -c 1 -n 5
}
# Collectives inside a CUDA graph capture are refused for now (ncclInvalidUsage naming the
# capture): -G must stop with that error, not hang or run wrong.
graph_capture() {
  local out
  out=$(on_gpu all_reduce_perf --local 2 -b 8 -e 64K -f 8 -c 1 -n 5 -G 3 2>&1) && { echo "$out"; echo "FAIL -G ran"; return 1; }
  echo "$out"
  grep -q 'captured into a CUDA graph' <<<"$out" || { echo "FAIL -G did not stop with the refusal of a capture"; return 1; }
  echo "ok   -G stopped with the refusal of a capture"
}

discovered() {  # the GPUs tutti-topo lists: name, PCI bus id, parent, compute capability
  grep -E '^ *\[ *[0-9]+\] GPU ' "$1" | sed -E 's/^ *\[ *[0-9]+\] //; s/  +/ /g' | sort
}
topology() {
  local dir=$LOGS/topology
  mkdir -p "$dir"
  tutti-topo >"$dir/topo.txt" 2>&1 || { cat "$dir/topo.txt"; echo "FAIL tutti-topo"; return 1; }
  cat "$dir/topo.txt"
  [[ -n $(discovered "$dir/topo.txt") ]] || { echo "FAIL no GPU in tutti-topo's output"; return 1; }
  if ! tutti-topo --xml "$dir/tutti-topo.xml" || ! tutti-topo --check "$dir/tutti-topo.xml" ||
    ! tutti-topo --topo "$dir/tutti-topo.xml" >"$dir/topo-reloaded.txt" 2>&1; then
    echo "FAIL the XML does not load back"
    return 1
  fi
  diff <(discovered "$dir/topo.txt") <(discovered "$dir/topo-reloaded.txt") || { echo "FAIL the reloaded GPUs differ"; return 1; }
}

mps_start() {
  if ((EMULATED)); then
    mkfifo "$MPS_PIPES/control" || return 1
    echo "skipped: no GPU (rank processes on the emulated driver need no MPS daemon: a stand-in control pipe at $MPS_PIPES/control passes tutti's check)"
    return 77
  fi
  command -v nvidia-cuda-mps-control >/dev/null ||
    { echo "skipped: no nvidia-cuda-mps-control here: the steps with rank processes sharing the GPU are skipped"; return 77; }
  env "${MPS_ENV[@]}" nvidia-cuda-mps-control -d || { echo "FAIL nvidia-cuda-mps-control -d: exit $?"; return 1; }
  local tries=30
  while ((tries-- > 0)) && [[ ! -p $MPS_PIPES/control ]]; do sleep 0.1; done
  [[ -p $MPS_PIPES/control ]] || { echo "FAIL the MPS daemon made no control pipe in $MPS_PIPES"; return 1; }
  echo "ok   MPS daemon up (pipes in $MPS_PIPES)"
}
mps_stop() {
  echo quit | env "${MPS_ENV[@]}" timeout 2 nvidia-cuda-mps-control || { echo "FAIL the MPS daemon did not quit"; return 1; }
  echo "ok   MPS daemon told to quit"
}
mps_up() { [[ -p $MPS_PIPES/control ]] || { echo "skipped: no MPS daemon (see mps_start)"; return 77; }; }

# free_port: a loopback port for a bootstrap root, below the kernel's ephemeral range (where the
# sockets of whatever runs beside this script land) and not listened on now.
free_port() {
  local port tries
  for tries in 1 2 3 4 5 6 7 8; do
    port=$((20000 + RANDOM % 12000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return 0; }
  done
  echo "$port"
}

# two_ranks LOG PROGRAM ARGS...: 2 rank processes sharing the GPU (torchrun-style variables, MPS),
# each logging to LOG.rankR.log.
two_ranks() {
  local log=$1 r rc=0 pids=()
  shift
  local port
  port=$(free_port)
  for r in 0 1; do
    env "${MPS_ENV[@]}" TUTTI_DEVICE=cuda TUTTI_ALLOW_SHARED_GPU=1 NCCL_COMM_ID="127.0.0.1:$port" \
      RANK="$r" WORLD_SIZE=2 LOCAL_RANK="$r" LOCAL_WORLD_SIZE=2 "$@" >"$log.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  return "$rc"
}
multiprocess() {
  mps_up || return 77
  local coll rc=0 log
  for coll in all_reduce_perf sendrecv_perf; do
    log=$LOGS/multiprocess.$coll
    echo "== $coll, 2 rank processes"
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P two_ranks "$log" "$coll" -b 8 -e "$MID" -f 8 -c 1 -n 5 -w 1 || { echo "FAIL $coll"; rc=1; }
    grep -h -E 'ring transports|Out of bounds|Avg bus bandwidth' "$log.rank0.log" | sed -E 's/^.*NCCL INFO //'
  done
  return "$rc"
}

torch_ready() {
  grep -q '^torch_cuda=0' "$LOGS/preflight.log" 2>/dev/null && { echo "skipped: no PyTorch with CUDA here (see preflight)"; return 77; }
  return 0
}
TUTTI_LINE='NCCL version [0-9.]+\+tutti-'
torch_one_rank() {
  torch_ready || return 77
  local rc=0 mine=$LOGS/torch_one_rank.tutti.log theirs=$LOGS/torch_one_rank.nccl.log
  env LD_PRELOAD="$NCCL_LIB" TUTTI_DEVICE=cuda NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$PYTHON" "$TORCH_CHECK" bench >"$mine" 2>&1 ||
    { echo "FAIL torch through tutti"; rc=1; }
  env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$PYTHON" "$TORCH_CHECK" bench >"$theirs" 2>&1 ||
    { echo "FAIL torch through NVIDIA's NCCL"; rc=1; }
  local proof
  if proof=$(grep -m 1 -E -o "$TUTTI_LINE.*" "$mine"); then echo "tutti served it: $proof"; else
    echo "FAIL no \"NCCL version ...+tutti-\" line in the log: torch did not run tutti"
    rc=1
  fi
  grep -q -E 'NCCL INFO comm .* device cuda ' "$mine" || { echo "FAIL tutti's communicator did not say it runs on the cuda backend"; rc=1; }
  grep -q -E "$TUTTI_LINE" "$theirs" && { echo "FAIL tutti ran where NVIDIA's NCCL should have"; rc=1; }
  echo "NVIDIA's NCCL: $(grep -m 1 -E -o 'NCCL version [^ ]+' "$theirs" || echo '(no version line)')"
  grep -E '^(all-reduce|raised)' "$mine" | sed 's/^/tutti: /'
  grep -E '^(all-reduce|raised)' "$theirs" | sed "s/^/NVIDIA's NCCL: /"
  # The two side by side (busbw is 0 at one rank).
  awk '$1 == "allreduce" { key = $2; if (FILENAME == ARGV[1]) { tu[key] = $4; ta[key] = $7; order[++n] = key } else { nu[key] = $4; na[key] = $7 } }
       END { printf "%12s %12s %12s %12s %12s %8s\n", "bytes", "tutti us", "tutti GB/s", "NCCL us", "NCCL GB/s", "us ratio"
             for (i = 1; i <= n; i++) { k = order[i]; printf "%12s %12s %12s %12s %12s %8s\n", k, tu[k], ta[k], (k in nu) ? nu[k] : "-", (k in na) ? na[k] : "-", (k in nu && nu[k] > 0) ? sprintf("%.2f", tu[k] / nu[k]) : "-" } }' \
    "$mine" "$theirs"
  return "$rc"
}
torch_world2() {
  torch_ready || return 77
  mps_up || return 77
  local rc=0 lines
  # The ranks get what is left of the step once python has started (a few seconds).
  env "${MPS_ENV[@]}" LD_PRELOAD="$NCCL_LIB" TUTTI_DEVICE=cuda NCCL_DEBUG=WARN "$PYTHON" "$TORCH_CHECK" collectives 2 "$((LIMIT[torch_world2] - 6))" || rc=1
  lines=$(grep -c -E "$TUTTI_LINE" "$LOGS/torch_world2.log")
  if ((lines >= 2)); then echo "ok   tutti served both ranks ($lines version lines)"; else
    echo "FAIL $lines \"NCCL version ...+tutti-\" line(s) for 2 ranks: torch did not run tutti"
    rc=1
  fi
  return "$rc"
}

# Registered buffers mapped between rank processes (runtime/comm/peer_buffers.h): all-gather, broadcast
# and all-reduce on ncclMemAlloc buffers registered with -R 1, checked (-c 1); rank 0's REG trace
# must say a peer mapped its buffers, and no rank's that one was copied.
mapped_registered() {
  mps_up || return 77
  local coll rc=0
  for coll in all_gather_perf broadcast_perf all_reduce_perf; do
    echo "== $coll -R 1, 2 rank processes"
    NCCL_DEBUG=TRACE NCCL_DEBUG_SUBSYS=REG two_ranks "$LOGS/mapped_registered.$coll" "$coll" -b 1M -e "$BIG" -f 4 -c 1 -n 5 -w 2 -R 1 ||
      { echo "FAIL $coll"; rc=1; }
    grep -h -E 'Out of bounds|Avg bus bandwidth' "$LOGS/mapped_registered.$coll.rank0.log"
  done
  grep -h -E 'is (mapped by|copied)' "$LOGS"/mapped_registered.*.rank0.log | head -n 4 | sed -E 's/^.*NCCL TRACE //'
  grep -q 'is mapped by' "$LOGS"/mapped_registered.*.rank0.log || { echo "FAIL no peer mapped rank 0's registered buffers"; rc=1; }
  ! grep -q 'is copied' "$LOGS"/mapped_registered.*.log || { echo "FAIL a registered buffer was copied"; rc=1; }
  return "$rc"
}

# NVIDIA's nccl-tests print "Out of bounds values : N OK|FAILED" and exit non-zero on a wrong value.
nccl_tests_ok() { grep -q 'Out of bounds values : 0 OK' "$1"; }
nccl_tests() {
  [[ -n ${NCCL_TESTS_DIR:-} ]] || { echo "skipped: NCCL_TESTS_DIR is not set (a folder of its binaries built on this machine)"; return 77; }
  compgen -G "$NCCL_TESTS_DIR/*_perf" >/dev/null || { echo "FAIL no *_perf binary in NCCL_TESTS_DIR=$NCCL_TESTS_DIR"; return 1; }
  local gpus bin name log rc=0 flags=(-b 8 -e 8M -f 8 -c 1 -n 5 -w 1)
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  ((gpus >= 1)) || gpus=1
  local tutti=(env LD_PRELOAD="$NCCL_LIB" LD_LIBRARY_PATH="$(dirname "$NCCL_LIB"):$LD_LIBRARY_PATH" TUTTI_DEVICE=cuda NCCL_DEBUG=VERSION)
  for bin in "$NCCL_TESTS_DIR"/*_perf; do  # every binary, one rank per GPU as threads of one process
    name=$(basename "$bin")
    log=$LOGS/nccl_tests.$name.log
    if ! "${tutti[@]}" "$bin" "${flags[@]}" -t "$gpus" -g 1 >"$log" 2>&1 || ! nccl_tests_ok "$log"; then echo "FAIL $name -t $gpus"; rc=1; fi
    grep -q -E "$TUTTI_LINE" "$log" || { echo "FAIL $name: no tutti version line: tutti did not serve it"; rc=1; }
    echo "$name -t $gpus: $(grep -E -o 'Out of bounds values : .*' "$log" | head -n 1)"
  done
  if [[ -x $NCCL_TESTS_DIR/all_reduce_perf ]]; then  # the same binary with NVIDIA's NCCL, to compare
    log=$LOGS/nccl_tests.nvidia.all_reduce_perf.log
    env NCCL_DEBUG=VERSION "$NCCL_TESTS_DIR/all_reduce_perf" "${flags[@]}" -t "$gpus" -g 1 >"$log" 2>&1 ||
      echo "WARN all_reduce_perf with NVIDIA's NCCL: exit $? (for comparison only)"
    echo "NVIDIA's NCCL: $(grep -m 1 -E -o 'NCCL version [^ ]+' "$log" || echo '(no version line)')"
    awk '$1 ~ /^[0-9]+$/ && NF >= 12 { if (FILENAME == ARGV[1]) { t[$1] = $6; a[$1] = $7; o[++n] = $1 } else { nt[$1] = $6; na[$1] = $7 } }
         END { printf "%12s %12s %12s %12s %12s  (out of place)\n", "bytes", "tutti us", "tutti algbw", "NCCL us", "NCCL algbw"
               for (i = 1; i <= n; i++) { k = o[i]; printf "%12s %12s %12s %12s %12s\n", k, t[k], a[k], (k in nt) ? nt[k] : "-", (k in na) ? na[k] : "-" } }' \
      "$LOGS/nccl_tests.all_reduce_perf.log" "$log"
  fi
  if [[ -p $MPS_PIPES/control ]] && mpirun --version 2>/dev/null | grep -q 'Open MPI' &&
    ldd "$NCCL_TESTS_DIR/all_reduce_perf" 2>/dev/null | grep -q libmpi; then  # 2 processes sharing GPU 0
    log=$LOGS/nccl_tests.np2.all_reduce_perf.log
    env "${MPS_ENV[@]}" mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_PRELOAD="$NCCL_LIB" \
      -x LD_LIBRARY_PATH="$(dirname "$NCCL_LIB"):$LD_LIBRARY_PATH" -x TUTTI_DEVICE=cuda -x TUTTI_ALLOW_SHARED_GPU=1 \
      -x NCCL_TESTS_DEVICE=0 -x NCCL_SOCKET_IFNAME -x TUTTI_TIMEOUT -x CUDA_MPS_PIPE_DIRECTORY \
      "$NCCL_TESTS_DIR/all_reduce_perf" "${flags[@]}" >"$log" 2>&1 || rc=1
    nccl_tests_ok "$log" || rc=1
    ((rc == 0)) || echo "FAIL all_reduce_perf mpirun -np 2"
    echo "all_reduce_perf mpirun -np 2: $(grep -E -o 'Out of bounds values : .*' "$log" | head -n 1)"
  else
    echo "(no 2-process run: no MPS daemon, no OpenMPI mpirun, or the binaries were built without MPI)"
  fi
  return "$rc"
}

# --- the run ------------------------------------------------------------------------------------

say "== tutti GPU check, $( ((SMOKE_ONLY)) && echo "--smoke" || echo "full run")$( ((EMULATED)) && echo ", --emulated (no GPU)"), $(date -u '+%Y-%m-%d %H:%M UTC'); step limits add up to $(sum_limits full) s (full run), $(sum_limits smoke) s (--smoke)"

check preflight
check smoke_ll
check smoke_simple
smoke_failed=()
[[ ${STATUS[smoke_ll]} == FAIL ]] && smoke_failed+=("LL")
[[ ${STATUS[smoke_simple]} == FAIL ]] && smoke_failed+=(Simple)
if ((${#smoke_failed[@]})); then
  check smoke_one_channel smoke_one_channel "${smoke_failed[@]}"
  check smoke_sanitizer smoke_sanitizer "${smoke_failed[0]}"
  for name in "${STEPS[@]}"; do
    [[ ${RUNS[$name]} == full && $name != mps_stop ]] && ((!SMOKE_ONLY)) && skip "$name" "the smoke failed"
  done
  exit
fi
((SMOKE_ONLY)) && exit

check semantics
check collectives
check bench
check perf_sweep
check graph_capture
check topology
check mps_start
check multiprocess
check torch_one_rank
check torch_world2
check mapped_registered
check nccl_tests
exit
