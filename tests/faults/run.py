#!/usr/bin/env python3
"""Fault injection: starts tutti ranks (tests/faults/fault_rank.cpp) as processes, injects one fault
per case at a chosen phase, checks what every surviving rank reports and prints a table: fault,
expected, observed, time to error.

Usage: run.py <fault_rank binary> <group> [only the cases whose name contains this]
  signals    SIGKILL and SIGSTOP of a rank during init, connect, a collective and destroy (one
             host: shared memory and loopback sockets); SIGKILL during a collective with every
             rank on its own host, over the IB backend on the software verbs stand-in
  network    ranks in network namespaces joined by veths (made and removed here): a link cut, and
             tc netem delay, loss and reordering during checked all-reduces
  resources  /dev/shm too small (a private tmpfs in a mount namespace), descriptors exhausted
             (RLIMIT_NOFILE)
Exit status: 0 every case behaved as expected; 1 one did not; 77 (skipped) the group needs what
this machine lacks (root, ip netns, the netem qdisc, unshare), said in the output.

The bound on every error is TUTTI_TIMEOUT (or TUTTI_BOOTSTRAP_TIMEOUT, or TUTTI_NET_LINK_TIMEOUT)
+ 2 s after the injection: a survivor that needs longer, hangs, exits 0 after a fault it should
have seen, or does not name the rank at fault, fails its case.
"""
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 3      # TUTTI_TIMEOUT, TUTTI_BOOTSTRAP_TIMEOUT and TUTTI_NET_LINK_TIMEOUT in every case
SLACK_S = 2        # the target: every survivor reports within the timeout + this
CASE_LIMIT_S = 30  # a case still running after this has hung
SKIP = 77

# Cases that fail today for a reason recorded here: reported as "known gap" without failing the
# run, and as "ok (was a known gap)" once they pass, so the entry can go.
KNOWN_GAPS = {}

LINE = re.compile(r"^\[(\d+\.\d+)\] rank (\d+): (.*)$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Rank:
    """One rank process and its log: lines '[monotonic seconds] rank R: text'."""

    def __init__(self, rank, argv, env, log, preexec=None):
        self.rank, self.log = rank, log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=preexec)

    def lines(self):
        with open(self.log, errors="replace") as f:
            return f.read().splitlines()

    def find(self, prefix):
        """(timestamp, text) of the first line whose text starts with prefix, else None."""
        for line in self.lines():
            m = LINE.match(line)
            if m and m.group(3).startswith(prefix):
                return float(m.group(1)), m.group(3)
        return None

    def wait_for(self, prefix, limit_s):
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            hit = self.find(prefix)
            if hit or self.proc.poll() is not None:
                return hit
            time.sleep(0.02)
        return None


