#!/usr/bin/env bash
# Multi-host runs of tutti in network namespaces on this machine: each "host" is a namespace whose
# only interface (tnet0) is a veth into a bridge in a "switch" namespace. Every address used lives
# on those veths; nothing else is contacted. Everything made here is removed on exit.
#
# Usage: run.sh <multihost_rank binary> <ipv4|ipv6|kill|linkdown|shrink|algorithms|alltoallv|emulated|plugin|ib|ib-linkdown|setup-refused|setup-refused-ib> [net plugin or verbs library]
#   ipv4      2 hosts x 2 ranks, every collective/type/op; then 3 hosts x 2 ranks (sum only)
#   algorithms  2 hosts x 2 ranks, then 3 hosts x 1 rank: every algorithm on every collective it serves
#   alltoallv  ncclAllToAllv (multihost_rank's alltoallv mode): 2 hosts x 2 ranks, then 3 hosts x 2 ranks
#   ipv6      2 hosts x 2 ranks over IPv6 (sum only)
#   kill      2 hosts x 2 ranks in an all-reduce loop; one rank is SIGKILLed: every survivor must
#             report ncclRemoteError naming the killed rank, found by the connection's end or a
#             peer's failure notice, not by TUTTI_TIMEOUT (set far above the test's own limit)
#   linkdown  as kill, but the second host's veth is taken down: found by TUTTI_NET_LINK_TIMEOUT
#   shrink    as kill, then the three survivors (two hosts) shrink without the killed rank, with
#             NCCL_SHRINK_ABORT, and check all-reduces on the new communicator
#   emulated  as ipv4's 2 hosts x 2 ranks, every rank on the emulated device (the CUDA executor's
#             code on host threads), through the network transport between hosts; then again with
#             its memory counted as a GPU's (TUTTI_EMULATED_MEMORY=device), in p2p's write, read
#             and copy modes inside a host, and on registered ncclMemAlloc buffers that the ranks of
#             a host map and read in place
#   plugin    2 hosts x 2 ranks (sum only) between hosts through the external net plugin given as
#             the third argument (libnccl-net-tutti.so), loaded by name: NCCL_NET_PLUGIN=tutti
#             NCCL_NET=TuttiSocket; every rank's log must say that the plugin carried its traffic
#   ib        2 hosts x 2 ranks, every collective/type/op, between hosts through the IB backend
#             (NCCL_NET=IB) on the software verbs stand-in given as the third argument, its QPs'
#             bytes carried over the namespaces' veths; every rank's log must name the IB backend;
#             then 3 hosts x 2 ranks (sum only)
#   ib-linkdown  as linkdown, every connection between hosts through the IB backend on the stand-in
#   setup-refused     2 hosts x 2 ranks; rank 2's Socket backend listens on its loopback (it is given
#             NCCL_SOCKET_IFNAME=lo,tnet0), which rank 1 on the other host reaches as its own: the ring's
#             connection from rank 1 is refused. With TUTTI_TIMEOUT=60 every rank must leave within
#             10 s, its error naming rank 1 and the refused connection
#   setup-refused-ib  as setup-refused over the IB backend on the verbs stand-in, which is given no
#             address on any rank (its GIDs say 127.0.0.1): the QPs between the hosts are refused
# Exits 77 (skipped) without root or without `ip netns`.
set -u
rank_bin=$1
variant=$2
plugin_lib=${3:-}
extra_env=()  # what a variant adds to every rank's environment
tag=$$
timeout_s=600     # TUTTI_TIMEOUT for the fault variants: longer than CTest's limit, so it never ends them
link_timeout_s=3  # TUTTI_NET_LINK_TIMEOUT for the fault variants
. "$(dirname "$0")/netns.sh"
netns_require
logdir=$(mktemp -d)
device=host  # TUTTI_DEVICE of every rank

namespaces=()
pids=()
trap netns_cleanup EXIT INT TERM

switch="tutti-sw-$tag"
netns_switch "$switch" || exit 1

subnet4="10.213.$((tag % 250)).0"
subnet6="fd74:7574:7469:$((tag % 9000))"

# make_host <index>: host namespace tutti-h<index>-<tag>, addressed in both families. The
# veth's switch end is tvh<index>-<tag>b (the linkdown variant takes it down).
make_host() {
  netns_host "$switch" "tutti-h$1-$tag" "tvh$1-$tag" "${subnet4%.0}.$(($1 + 1))/24" "$subnet6::$(($1 + 1))/64"
}

