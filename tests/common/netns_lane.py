"""Helpers the netns testbed lanes share (scripts run inside `testbed.sh run`, which
names the testbed's description in TESTBED_JSON: its hosts, their namespaces and
rail interfaces, and the cables between them).

A lane script makes one Lane: a work folder for the logs of the processes it starts
in the hosts' namespaces, and the list of those processes, all killed at cleanup.
`stop` is for processes a script keeps for itself (terminated, then killed).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def stop(procs):
    """Terminates each process of `procs` still running, then waits up to 10 s for
    each, killing the ones still there."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def fabric_env(host, values, extra=None):
    """The environment of a fabric-mode process on host `host` (index; its name is
    h<host>): this process's environment with RAILYARD_HOST_NAME, the rails on every
    port but the management one (RAILYARD_SOCKET_IFNAME=^mgmt0), RAILYARD_FABRIC=on
    and RAILYARD_DEBUG=WARN, then the lane's own `values` and the case's `extra`
    (dicts of variable -> string; later ones win)."""
    env = dict(os.environ)
    env.update({
        "RAILYARD_HOST_NAME": f"h{host}",
        "RAILYARD_SOCKET_IFNAME": "^mgmt0",
        "RAILYARD_FABRIC": "on",
        "RAILYARD_DEBUG": "WARN",
    })
    env.update(values)
    env.update(extra or {})
    return env


def tx_bytes(namespace, ifname):
    """Bytes interface `ifname` of network namespace `namespace` has sent (its
    statistics/tx_bytes counter)."""
    out = subprocess.run(["ip", "netns", "exec", namespace, "cat", f"/sys/class/net/{ifname}/statistics/tx_bytes"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.strip())


class Lane:
    """One run of a lane script on the testbed of TESTBED_JSON.

    tb: the testbed description; ns: each host's namespace, by host index; work: a
    fresh folder (named `work_prefix`...) holding NAME.log for each process started,
    removed at cleanup unless the environment sets `keep_logs_var`."""

    def __init__(self, work_prefix, keep_logs_var):
        self.tb = json.load(open(os.environ["TESTBED_JSON"]))
        self.ns = [h["namespace"] for h in self.tb["hosts"]]
        self.work = tempfile.mkdtemp(prefix=work_prefix)
        self.keep_logs_var = keep_logs_var
        self.procs = []

    def fail(self, msg):
        """Prints FAIL: `msg`, cleans up and exits 1."""
        print(f"FAIL: {msg}", flush=True)
        self.cleanup()
        sys.exit(1)

    def cleanup(self):
        """Kills every process started (a stopped one is continued first, so that it
        can die), waits up to 10 s for each, and removes the work folder (or says
        where it is kept)."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.kill()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if os.environ.get(self.keep_logs_var) is None:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            print(f"logs kept in {self.work}")

    def log_of(self, name):
        """What the process started as `name` wrote so far ("" before it wrote a file)."""
        try:
            return open(os.path.join(self.work, name + ".log")).read()
        except FileNotFoundError:
            return ""

    def start(self, host, argv, name, env=None):
        """Starts `argv` in host `host`'s namespace, stdout and stderr to NAME.log in the
        work folder, with environment `env` (None: this script's own)."""
        log = open(os.path.join(self.work, name + ".log"), "w")
        p = subprocess.Popen(["ip", "netns", "exec", self.ns[host]] + list(argv), stdout=log,
                             stderr=subprocess.STDOUT, env=env)
        self.procs.append(p)
        return p

    def interfaces(self, host, toward):
        """Host `host`'s rail interfaces (testbed entries: ifname, ip, rail, ...) on its
        cable to host `toward`, in rail order."""
        ifs = [i for i in self.tb["hosts"][host]["interfaces"] if i["peer_host"] == toward]
        return sorted(ifs, key=lambda i: i["rail"])

    def tx_bytes(self, host, ifname):
        """Bytes interface `ifname` of host `host` has sent."""
        return tx_bytes(self.ns[host], ifname)

    def listening(self, host, port):
        """The "address:port" strings host `host` has a TCP socket listening at, for `port`."""
        out = subprocess.run(["ip", "netns", "exec", self.ns[host], "ss", "-Htln"], capture_output=True,
                             text=True).stdout
        return {l.split()[3] for l in out.splitlines() if l.split()[3].endswith(f":{port}")}

    def wait_for(self, pred, what, timeout=30):
        """Polls `pred` every 50 ms until it holds; fails the lane, naming `what`, when
        `timeout` seconds pass first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return
            time.sleep(0.05)  # polling a condition, not a barrier
        self.fail(f"timed out after {timeout} s waiting for {what}")