class Suite:
    def __init__(self, binary, only=""):
        self.binary, self.only = binary, only
        self.rows = []
        self.failed = False
        self.logdir = tempfile.mkdtemp(prefix="tutti-faults-")

    def env(self, root, extra=None):
        env = dict(os.environ)
        env.update(NCCL_COMM_ID=root, TUTTI_DEVICE="host", TUTTI_TIMEOUT=str(TIMEOUT_S),
                   TUTTI_BOOTSTRAP_TIMEOUT=str(TIMEOUT_S), TUTTI_NET_LINK_TIMEOUT=str(TIMEOUT_S))
        env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        env.update(extra or {})
        return env

    def start(self, name, nranks, iterations, hold=None, victim=None, wrap=None, env_extra=None,
              preexec_for=None, root_host="127.0.0.1"):
        """Starts nranks ranks; the victim (if any) holds before phase `hold`. wrap(rank) gives a
        command prefix (a namespace), env_extra(rank) extra variables, preexec_for(rank) a hook."""
        root = f"{root_host}:{free_port()}"
        ranks = []
        for r in range(nranks):
            argv = [self.binary, str(r), str(nranks), str(iterations)]
            if hold and r == victim:
                argv.append(hold)
            prefix = wrap(r) if wrap else []
            extra = env_extra(r) if env_extra else None
            pre = preexec_for(r) if preexec_for else None
            ranks.append(Rank(r, prefix + argv, self.env(root, extra), f"{self.logdir}/{name}.rank{r}", pre))
        return ranks

    @staticmethod
    def finish(ranks, skip=(), limit_s=CASE_LIMIT_S):
        """Waits for every rank but those in skip; returns {rank: exit status or 'hung'}."""
        end = time.monotonic() + limit_s
        statuses = {}
        for rk in ranks:
            if rk.rank in skip:
                continue
            try:
                statuses[rk.rank] = rk.proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                statuses[rk.rank] = "hung"
        for rk in ranks:
            if rk.proc.poll() is None:
                rk.proc.kill()  # a stopped victim dies of SIGKILL too
                rk.proc.wait()
        return statuses

    def row(self, fault, expected, observed, seconds, ok, note=""):
        verdict = "ok" if ok else ("FAIL" if ok is False else "skipped")
        if fault in KNOWN_GAPS:
            note = KNOWN_GAPS[fault]
            verdict = "ok (was a known gap)" if ok else "known gap"
            ok = True if ok is False else ok
        self.rows.append((fault, expected, observed, "-" if seconds is None else f"{seconds:.2f} s", verdict, note))
        if ok is False:
            self.failed = True

    def dump(self, ranks):
        print(f"--- {self.rows[-1][0] if self.rows else ''}: the ranks' last lines", flush=True)
        for rk in ranks:
            for line in rk.lines()[-6:]:
                print(f"    {line}")

    def judge_failures(self, fault, ranks, statuses, t0, names, bound_s, expected, says=None):
        """Every rank in statuses must fail (status 3) within bound_s of t0 with an error naming
        a rank of `names` (a function of the reporting rank)."""
        worst, problems = 0.0, []
        for r, status in sorted(statuses.items()):
            err = ranks[r].find("error")
            if status == "hung":
                problems.append(f"rank {r} hung")
            elif status == 4 or ranks[r].find("WRONG"):
                problems.append(f"rank {r} got a WRONG result")
            elif status != 3 or err is None:
                problems.append(f"rank {r} exited {status} without an error")
            else:
                took = err[0] - t0
                worst = max(worst, took)
                wanted = names(r)
                if not re.search(r"\brank (%s)\b" % "|".join(map(str, wanted)), err[1].split(":", 1)[1]):
                    problems.append(f"rank {r}'s error does not name rank {'/'.join(map(str, wanted))}")
                    print(f"rank {r}'s error: {err[1]}")
                if says and says not in err[1]:
                    problems.append(f"rank {r}'s error does not say '{says}'")
                if took > bound_s:
                    problems.append(f"rank {r} took {took:.1f} s")
        observed = "; ".join(problems) if problems else f"{len(statuses)} survivor(s) failed naming it"
        self.row(fault, expected, observed, worst, not problems)
        if problems:
            self.dump(ranks)

    def judge_success(self, fault, ranks, statuses, t0, bound_s, expected):
        problems = []
        worst = 0.0
        for r, status in sorted(statuses.items()):
            done = ranks[r].find("done")
            if status != 0 or done is None:
                err = ranks[r].find("error") or ranks[r].find("WRONG")
                problems.append(f"rank {r} exited {status}" + (f": {err[1][:160]}" if err else ""))
            else:
                worst = max(worst, done[0] - t0)
        if not problems and worst > bound_s:
            problems.append(f"took {worst:.1f} s")
        observed = "; ".join(problems) if problems else f"{len(statuses)} rank(s) finished, results checked"
        self.row(fault, expected, observed, worst, not problems)
        if problems:
            self.dump(ranks)

    # --- signals ---------------------------------------------------------------------------

    def signal_case(self, sig, phase, nranks=3, ib=False):
        victim = nranks - 1
        name = f"{sig.name.lower()}-{phase.replace(', ', '-')}" + ("-ib" if ib else "")
        env_extra = None
        if ib:
            # Each rank on a host of its own, every connection through the IB backend on the
            # software verbs stand-in (built beside this binary's folder).
            standin = os.path.join(os.path.dirname(self.binary), "..", "ibverbs_standin", "libtutti_ibverbs_standin.so")
            if not os.path.exists(standin):
                self.row(f"{sig.name} rank {victim} of {nranks}, {phase}, over IB", "-", "no verbs stand-in built", None, None)
                return
            env_extra = lambda r: {"NCCL_HOSTID": f"faults-ib-host{r}", "NCCL_NET": "IB",
                                   "TUTTI_IBVERBS_LIB": os.path.abspath(standin)}
        # "collective" and "init, joined" strike a running rank (no hold): 0.5 s into the
        # all-reduce loop, or 0.5 s into ncclCommInitRank while rank 1 starts 1 s late, so the
        # victim has registered at the bootstrap root and waits for the others there.
        running = phase in ("collective", "init, joined")
        late = (lambda r: ["sh", "-c", 'sleep 1; exec "$0" "$@"'] if r == 1 else []) if phase == "init, joined" else None
        ranks = self.start(name, nranks, 1000000 if running else 3, None if running else phase, victim, wrap=late,
                           env_extra=env_extra)
        marker = {"collective": "phase collective", "init, joined": "phase init"}.get(phase, f"holding {phase}")
        if ranks[victim].wait_for(marker, CASE_LIMIT_S) is None:
            self.row(f"{sig.name} {phase}", "-", "the victim never reached the phase", None, False)
            self.dump(ranks)
            self.finish(ranks, limit_s=1)
            return
        if phase == "collective":
            time.sleep(0.5)
        elif phase == "init, joined":
            time.sleep(0.5)
        elif phase != "init":
            # The others enter the phase and wait for the victim there.
            for rk in ranks:
                if rk.rank != victim:
                    rk.wait_for(f"phase {phase}", 5)
            time.sleep(0.2)
        t0 = time.monotonic()
        os.kill(ranks[victim].proc.pid, sig)
        fault = f"{sig.name} rank {victim} of {nranks}, {phase}" + (", over IB" if ib else "")
        statuses = self.finish(ranks, skip={victim})
        if phase == "destroy":
            # The survivors' work was done; destroy needs no peer, so they must finish.
            self.judge_success(fault, ranks, statuses, t0, TIMEOUT_S + SLACK_S,
                               "survivors destroy and exit 0")
        else:
            # A rank that registered and died: the root's message says its connection closed.
            says = "closed" if (sig, phase) == (signal.SIGKILL, "init, joined") else None
            self.judge_failures(fault, ranks, statuses, t0, lambda r: [victim], TIMEOUT_S + SLACK_S,
                                f"each survivor names rank {victim} in <= {TIMEOUT_S + SLACK_S} s"
                                + (f", says '{says}'" if says else ""), says)

    def signals(self):
        for sig in (signal.SIGKILL, signal.SIGSTOP):
            for phase in ("init", "init, joined", "connect", "collective", "destroy"):
                if self.only in f"{sig.name} {phase}":
                    self.signal_case(sig, phase)
        # A peer killed while all-reduces run over the IB backend (on the verbs stand-in).
        if self.only in "SIGKILL collective, over IB":
            self.signal_case(signal.SIGKILL, "collective", ib=True)
        return 0

    # --- network ---------------------------------------------------------------------------

    def network(self):
        if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
            print("skipped: the network faults need root, ip and tc (iproute2)")
            return SKIP
        tag = os.getpid() % 10000
        sw, hosts = f"tutti-fsw-{tag}", [f"tutti-fh{h}-{tag}" for h in range(2)]
        made = []

        def ip(*args):
            subprocess.run(["ip", *args], check=True, stdout=subprocess.DEVNULL)

        try:
            try:
                ip("netns", "add", sw); made.append(sw)
            except subprocess.CalledProcessError:
                print("skipped: ip netns is not available")
                return SKIP
            try:
                ip("-n", sw, "link", "add", "br0", "type", "bridge")
                ip("-n", sw, "link", "set", "br0", "up")
                subnet = f"10.214.{tag % 250}"
                for h, ns in enumerate(hosts):
                    ip("netns", "add", ns); made.append(ns)
                    a, b = f"tfv{h}-{tag}a", f"tfv{h}-{tag}b"
                    ip("link", "add", a, "type", "veth", "peer", "name", b)
                    ip("link", "set", a, "netns", ns, "name", "tnet0")
                    ip("link", "set", b, "netns", sw)
                    ip("-n", sw, "link", "set", b, "master", "br0", "up")
                    ip("-n", ns, "link", "set", "lo", "up")
                    ip("-n", ns, "addr", "add", f"{subnet}.{h + 1}/24", "dev", "tnet0")
                    ip("-n", ns, "link", "set", "tnet0", "up")
            except subprocess.CalledProcessError as e:
                print(f"skipped: could not make the namespaces' bridge and veths ({' '.join(e.cmd)})")
                return SKIP

            def job(name, iterations):
                return self.start(name, 2, iterations, wrap=lambda r: ["ip", "netns", "exec", hosts[r]],
                                  env_extra=lambda r: {"NCCL_SOCKET_IFNAME": "=tnet0", "NCCL_HOSTID": f"host{r}"},
                                  root_host=f"{subnet}.1")

            def shaped(label, qdisc):
                """Checked all-reduces through `qdisc` on both hosts' veths; returns False when
                this kernel lacks the qdisc."""
                for ns in hosts:
                    added = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "tnet0", "root",
                                            *qdisc.split()], capture_output=True, text=True)
                    if added.returncode != 0:
                        self.row(f"{label}: {qdisc}", "collectives complete, results right",
                                 f"not in this kernel (tc: {added.stderr.strip()[:50]})", None, None)
                        return False
                t0 = time.monotonic()
                ranks = job(label.split()[0], 20)
                statuses = self.finish(ranks, limit_s=120)
                stats = subprocess.run(["ip", "netns", "exec", hosts[0], "tc", "-s", "qdisc", "show", "dev", "tnet0"],
                                       capture_output=True, text=True).stdout
                dropped = re.search(r"dropped (\d+)", stats)
                self.judge_success(f"{label}: {qdisc}", ranks, statuses, t0, 120,
                                   "20 checked all-reduces complete")
                if dropped:
                    self.rows[-1] = self.rows[-1][:5] + (f"host0's qdisc dropped {dropped.group(1)} packets",)
                for ns in hosts:
                    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "tnet0", "root"])
                return True

            if not shaped("netem", "netem loss 1% delay 10ms reorder 25% 50%"):
                # A kernel without netem (sch_netem): a token bucket with a short queue is the
                # stand-in: it delays, and drops what overflows its queue (no reordering).
                shaped("tbf (netem stand-in)", "tbf rate 100mbit burst 32kb limit 64kb")

            for sig in (signal.SIGKILL, signal.SIGSTOP):
                # A rank on the other host: no shared memory, only sockets. A stopped process's
                # kernel still acknowledges, so only TUTTI_TIMEOUT can find it.
                ranks = job(f"net-{sig.name}", 1000000)
                for rk in ranks:
                    rk.wait_for("phase collective", CASE_LIMIT_S)
                time.sleep(0.5)
                t0 = time.monotonic()
                os.kill(ranks[1].proc.pid, sig)
                statuses = self.finish(ranks, skip={1})
                self.judge_failures(f"{sig.name} rank 1 (host1) in all-reduces", ranks, statuses, t0, lambda r: [1],
                                    TIMEOUT_S + SLACK_S, f"rank 0 names rank 1 in <= {TIMEOUT_S + SLACK_S} s")

            ranks = job("linkcut", 1000000)
            for rk in ranks:
                rk.wait_for("phase collective", CASE_LIMIT_S)
            time.sleep(0.5)
            t0 = time.monotonic()
            ip("-n", sw, "link", "set", f"tfv1-{tag}b", "down")
            statuses = self.finish(ranks)
            self.judge_failures("link cut (host1's veth down)", ranks, statuses, t0, lambda r: [1 - r],
                                TIMEOUT_S + SLACK_S, "both sides name the other's rank")
        finally:
            for ns in made:
                for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            for ns in made:
                subprocess.run(["ip", "netns", "del", ns])
            for h in range(len(hosts)):  # a veth left in this namespace by a failed setup
                subprocess.run(["ip", "link", "del", f"tfv{h}-{tag}a"], stderr=subprocess.DEVNULL)
        return 0

    # --- resources -------------------------------------------------------------------------

    def small_shm(self):
        if os.geteuid() != 0 or not shutil.which("unshare"):
            self.row("/dev/shm too small", "-", "needs root and unshare", None, None)
            return
        # The error, then its remedy (NCCL_SHM_DISABLE=1: sockets between the ranks) in the same place.
        for remedy in (False, True):
            self.small_shm_case(remedy)

    def small_shm_case(self, remedy):
        # Both ranks in one mount namespace whose /dev/shm is a 1 MiB tmpfs: the wrapper mounts it
        # and runs the ranks; each writes its status beside its log.
        name = "smallshm-remedy" if remedy else "smallshm"
        logs = [f"{self.logdir}/{name}.rank{r}" for r in range(2)]
        script = "mount -t tmpfs -o size=1m tutti-faults /dev/shm || exit 90\n"
        for r in range(2):
            script += f"( '{self.binary}' {r} 2 3 > '{logs[r]}' 2>&1; echo $? > '{logs[r]}.rc' ) &\n"
        script += "wait\n"
        t0 = time.monotonic()
        env = self.env(f"127.0.0.1:{free_port()}", {"NCCL_SHM_DISABLE": "1"} if remedy else None)
        wrapper = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], env=env,
                                 timeout=CASE_LIMIT_S)
        if wrapper.returncode == 90:
            self.row("/dev/shm too small", "-", "could not mount a tmpfs", None, None)
            return
        ranks = []
        for r in range(2):
            rk = Rank.__new__(Rank)
            rk.rank, rk.log = r, logs[r]
            ranks.append(rk)
        statuses = {r: int(open(logs[r] + ".rc").read().strip() or -1) for r in range(2)}
        if remedy:
            self.judge_success("/dev/shm 1 MiB, NCCL_SHM_DISABLE=1", ranks, statuses, t0, CASE_LIMIT_S,
                               "the remedy works: ranks finish")
            return
        problems, worst = [], 0.0
        for r in range(2):
            err = ranks[r].find("error")
            if statuses[r] != 3 or err is None:
                problems.append(f"rank {r} exited {statuses[r]} without an error")
                continue
            worst = max(worst, err[0] - t0)
            text = err[1]
            # The error says what it needs, what there is, and the remedy (not its exact words).
            if not ("/dev/shm" in text and len(re.findall(r"\b\d{5,}\b", text)) >= 2 and "NCCL_SHM_DISABLE" in text):
                problems.append(f"rank {r}: the error lacks bytes needed/free or the remedy: {text[:200]}")
        self.row("/dev/shm a 1 MiB tmpfs", "init fails: bytes needed, free, remedy",
                 "; ".join(problems) or "both ranks: bytes needed and free, remedy", worst, not problems)
        if problems:
            self.dump(ranks)

    def few_descriptors(self, limit, nranks=3):
        victim = nranks - 1

        def limited():
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        t0 = time.monotonic()
        ranks = self.start("nofile", nranks, 3, preexec_for=lambda r: limited if r == victim else None)
        statuses = self.finish(ranks)
        problems, worst = [], 0.0
        for r, status in sorted(statuses.items()):
            err = ranks[r].find("error")
            if status == "hung" or status != 3 or err is None:
                problems.append(f"rank {r} exited {status} without an error")
                continue
            worst = max(worst, err[0] - t0)
            text = err[1]
            if err[0] - t0 > TIMEOUT_S + SLACK_S:
                problems.append(f"rank {r} took {err[0] - t0:.1f} s")
            if r == victim and "open files" not in text.lower():
                problems.append(f"rank {r}: the error does not say descriptors ran out: {text[:160]}")
            if r != victim and not re.search(rf"\brank {victim}\b", text.split(":", 1)[1]):
                problems.append(f"rank {r}'s error does not name rank {victim}")
        self.row(f"RLIMIT_NOFILE {limit} on rank {victim}", f"it says so; the others name rank {victim}",
                 "; ".join(problems) or "as expected", worst, not problems)
        if problems:
            self.dump(ranks)

    def resources(self):
        self.small_shm()
        # 6: the bootstrap listener's accept runs out; 9: the shared memory's shm_open does (a
        # rank of 3 needs about 11 descriptors).
        for limit in (6, 9):
            self.few_descriptors(limit)
        return 0

    def table(self):
        head = ("fault", "expected", "observed", "time to error", "verdict")
        widths = [max(len(str(row[i])) for row in self.rows + [head]) for i in range(5)]
        print()
        for row in [head] + [tuple("-" * w for w in widths)] + [r[:5] for r in self.rows]:
            print(" | ".join(str(c).ljust(w) for c, w in zip(row, widths)))
        for r in self.rows:
            if r[5]:
                print(f"note: {r[0]}: {r[5]}")


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[2] not in ("signals", "network", "resources"):
        print(__doc__)
        return 2
    suite = Suite(os.path.abspath(sys.argv[1]), sys.argv[3] if len(sys.argv) > 3 else "")
    try:
        status = getattr(suite, sys.argv[2])()
    finally:
        if suite.rows:
            suite.table()
        shutil.rmtree(suite.logdir, ignore_errors=True)
    if status == SKIP or (suite.rows and all(r[4] == "skipped" for r in suite.rows)):
        return SKIP
    return 1 if suite.failed else 0


if __name__ == "__main__":
    sys.exit(main())
