#!/usr/bin/env python3
"""railyard-pack and railyardd --expert-store from an operator's side (trial D12, D16):

- railyard-pack refuses an output directory that exists or cannot be created BEFORE it
  prints anything: stdout stays empty (it printed the whole plan, then refused);
- railyardd --expert-store without --expert-listen binds loopback when RAILYARD_SOCKET_IFNAME
  is unset, never every interface (it bound 0.0.0.0:29431); ":PORT" keeps that address;
  0.0.0.0 must be asked for and is named so;
- railyardd --expert-store without --expert-only on a host with no rail exits 2 with "no rail"
  before announcing the store (it printed "listening on ..." first).

Usage: expert_cli_test.py RAILYARD_PACK RAILYARDD
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "expert"))
from expert_e2e_test import checkpoint  # noqa: E402  (the Mixtral-style checkpoint writer)

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def listen_line(railyardd, store, env, *flags):
    """Starts railyardd --expert-only, returns (returncode or None while serving, the stderr line)."""
    p = subprocess.Popen([railyardd, "--expert-store", store, "--expert-only", *flags],
                         stderr=subprocess.PIPE, text=True, env=env)
    line = p.stderr.readline()  # the "listening on" line, or the error
    if "listening on" in line:
        p.terminate()  # serving: stop it (an error exits by itself)
    rc = p.wait(timeout=30)
    return rc, line.strip()


def main():
    pack, railyardd = sys.argv[1:3]
    tmp = tempfile.mkdtemp(prefix="railyard-expert-cli-")
    try:
        ck = os.path.join(tmp, "ckpt")
        os.mkdir(ck)
        checkpoint(ck, layers=1, experts=2, rows=8, cols=8)
        exists = os.path.join(tmp, "exists")
        os.mkdir(exists)
        r = subprocess.run([pack, ck, exists, "--no-progress"], capture_output=True, text=True)
        check(r.returncode == 1 and "already exists" in r.stderr and r.stdout == "",
              f"pack into an existing directory: exit 1, refused before any plan (exit {r.returncode}, "
              f"stdout {r.stdout[:60]!r}, stderr {r.stderr.strip()!r})")
        r = subprocess.run([pack, ck, os.path.join(tmp, "no", "such", "store"), "--no-progress"],
                           capture_output=True, text=True)
        check(r.returncode == 1 and "does not exist" in r.stderr and r.stdout == "",
              f"pack under a missing directory: exit 1, nothing on stdout (exit {r.returncode}, "
              f"stdout {r.stdout[:60]!r}, stderr {r.stderr.strip()!r})")
        r = subprocess.run([pack, ck, exists, "--dry-run"], capture_output=True, text=True)
        check(r.returncode == 0 and "1 MoE layers x 2 experts" in r.stdout and
              f"--dry-run: a run would be refused: output {exists} already exists" in r.stderr,
              f"--dry-run still prints the plan, whatever OUT is, and says a run would be refused ({r.stdout[:60]!r}, "
              f"{r.stderr.strip()!r})")
        # A trailing slash names the directory (it said "its directory out does not exist"), and a
        # file where the directory should be is named as such.
        r = subprocess.run([pack, ck, exists + "/", "--no-progress"], capture_output=True, text=True)
        check(r.returncode == 1 and f"output {exists} already exists" in r.stderr,
              f"OUT with a trailing slash is that directory ({r.stderr.strip()!r})")
        afile = os.path.join(tmp, "afile")
        open(afile, "w").close()
        r = subprocess.run([pack, ck, os.path.join(afile, "x"), "--no-progress"], capture_output=True, text=True)
        check(r.returncode == 1 and f"{afile} is not a directory" in r.stderr,
              f"OUT under a file: 'is not a directory' ({r.stderr.strip()!r})")
        # A partial directory whose run is gone (pid 2^22 + 1 is above Linux's pid_max default) is reclaimed.
        host = socket.gethostname().replace("/", "_").replace("-", "_")
        stale = os.path.join(tmp, f"reclaimed.partial-{host}-4194305")
        other_host = os.path.join(tmp, "reclaimed.partial-elsewhere-4194305")  # a shared file system's
        os.mkdir(other_host)
        os.mkdir(stale)
        r = subprocess.run([pack, ck, os.path.join(tmp, "reclaimed"), "--no-progress"], capture_output=True, text=True)
        check(r.returncode == 0 and not os.path.exists(stale) and os.path.exists(other_host) and
              "left by an interrupted run (pid 4194305 is gone)" in r.stderr,
              f"a stale OUT.partial-<host>-<pid> is removed by the next run ({r.returncode}, {r.stderr.strip()!r})")
        r = subprocess.run([pack, ck, os.path.join(tmp, "aligned"), "--align", "3"], capture_output=True, text=True)
        check(r.returncode == 2 and "not a power of two" in r.stderr and not os.path.exists(os.path.join(tmp, "aligned")),
              f"--align 3 is bad usage: exit 2, nothing written ({r.returncode}, {r.stderr.strip()!r})")
        r = subprocess.run([pack, ck, "--dry-run", "--align", "-4096"], capture_output=True, text=True)
        check(r.returncode == 2 and "'-4096' is out of range: expected 1..1073741824" in r.stderr,
              f"--align -4096 is out of range, not read as 2^64 - 4096 ({r.returncode}, {r.stderr.strip()!r})")
        r = subprocess.run([pack, ck, "--dry-run", "--align", "64K"], capture_output=True, text=True)
        check(r.returncode == 0 and "each aligned to 65536)" in r.stdout,
              f"--align takes K, M and G as 1024s (new-user trial) ({r.returncode}, {r.stdout[-200:]!r}, {r.stderr.strip()!r})")
        r = subprocess.run([pack, ck, "--dry-run", "--align", "2G"], capture_output=True, text=True)
        check(r.returncode == 2 and "out of range: expected 1..1073741824" in r.stderr,
              f"--align 2G is out of range ({r.returncode}, {r.stderr.strip()!r})")
        r = subprocess.run([pack, ck, "--dry-run", "--model-id", ""], capture_output=True, text=True)
        check(r.returncode == 2 and "--model-id needs a name" in r.stderr,
              f"an empty --model-id is bad usage, not the default ({r.returncode}, {r.stderr.strip()!r})")
        r = subprocess.run([pack, "--help"], capture_output=True, text=True)
        check(r.returncode == 0 and "Exit status:" in r.stdout and "2  bad usage" in r.stdout,
              f"--help documents the exit status ({r.stdout[-300:]!r})")
        store = os.path.join(tmp, "store")
        r = subprocess.run([pack, ck, store, "--no-progress"], capture_output=True, text=True)
        check(r.returncode == 0 and "record layout" in r.stdout and f"wrote {store}" in r.stdout,
              f"pack into a new directory prints the plan and writes ({r.stderr.strip()!r})")

        env = dict(os.environ)
        env.pop("RAILYARD_SOCKET_IFNAME", None)
        env.pop("NCCL_SOCKET_IFNAME", None)
        env["RAILYARD_TRANSPORT"] = "tcp"
        rc, line = listen_line(railyardd, store, env)
        # The default port may be taken on a shared machine: the bind error names the address too.
        check(re.search(r"(listening on|control socket on) 127\.0\.0\.1:29431", line) is not None and "0.0.0.0" not in line.split("(")[0],
              f"no --expert-listen, RAILYARD_SOCKET_IFNAME unset: 127.0.0.1:29431 ({line!r})")
        # A pin cap that can admit no client is said at start (new-user trial: only at each refusal).
        p = subprocess.Popen([railyardd, "--expert-store", store, "--expert-only", "--expert-listen", ":0"],
                             stderr=subprocess.PIPE, text=True, env=dict(env, RAILYARD_EXPERT_PIN_CAP="10"))
        line = p.stderr.readline().strip()
        p.terminate()
        p.wait(timeout=30)
        check("RAILYARD_EXPERT_PIN_CAP=10 is below one record stride" in line and "every expert client will be refused" in line,
              f"a pin cap below one stride is warned at start ({line!r})")
        rc, line = listen_line(railyardd, store, env, "--expert-listen", ":0")
        m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(loopback", line)
        check(m is not None and int(m.group(1)) != 0, f"--expert-listen :0 keeps the safe address, any port ({line!r})")
        # Scripts read the port from stdout, as the snapshot tier's "snapshot-port N" (it had none).
        p = subprocess.Popen([railyardd, "--expert-store", store, "--expert-only", "--expert-listen", ":0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        out = p.stdout.readline().strip()
        err = p.stderr.readline().strip()
        p.terminate()
        p.wait(timeout=30)
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", err)
        check(m is not None and out == f"expert-port {m.group(1)}", f"stdout says 'expert-port N', N the port served ({out!r}, {err!r})")
        # New-user trial: a filter set on the command line was said to be unset, and one
        # naming nothing was blamed on RAILYARD_SOCKET_IFNAME / NCCL_SOCKET_IFNAME.
        rc, line = listen_line(railyardd, store, env, "--expert-listen", ":0", "--ifname", "lo")
        check("(loopback: --ifname 'lo' leaves only lo" in line, f"--ifname lo is named as what chose loopback ({line!r})")
        rc, line = listen_line(railyardd, store, env, "--expert-listen", ":0", "--ifname", "nosuchif0")
        check(rc == 2 and "'nosuchif0' (--ifname) matches no interface" in line,
              f"an --ifname naming no interface is refused naming the flag ({rc}, {line!r})")
        rc, line = listen_line(railyardd, store, env, "--expert-listen", "0.0.0.0:0")
        check(re.search(r"listening on 0\.0\.0\.0:\d+ \(every interface", line) is not None,
              f"--expert-listen 0.0.0.0:0 widens it and says so ({line!r})")
        rc, line = listen_line(railyardd, store, env, "--expert-listen", "")
        check(rc == 2 and "--expert-listen needs ADDRESS:PORT" in line, f"an empty --expert-listen is refused ({rc}, {line!r})")
        rc, line = listen_line(railyardd, store, env, "--expert-store", store)
        check(rc == 2 and "--expert-store given 2 times: one daemon serves one expert store" in line,
              f"a second --expert-store is refused, not the first dropped ({rc}, {line!r})")
        rc, line = listen_line(railyardd, store, env, "--expert-listen", ":x")
        check(rc == 2 and "--expert-listen ':x': expected" in line, f"--expert-listen :x is refused, exit 2 ({rc}, {line!r})")
        # Without --expert-only on a host with no rail (lo is never one), the daemon stops
        # before any listener is announced: no "listening on" line, then "no rail".
        r = subprocess.run([railyardd, "--expert-store", store, "--expert-listen", ":0", "--ifname", "lo"],
                           capture_output=True, text=True, env=env, timeout=30)
        check(r.returncode == 3 and "railyardd: no rail" in r.stderr and "listening on" not in r.stderr,
              f"no rail without --expert-only: exit 3 before announcing the store ({r.returncode}, {r.stderr.strip()!r})")
        check("to serve only the expert store without cabling discovery or relaying, add --expert-only" in r.stderr,
              f"the no-rail error names --expert-only ({r.stderr.strip()!r})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
