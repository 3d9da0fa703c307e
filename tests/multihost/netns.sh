# Shared by the multi-host test scripts (sourced, not run): "hosts" are network namespaces whose
# only interface, tnet0, is a veth into a bridge in a "switch" namespace. Addresses live only on
# those veths. The caller keeps the names in its `namespaces` array and removes them on exit.

# netns_require: exits 77 (skipped) without root, iproute2 or working `ip netns`.
netns_require() {
  if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo "skipped: needs root and iproute2"; exit 77
  fi
  if ! ip netns add "tutti-probe-$$" 2>/dev/null; then
    echo "skipped: ip netns is not available"; exit 77
  fi
  ip netns del "tutti-probe-$$"
}

# netns_switch <namespace>: the switch namespace with its bridge br0.
netns_switch() {
  ip netns add "$1" && namespaces+=("$1") || return 1
  ip -n "$1" link add br0 type bridge || return 1
  ip -n "$1" link set br0 up
}

# netns_host <switch> <namespace> <veth name stem> <ipv4/len> [ipv6/len]: a host namespace whose
# tnet0 is plugged into the switch's bridge, addressed as given.
netns_host() {
  local sw=$1 ns=$2 stem=$3 v4=$4 v6=${5:-}
  ip netns add "$ns" && namespaces+=("$ns") || return 1
  ip link add "${stem}a" type veth peer name "${stem}b" || return 1
  ip link set "${stem}a" netns "$ns" name tnet0 || return 1
  ip link set "${stem}b" netns "$sw" || return 1
  ip -n "$sw" link set "${stem}b" master br0 up || return 1
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$v4" dev tnet0 || return 1
  if [ -n "$v6" ]; then ip -n "$ns" addr add "$v6" dev tnet0 nodad || return 1; fi
  ip -n "$ns" link set tnet0 up
}

# netns_remove_all: ends every process still inside the namespaces in `namespaces` (daemons and
# ranks a failed run left behind), then removes the namespaces. For the caller's exit trap.
netns_remove_all() {
  local ns p
  for ns in "${namespaces[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
}

# netns_cleanup: the multi-host scripts' exit trap: kills the ranks in `pids`, removes the
# namespaces (netns_remove_all) and the log folder `logdir`; a script that keeps no pids or log
# folder (set -u) may leave them unset.
netns_cleanup() {
  local p
  for p in ${pids[@]+"${pids[@]}"}; do kill -9 "$p" 2>/dev/null; done
  netns_remove_all
  [ -n "${logdir:-}" ] && rm -rf "$logdir"
  return 0
}