# run_job <hosts> <ranks per host> <family 4|6> <mode> [fault]: starts every rank, optionally
# injects the fault, and waits. Returns non-zero when a rank that should pass did not.
run_job() {
  local hosts=$1 per=$2 family=$3 mode=$4 fault=${5:-}
  local nranks=$((hosts * per)) port=$((20000 + (tag + RANDOM) % 20000)) root
  if [ "$family" = 6 ]; then root="[$subnet6::1]:$port"; else root="${subnet4%.0}.1:$port"; fi
  local -a env=(NCCL_COMM_ID="$root" NCCL_SOCKET_IFNAME==tnet0 TUTTI_DEVICE=$device TUTTI_BOOTSTRAP_TIMEOUT=60)
  [ "$family" = 6 ] && env+=(NCCL_SOCKET_FAMILY=AF_INET6)
  [ -n "$fault" ] && env+=(TUTTI_TIMEOUT=$timeout_s TUTTI_NET_LINK_TIMEOUT=$link_timeout_s)
  env+=("${extra_env[@]}")
  pids=()
  local r
  for ((r = 0; r < nranks; r++)); do
    local h=$((r / per))
    ip netns exec "tutti-h$h-$tag" env "${env[@]}" NCCL_HOSTID="host$h" "$rank_bin" "$r" "$nranks" $mode \
      > >(tee "$logdir/rank$r") 2>&1 &
    pids+=($!)
  done
  local victim=$((nranks - 1))
  if [ -n "$fault" ]; then
    sleep 3
    if [ "$fault" = kill ]; then
      echo "killing rank $victim (pid ${pids[$victim]})"
      kill -9 "${pids[$victim]}"
    else
      echo "taking host1's link down"
      ip -n "$switch" link set "tvh1-${tag}b" down
    fi
  fi
  local failed=0 status
  for ((r = 0; r < nranks; r++)); do
    # Bounded: a rank that hangs is killed by the CTest timeout and the trap.
    wait "${pids[$r]}"; status=$?
    if [ "$fault" = kill ] && [ "$r" = "$victim" ]; then continue; fi
    if [ "$status" != 0 ]; then echo "rank $r exited with status $status"; failed=1; fi
    [ -n "$fault" ] || continue
    sleep 0.2  # tee flushes
    # The report must come from detection, naming a rank of the other side, never the timeout.
    if grep -q "TUTTI_TIMEOUT" "$logdir/rank$r"; then echo "rank $r: failed by TUTTI_TIMEOUT, not by detection"; failed=1; fi
    local named="rank $victim \\("
    # A cut link: a rank of the other host (ranks are placed per host in blocks of $per).
    [ "$fault" = linkdown ] && named="rank ($(seq -s '|' $(( r / per == 0 ? per : 0 )) $(( r / per == 0 ? nranks - 1 : per - 1 )))) \\("
    if ! grep -Eq "$named" "$logdir/rank$r"; then echo "rank $r: its error does not name $named"; failed=1; fi
  done
  return $failed
}

# require_ib_logs <nranks>: every rank's log says that the IB backend carried its network traffic.
require_ib_logs() {
  sleep 0.2  # tee flushes
  local r
  for ((r = 0; r < $1; r++)); do
    grep -q "NET: using backend IB" "$logdir/rank$r" && grep -q "NET/IB: standin_0:1, RoCE" "$logdir/rank$r" ||
      { echo "rank $r: its log does not show the IB backend carrying its network traffic"; exit 1; }
  done
}

