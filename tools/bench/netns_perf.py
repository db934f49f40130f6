"""One railyard-perf run across testbed hosts, shared by the netns benchmark scripts
(fabric_bench.py, fmode_relay_bench.py, fmode_relay_ab.py, fmode_relay_profile.py).

Each script runs inside `tests/testbed/testbed.sh run`, which names the testbed in
TESTBED_JSON; it passes the hosts' namespaces and management addresses it read there.
"""
import json
import os
import random
import subprocess


def fabric_env(host, comms, libdir):
    """The environment of a fabric-mode process on testbed host `host` (index, named
    h<host>): this one's, plus the rails on every port but mgmt0, RAILYARD_FABRIC=on,
    the railyard plugin from `libdir`, RAILYARD_COMMS=`comms` and WARN-level logs."""
    env = dict(os.environ)
    env.update({"RAILYARD_HOST_NAME": f"h{host}", "RAILYARD_SOCKET_IFNAME": "^mgmt0",
                "RAILYARD_FABRIC": "on", "NCCL_NET_PLUGIN": "railyard", "RAILYARD_COMMS": comms,
                "LD_LIBRARY_PATH": libdir, "RAILYARD_DEBUG": "WARN"})
    return env


def perf_row(perf, namespaces, mgmt, hosts, pattern, size, iters, warmup, env_of, what):
    """Runs `perf` (a railyard-perf binary) as one rank per host of `hosts` (indices into
    `namespaces`; rank i on hosts[i], bootstrap root on hosts[0]'s management address
    `mgmt[hosts[0]]` at a random port), pattern `pattern` at one size `size` bytes,
    `iters` timed and `warmup` untimed iterations, no data check, each rank with the
    environment `env_of(host)`. Returns rank 0's last JSON row (a dict with busbw_gbps,
    time_us, ...). Raises SystemExit naming `what` and quoting the stderr tail of a
    rank that failed."""
    port = random.randint(30000, 39000)
    root = f"{mgmt[hosts[0]]}:{port}"
    jpath = f"/tmp/netns-perf-{os.getpid()}-{port}.json"
    procs = []
    for r, h in enumerate(hosts):
        args = [perf, "--rank", str(r), "--nranks", str(len(hosts)), "--root", root, "-p", pattern,
                "-b", str(size), "-e", str(size), "-n", str(iters), "-w", str(warmup), "-c", "0", "-T", "300"]
        if r == 0:
            args += ["--json", jpath]
        procs.append(subprocess.Popen(["ip", "netns", "exec", namespaces[h]] + args, env=env_of(h),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"railyard-perf failed ({what}):\n{err[-2000:]}")
    rows = json.load(open(jpath))
    os.unlink(jpath)
    rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
    return rows[-1]
