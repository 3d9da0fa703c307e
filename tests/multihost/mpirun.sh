#!/usr/bin/env bash
# The perf tool under OpenMPI's mpirun across two "hosts" on this machine: each host is a network
# namespace (with its own host name) whose only interface, tnet0, is a veth into a bridge in a
# "switch" namespace, as in run.sh. mpirun runs in the first host's namespace and starts its daemons
# through a launch agent that maps a host name to its namespace instead of ssh. OpenMPI's and
# tutti's traffic both stay on tnet0; nothing else is contacted. Everything made here is removed on exit.
#
# Usage: mpirun.sh <all_reduce_perf binary>
# Exits 77 (skipped) without root, `ip netns`, unshare or mpirun.
set -u
perf_bin=$1
tag=$$
hosts=(tutti-mpi-a tutti-mpi-b)  # fake host names, one per namespace
per_host=2

. "$(dirname "$0")/netns.sh"
netns_require
if ! command -v unshare >/dev/null; then
  echo "skipped: needs unshare"; exit 77
fi
if ! command -v mpirun >/dev/null; then
  echo "skipped: mpirun is not installed (apt-get install openmpi-bin)"; exit 77
fi

workdir=$(mktemp -d)
namespaces=()
mpirun_pid=
cleanup() {
  [ -n "$mpirun_pid" ] && kill -9 "$mpirun_pid" 2>/dev/null
  netns_remove_all  # the daemons and ranks live in the host namespaces
  rm -rf "$workdir"
}
trap cleanup EXIT INT TERM

switch="tutti-msw-$tag"
netns_switch "$switch" || exit 1
subnet4="10.214.$((tag % 250))"

# make_host <index>: host namespace tutti-mh<index>-<tag> on the bridge.
make_host() { netns_host "$switch" "tutti-mh$1-$tag" "tmh$1-$tag" "$subnet4.$(($1 + 1))/24"; }
make_host 0 && make_host 1 || exit 1

# The launch agent, called by mpirun as `agent <host> <command...>` like ssh: it runs the command in
# that host's namespace, in a UTS namespace of its own named after the host (so each host reports its
# own name), with NCCL_HOSTID set to the host name.
agent="$workdir/agent"
cat > "$agent" <<AGENT
#!/usr/bin/env bash
host=\$1; shift
case "\$host" in
  ${hosts[0]}) ns=tutti-mh0-$tag ;;
  ${hosts[1]}) ns=tutti-mh1-$tag ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts env NCCL_HOSTID="\$host" sh -c "hostname \$host && \$*"
AGENT
chmod +x "$agent"
printf '%s slots=%d\n' "${hosts[0]}" $per_host "${hosts[1]}" $per_host > "$workdir/hostfile"

# OpenMPI: daemons started through the agent only (no tree spawn), its TCP on tnet0 only; tutti's
# sockets on tnet0 too. Running as root (containers, CI) needs OpenMPI's explicit consent.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  timeout 240 ip netns exec "tutti-mh0-$tag" mpirun -np $((2 * per_host)) --hostfile "$workdir/hostfile" \
  --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 \
  --mca oob_tcp_if_include tnet0 --mca btl_tcp_if_include tnet0 --mca btl self,tcp --mca pml ob1 \
  -x TUTTI_DEVICE=host -x NCCL_SOCKET_IFNAME==tnet0 -x TUTTI_BOOTSTRAP_TIMEOUT=60 \
  "$perf_bin" -b 8 -e 1M -f 8 -n 5 -c 1 > "$workdir/out" 2>&1 &
mpirun_pid=$!
wait "$mpirun_pid"; status=$?
mpirun_pid=
cat "$workdir/out"

failed=0
fail() { echo "FAILED: $*"; failed=1; }
[ "$status" = 0 ] || fail "mpirun exited with status $status"
grep -q "launcher mpi," "$workdir/out" || fail "the tool did not find its world through MPI"
grep -q "4 ranks in 4 processes on 2 nodes" "$workdir/out" || fail "not 4 ranks on 2 nodes"
grep -q "transports net/Socket, shm," "$workdir/out" || fail "the fingerprint does not name the transports net/Socket and shm"
for h in "${hosts[@]}"; do
  [ "$(grep -cE "^#  Rank +[0-9]+ .* on +$h " "$workdir/out")" = $per_host ] || fail "not $per_host ranks listed on $h"
done
# Data rows: 5 fixed columns, then time, algbw, busbw and #wrong out of place and in place.
rows=$(grep -cE '^ *[0-9]+ +[0-9]+ +float +sum +-1 +' "$workdir/out")
[ "$rows" = 6 ] || fail "$rows result rows, expected 6 (8 B to 256 KiB by factors of 8)"
wrong=$(grep -E '^ *[0-9]+ +[0-9]+ +float +sum +-1 +' "$workdir/out" | awk '$9 != 0 || $13 != 0' | wc -l)
[ "$wrong" = 0 ] || fail "$wrong rows with wrong values"
grep -q "^# Out of bounds values : 0 OK" "$workdir/out" || fail "no '# Out of bounds values : 0 OK' line"
[ "$failed" = 0 ] || exit 1
echo "multihost mpirun: passed"