# run_setup_failure <pattern>...: 2 hosts x 2 ranks in multihost_rank's setup-fails mode with
# TUTTI_TIMEOUT=60, rank 2 with rank2_env besides extra_env. Every rank must fail within 10 s (the
# rank checks that) and its output must match every extended regular expression given.
rank2_env=()
run_setup_failure() {
  local nranks=4 per=2 port=$((20000 + (tag + RANDOM) % 20000)) r status failed=0 pattern
  local -a env=(NCCL_COMM_ID="${subnet4%.0}.1:$port" NCCL_SOCKET_IFNAME==tnet0 TUTTI_DEVICE=$device
                TUTTI_BOOTSTRAP_TIMEOUT=60 TUTTI_TIMEOUT=60 "${extra_env[@]}")
  pids=()
  for ((r = 0; r < nranks; r++)); do
    local -a mine=()
    [ "$r" = 2 ] && mine=("${rank2_env[@]}")
    ip netns exec "tutti-h$((r / per))-$tag" env "${env[@]}" "${mine[@]}" NCCL_HOSTID="host$((r / per))" \
      "$rank_bin" "$r" "$nranks" setup-fails > >(tee "$logdir/rank$r") 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < nranks; r++)); do
    wait "${pids[$r]}"; status=$?
    [ "$status" = 0 ] || { echo "rank $r did not fail within 10 s (status $status)"; failed=1; }
  done
  sleep 0.2  # tee flushes
  for ((r = 0; r < nranks; r++)); do
    for pattern in "$@"; do
      grep -Eq "$pattern" "$logdir/rank$r" || { echo "rank $r: its error does not match '$pattern'"; failed=1; }
    done
  done
  return $failed
}

