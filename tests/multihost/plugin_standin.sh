#!/usr/bin/env bash
# Multi-host runs through the strict net-plugin stand-in (tests/net_plugin_standin/), loaded as a
# third-party plugin (NCCL_NET_PLUGIN=<its path>, NCCL_NET=Strict) between network-namespace hosts
# made as run.sh makes them (netns.sh). Everything made here is removed on exit.
#
# Usage: plugin_standin.sh <multihost_rank binary> <variant> <libnccl-net-strict-v<N>.so>
#   all          every knob on (TUTTI_STRICT_PLUGIN_ALL=1): 2 hosts x 2 ranks, every collective,
#                type and op, and send/recv; then lastsend (below)
#   <knob>       that knob alone, 2 hosts x 1 rank: every collective and send/recv once (smoke):
#                connect accept no_sizes no_goodbye reorder busy expire block_accept maxrecvs1 maxrecvs8;
#                no_goodbye then runs lastsend: rank 0 sends and leaves at once, rank 1 receives
#                later, after rank 0 has closed its connections with no goodbye
# STANDIN_JOBS="<ranks per host>:<mode> ..." runs other multihost_rank modes instead (by hand).
# Every rank must exit 0, its log must show the stand-in carrying its traffic with the knob on, and
# no rank may have drawn a "NET/Strict misuse" line from it. Exits 77 (skipped) without root or
# without `ip netns`.
set -u
rank_bin=$1
variant=$2
plugin_lib=$3
tag=$$
rank_limit_s=100  # a hung rank is ended and named, inside CTest's limit
. "$(dirname "$0")/netns.sh"
netns_require
[ -f "$plugin_lib" ] || { echo "no stand-in library given ($plugin_lib)"; exit 2; }
logdir=$(mktemp -d)

namespaces=()
pids=()
trap netns_cleanup EXIT INT TERM

switch="tutti-sw-$tag"
netns_switch "$switch" || exit 1
subnet4="10.214.$((tag % 250)).0"
for h in 0 1; do
  netns_host "$switch" "tutti-h$h-$tag" "tvs$h-$tag" "${subnet4%.0}.$((h + 1))/24" || exit 1
done

# The knob's environment, what the stand-in's init line must say of it (strict_knobs.cpp), and the
# jobs: <ranks per host>:<multihost_rank mode> ("-" for every collective, type and op).
jobs=(1:smoke)
case "$variant" in
  all) knob=(TUTTI_STRICT_PLUGIN_ALL=1) said="CONNECT+ACCEPT+NO_SIZES+NO_GOODBYE+REORDER+BUSY+EXPIRE, maxRecvs 1"
       jobs=(2:- 1:lastsend) ;;
  connect) knob=(TUTTI_STRICT_PLUGIN_CONNECT=1) said="CONNECT, maxRecvs 8" ;;
  accept) knob=(TUTTI_STRICT_PLUGIN_ACCEPT=1) said="ACCEPT, maxRecvs 8" ;;
  no_sizes) knob=(TUTTI_STRICT_PLUGIN_NO_SIZES=1) said="NO_SIZES, maxRecvs 8" ;;
  no_goodbye) knob=(TUTTI_STRICT_PLUGIN_NO_GOODBYE=1) said="NO_GOODBYE, maxRecvs 8" jobs=(1:smoke 1:lastsend) ;;
  reorder) knob=(TUTTI_STRICT_PLUGIN_REORDER=1) said="REORDER, maxRecvs 8" ;;
  busy) knob=(TUTTI_STRICT_PLUGIN_BUSY=1) said="BUSY, maxRecvs 8" ;;
  expire) knob=(TUTTI_STRICT_PLUGIN_EXPIRE=1) said="EXPIRE, maxRecvs 8" ;;
  block_accept) knob=(TUTTI_STRICT_PLUGIN_BLOCK_ACCEPT=1) said="BLOCK_ACCEPT, maxRecvs 8" ;;
  maxrecvs1) knob=(TUTTI_STRICT_PLUGIN_MAXRECVS=1) said="no strictness knob, maxRecvs 1" ;;
  maxrecvs8) knob=(TUTTI_STRICT_PLUGIN_MAXRECVS=8) said="no strictness knob, maxRecvs 8" ;;
  *) echo "unknown variant $variant"; exit 2 ;;
esac
[ -n "${STANDIN_JOBS:-}" ] && read -ra jobs <<< "$STANDIN_JOBS"  # by hand: other jobs
version=$(basename "$plugin_lib" | sed -n 's/.*-v\([0-9]*\)\.so$/\1/p')

# run_job <ranks per host> <mode>: both hosts' ranks, then every rank's exit and log checked.
run_job() {
  local per=$1 mode=$2 nranks=$((2 * $1)) port=$((20000 + (tag + RANDOM) % 20000)) r h status failed=0
  [ "$mode" = - ] && mode=""
  # TUTTI_TIMEOUT bounds every wait of a rank, so that a setup that cannot finish (a connect that
  # waits for an accept never called) fails inside the run's limit instead of CTest's.
  local -a env=(NCCL_COMM_ID="${subnet4%.0}.1:$port" NCCL_SOCKET_IFNAME==tnet0 TUTTI_DEVICE=host
                TUTTI_BOOTSTRAP_TIMEOUT=60 TUTTI_TIMEOUT=40 NCCL_NET_PLUGIN="$plugin_lib" NCCL_NET=Strict
                NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "${knob[@]}")
  echo "== $variant: $nranks ranks, mode ${mode:-every case}"
  pids=()
  for ((r = 0; r < nranks; r++)); do
    h=$((r / per))
    ip netns exec "tutti-h$h-$tag" env "${env[@]}" NCCL_HOSTID="host$h" \
      timeout -k 5 $rank_limit_s "$rank_bin" "$r" "$nranks" $mode > >(tee "$logdir/rank$r") 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < nranks; r++)); do
    wait "${pids[$r]}"; status=$?
    [ "$status" = 124 ] && echo "rank $r: still running after ${rank_limit_s} s: ended"
    [ "$status" != 0 ] && { echo "rank $r exited with status $status"; failed=1; }
  done
  sleep 0.2  # tee flushes
  for ((r = 0; r < nranks; r++)); do
    local log="$logdir/rank$r"
    grep -q "NET/Plugin: loaded $plugin_lib: \"Strict\", interface v$version" "$log" &&
      grep -q "NET: using backend Strict" "$log" ||
      { echo "rank $r: its log does not show the stand-in (v$version) carrying its network traffic"; failed=1; }
    grep -qF "NET/Strict: $said" "$log" || { echo "rank $r: the stand-in did not say \"$said\""; failed=1; }
    if grep -q "NET/Strict misuse" "$log"; then
      echo "rank $r: tutti misused the plugin:"; grep "NET/Strict misuse" "$log" | head -5; failed=1
    fi
  done
  return $failed
}

for job in "${jobs[@]}"; do
  run_job "${job%%:*}" "${job#*:}" || { echo "plugin stand-in $variant: FAILED (mode ${job#*:})"; exit 1; }
done
echo "plugin stand-in $variant: passed"