case "$variant" in
  ipv4)
    make_host 0 && make_host 1 && make_host 2 || exit 1
    run_job 2 2 4 "" || exit 1
    run_job 3 2 4 quick || exit 1 ;;
  algorithms)
    make_host 0 && make_host 1 && make_host 2 || exit 1
    run_job 2 2 4 algorithms || exit 1
    run_job 3 1 4 algorithms || exit 1 ;;
  alltoallv)
    make_host 0 && make_host 1 && make_host 2 || exit 1
    run_job 2 2 4 alltoallv || exit 1
    run_job 3 2 4 alltoallv || exit 1 ;;
  ipv6)
    make_host 0 && make_host 1 || exit 1
    sleep 1  # IPv6 addresses settle
    run_job 2 2 6 quick || exit 1 ;;
  kill)
    make_host 0 && make_host 1 || exit 1
    run_job 2 2 4 faults kill || exit 1 ;;
  linkdown)
    make_host 0 && make_host 1 || exit 1
    run_job 2 2 4 faults linkdown || exit 1 ;;
  emulated)
    make_host 0 && make_host 1 || exit 1
    device=emulated
    run_job 2 2 4 "" || exit 1
    for r in 0 1 2 3; do
      grep -q "device emulated, transports .*net" "$logdir/rank$r" || { echo "rank $r did not run on the emulated device over net"; exit 1; }
    done
    # Again with its memory counted as a GPU's: p2p inside a host (each receiver's FIFO exported to
    # its sender), network FIFOs mapped for the executor between hosts.
    extra_env=(TUTTI_EMULATED_MEMORY=device)
    run_job 2 2 4 quick || exit 1
    for r in 0 1 2 3; do
      grep -q "device emulated, transports net/Socket+p2p" "$logdir/rank$r" || { echo "rank $r (device memory) did not run over net and p2p"; exit 1; }
    done
    # p2p's read mode (the receiver reads the sender's Simple slots) and copy mode (a proxy thread
    # copies each message into the receiver's FIFO): every pair inside a host must say it took it.
    for mode in "NCCL_P2P_READ_ENABLE=1|read mode (the receiver reads" "NCCL_P2P_USE_CUDA_MEMCPY=1|copy mode (NCCL_P2P_USE_CUDA_MEMCPY"; do
      extra_env=(TUTTI_EMULATED_MEMORY=device "${mode%%|*}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=P2P)
      run_job 2 2 4 quick || exit 1
      sleep 0.2  # tee flushes
      for r in 0 1 2 3; do
        grep "connect peer to peer" "$logdir/rank$r" | grep -q "${mode#*|}" ||
          { echo "rank $r: with ${mode%%|*} no pair of its host says it took ${mode#*|}"; exit 1; }
        if grep "connect peer to peer" "$logdir/rank$r" | grep -qv "${mode#*|}"; then
          echo "rank $r: with ${mode%%|*} a pair took another mode"; exit 1
        fi
      done
    done
    # Registered ncclMemAlloc buffers: each host's rank processes map each other's and read them in
    # place; on each host some rank must have read messages so. In write mode, then in copy mode.
    for mode in TUTTI_MAP_REGISTERED=1 NCCL_P2P_USE_CUDA_MEMCPY=1; do
      extra_env=(TUTTI_EMULATED_MEMORY=device "$mode")
      run_job 2 2 4 registered || exit 1
      for h in 0 1; do
        read_in_place=0
        for r in $((2 * h)) $((2 * h + 1)); do
          grep -q "registered cases passed, .*(device emulated, transports net/Socket+p2p" "$logdir/rank$r" ||
            { echo "rank $r (registered buffers, $mode) did not run over net and p2p"; exit 1; }
          grep -Eq "passed, [1-9][0-9]* messages read in place" "$logdir/rank$r" && read_in_place=1
        done
        ((read_in_place)) || { echo "no rank of host $h read a peer's registered buffer in place ($mode)"; exit 1; }
      done
    done ;;
  plugin)
    [ -f "$plugin_lib" ] || { echo "plugin variant: no plugin library given ($plugin_lib)"; exit 2; }
    make_host 0 && make_host 1 || exit 1
    # By name, as a user would: the loader asks dlopen for libnccl-net-tutti.so.
    extra_env=(NCCL_NET_PLUGIN=tutti NCCL_NET=TuttiSocket LD_LIBRARY_PATH="$(dirname "$plugin_lib")"
               NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET)
    run_job 2 2 4 quick || exit 1
    sleep 0.2  # tee flushes
    for ((r = 0; r < 4; r++)); do
      grep -q "NET/Plugin: loaded libnccl-net-tutti.so: \"TuttiSocket\", interface v10" "$logdir/rank$r" &&
        grep -q "NET: using backend TuttiSocket" "$logdir/rank$r" ||
        { echo "rank $r: its log does not show the plugin carrying its network traffic"; exit 1; }
    done ;;
  ib)
    [ -f "$plugin_lib" ] || { echo "ib variant: no verbs library given ($plugin_lib)"; exit 2; }
    make_host 0 && make_host 1 && make_host 2 || exit 1
    extra_env=(NCCL_NET=IB TUTTI_IBVERBS_LIB="$plugin_lib" TUTTI_IBVERBS_STANDIN_ADDR=if:tnet0
               NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET)
    run_job 2 2 4 "" || exit 1
    require_ib_logs 4
    run_job 3 2 4 quick || exit 1
    require_ib_logs 6
    # Again with 3 QPs per connection, messages round-robin over them, large ones as the
    # adaptive-routing write pair.
    extra_env+=(NCCL_IB_QPS_PER_CONNECTION=3 NCCL_IB_ADAPTIVE_ROUTING=1)
    run_job 2 2 4 "" || exit 1
    require_ib_logs 4 ;;
  ib-linkdown)
    [ -f "$plugin_lib" ] || { echo "ib-linkdown variant: no verbs library given ($plugin_lib)"; exit 2; }
    make_host 0 && make_host 1 || exit 1
    # The transport timer (4.096 us * 2^16 per try, 8 tries: about 2 s) finds the cut, as on a fabric.
    extra_env=(NCCL_NET=IB TUTTI_IBVERBS_LIB="$plugin_lib" TUTTI_IBVERBS_STANDIN_ADDR=if:tnet0
               NCCL_IB_TIMEOUT=16 NCCL_IB_RETRY_CNT=7 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET)
    run_job 2 2 4 faults linkdown || exit 1
    require_ib_logs 4 ;;
  shrink)
    make_host 0 && make_host 1 || exit 1
    run_job 2 2 4 shrink kill || exit 1 ;;
  setup-refused)
    make_host 0 && make_host 1 || exit 1
    rank2_env=(NCCL_SOCKET_IFNAME=lo,tnet0)
    run_setup_failure "failed after" "rank 1 (of 4 )?\(" "refused" || exit 1 ;;
  setup-refused-ib)
    [ -f "$plugin_lib" ] || { echo "setup-refused-ib variant: no verbs library given ($plugin_lib)"; exit 2; }
    make_host 0 && make_host 1 || exit 1
    extra_env=(NCCL_NET=IB TUTTI_IBVERBS_LIB="$plugin_lib")
    run_setup_failure "failed after" "rank [02] (of 4 )?\(" "refused" || exit 1 ;;
  *) echo "unknown variant $variant"; exit 2 ;;
esac
echo "multihost $variant: passed"
