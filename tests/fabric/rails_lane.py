#!/usr/bin/env python3
"""Which ports are rails, on a netns testbed lane (run inside `testbed.sh run`); issue 8.2/8.3.

uplink-never-rail: h0 gets an uplink `eth0` (10.202.0.1/24) that carries the default route,
  its far end `up-h0` in the testbed's switch namespace, where a listener counts every UDP
  datagram to the cabling port. For every interface filter users write (`^docker`, `eth`,
  `^docker,lo`, `^lo`, `=eth0`, and the one-character values `0`, `e`, `^`, `=`), in
  NCCL_SOCKET_IFNAME and in RAILYARD_SOCKET_IFNAME, a one-rank railyard-perf in fabric mode
  must not make eth0 a rail and no RYCB datagram may reach the listener
  (RAILS_LANE_FILTERS=few: four of those values, for the fabric comms' run). Control:
  RAILYARD_SOCKET_IFNAME==eth0 (the one explicit way) does make it a rail, with a WARN, and
  the listener does hear its hellos. railyard-info shows eth0 as skipped, not as a rail; a
  filter that leaves no rail names, in the error, each port and what removed it.
nccl-ifname-bootstrap: NCCL_SOCKET_IFNAME=mgmt0 (NCCL's bootstrap choice) in fabric mode still
  gives the cabled rails, never mgmt0, whether the railyardd on the two other hosts speak on
  mgmt0 or keep off it (RAILYARD_SOCKET_IFNAME=^mgmt0), and a sendrecv between opposite hosts
  (through those railyardd) passes its data check.

Usage: rails_lane.py CASE RAILYARD_PERF RAILYARDD RAILYARD_INFO LIBDIR
"""
import json
import os
import random
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from netns_lane import stop  # noqa: E402

TB = json.load(open(os.environ["TESTBED_JSON"]))
CASE, PERF, RAILYARDD, INFO, LIBDIR = sys.argv[1:6]
NS = [h["namespace"] for h in TB["hosts"]]
SW = TB["mgmt"]["namespace"]
MGMT = [h["mgmt_ip"] for h in TB["hosts"]]
PORT = 29517  # RAILYARD_DISCOVERY_PORT's default
MAGIC = b"RYCB"  # cabling datagrams start with it (topology/cabling_agent.cc kCablingMagic, little-endian)


def fail(msg):
    print(f"FAIL [{CASE}]: {msg}")
    sys.exit(1)


def sh(*args, ns=None, check=True):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def base_env(extra):
    """This process's environment without its RAILYARD_* settings (but RAILYARD_COMMS
    and RAILYARD_TIMEOUT_MS: the .fabric test runs the cases over the fabric comms),
    NCCL_SOCKET_IFNAME and NCCL_NET_PLUGIN; then the plugin on h0 at WARN, and `extra`."""
    env = {k: v for k, v in os.environ.items()
           if (k in ("RAILYARD_COMMS", "RAILYARD_TIMEOUT_MS") or not k.startswith("RAILYARD_"))
           and k not in ("NCCL_SOCKET_IFNAME", "NCCL_NET_PLUGIN")}
    env.update({"NCCL_NET_PLUGIN": "railyard", "LD_LIBRARY_PATH": LIBDIR, "RAILYARD_DEBUG": "WARN",
                "RAILYARD_HOST_NAME": "h0"})
    env.update(extra)
    return env


LISTENER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, 25, b"up-h0")  # SO_BINDTODEVICE: only what arrives on the uplink
s.bind(("0.0.0.0", %d))
print("ready", flush=True)
while True:
    data, peer = s.recvfrom(65536)
    print(data[:16].hex(), peer[0], flush=True)
""" % PORT


class Uplink:
    """eth0 on h0 with the default route; a listener on its far end counts cabling datagrams."""

    def __init__(self):
        sh("ip", "link", "add", "eth0", "netns", NS[0], "type", "veth", "peer", "name", "up-h0", "netns", SW)
        sh("ip", "addr", "add", "10.202.0.1/24", "dev", "eth0", ns=NS[0])
        sh("ip", "link", "set", "eth0", "up", ns=NS[0])
        sh("ip", "route", "add", "default", "via", "10.202.0.2", "dev", "eth0", ns=NS[0])
        sh("ip", "addr", "add", "10.202.0.2/24", "dev", "up-h0", ns=SW)
        sh("ip", "link", "set", "up-h0", "up", ns=SW)
        routes = sh("ip", "-4", "route", "show", "default", ns=NS[0]).stdout
        if "dev eth0" not in routes:
            fail(f"the uplink's default route is missing: {routes!r}")
        self.proc = subprocess.Popen(["ip", "netns", "exec", SW, "python3", "-c", LISTENER],
                                     stdout=subprocess.PIPE)
        self.buf = b""
        if self._line(10) != "ready":
            fail("the uplink listener did not start")
        self.marks = 0

    def _line(self, timeout):
        """One line from the listener, or None after `timeout` s (own buffer: select() does not
        see lines a buffered reader already holds)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.proc.stdout], [], [], max(0, left))
            if not r:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                fail("the uplink listener exited")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode().strip()

    def drain(self):
        """Every datagram that reached the far end of eth0 so far: a marker sent from h0 on eth0
        after the process under test has exited arrives after anything it sent (one veth, in order)."""
        self.marks += 1
        mark = f"MARK{self.marks}"
        sh("python3", "-c", "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
           f"s.sendto(b'{mark}', ('10.202.0.2', {PORT}))", ns=NS[0])
        seen = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            line = self._line(max(0.1, deadline - time.monotonic()))
            if line is None:
                continue
            if bytes.fromhex(line.split()[0]).startswith(mark.encode()):
                return seen
            seen.append(line)
        fail("the marker datagram never reached the uplink listener")

    def close(self):
        self.proc.kill()
        self.proc.wait()
        sh("ip", "link", "del", "eth0", ns=NS[0], check=False)


def one_rank(extra):
    """A one-rank railyard-perf on h0 in fabric mode (auto): returns (rc, stdout, stderr)."""
    p = subprocess.run(["ip", "netns", "exec", NS[0], PERF, "-np", "1", "-p", "ring", "-b", "1K", "-e", "1K",
                        "-n", "1", "-w", "0", "-T", "30"],
                       env=base_env({"RAILYARD_FABRIC": "auto", **extra}), capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


def device_line(out):
    return next((l for l in out.splitlines() if l.startswith("# Device:")), "")


def fabric_rails(dev):
    """The rails of the fabric device "railyard[a+b]"; [] outside fabric mode (a TCP device
    such as [eth0] chosen by a filter is not a rail: it sends no hello)."""
    if "railyard[" not in dev:
        return []
    return dev.split("railyard[", 1)[1].split("]", 1)[0].split("+")


def case_uplink_never_rail():
    up = Uplink()
    try:
        up.drain()
        filters = ["^docker", "eth", "^docker,lo", "^lo", "=eth0", "0", "e", "^", "="]
        if os.environ.get("RAILS_LANE_FILTERS") == "few":
            # The fabric-comms variant: each run there waits RAILYARD_TIMEOUT_MS for a
            # neighbour, and the filters are read by the same discovery code as in the
            # older comms' run of the whole list; a few kinds are enough here.
            filters = ["^docker", "=eth0", "0", "^"]
        checked = 0
        for var in ("NCCL_SOCKET_IFNAME", "RAILYARD_SOCKET_IFNAME"):
            for value in filters:
                if var == "RAILYARD_SOCKET_IFNAME" and value == "=eth0":
                    continue  # the explicit way, checked below as the control
                rc, out, err = one_rank({var: value})
                heard = [l for l in up.drain() if bytes.fromhex(l.split()[0]).startswith(MAGIC)]
                dev = device_line(out)
                if heard:
                    fail(f"{var}={value!r}: {len(heard)} cabling datagram(s) left on the uplink eth0: {heard[:3]}")
                if var == "RAILYARD_SOCKET_IFNAME" and value in ("^", "="):
                    # Railyard's own name refuses a header with no name after it (NCCL's
                    # alias keeps NCCL's reading, with a WARN): a usage error, nothing sent.
                    if rc == 0 or "with no name after it" not in err:
                        fail(f"{var}={value!r}: expected a usage error naming the value, rc {rc}\n{err[-2000:]}")
                    checked += 1
                    print(f"ok: {var}={value!r}: refused at init, 0 datagrams on eth0")
                    continue
                if "eth0" in fabric_rails(dev):
                    fail(f"{var}={value!r}: the uplink is a rail: {dev}")
                # eth (prefix) leaves no rail at all: fabric mode is off, the run still works.
                if rc != 0:
                    fail(f"{var}={value!r}: rank exited {rc}\n{out[-1500:]}\n{err[-2000:]}")
                checked += 1
                print(f"ok: {var}={value!r}: {dev or '(no device line)'}, 0 datagrams on eth0")
        # Control: the exact name makes it a rail, loudly, and the listener does hear it.
        rc, out, err = one_rank({"RAILYARD_SOCKET_IFNAME": "=eth0"})
        heard = [l for l in up.drain() if bytes.fromhex(l.split()[0]).startswith(MAGIC)]
        if rc != 0 or fabric_rails(device_line(out)) != ["eth0"]:
            fail(f"RAILYARD_SOCKET_IFNAME==eth0 did not make eth0 the rail: rc {rc}\n{out[-1500:]}\n{err[-1500:]}")
        if "eth0 carries a default route" not in err or "WARN" not in err:
            fail(f"RAILYARD_SOCKET_IFNAME==eth0: no WARN about the uplink:\n{err[-1500:]}")
        if not heard:
            fail("RAILYARD_SOCKET_IFNAME==eth0: the listener heard no hello: it could not have seen a leak either")
        print(f"ok: control RAILYARD_SOCKET_IFNAME==eth0 is a rail with a WARN; the listener heard {len(heard)} datagrams")
        # No rail left: the error names each port and what removed it.
        rc, out, err = one_rank({"RAILYARD_SOCKET_IFNAME": "eth", "RAILYARD_FABRIC": "on"})
        for want in ("RAILYARD_FABRIC=on but no interface qualifies as a rail",
                     "eth0: carries a default route",
                     "p0r0: filtered out by RAILYARD_SOCKET_IFNAME='eth'",
                     "mgmt0: filtered out by RAILYARD_SOCKET_IFNAME='eth'"):
            if want not in err:
                fail(f"no-rail error lacks {want!r}: rc {rc}\n{err[-2000:]}")
        if rc == 0:
            fail("RAILYARD_FABRIC=on with no rail exited 0")
        print("ok: no rail left: the error names eth0 (default route) and the filtered ports")
        # railyard-info shares the rule: eth0 is skipped, not a rail, even with a filter.
        info = subprocess.run(["ip", "netns", "exec", NS[0], INFO, "--json", "--listen-ms", "0",
                               "--ifname", "^docker"], env=base_env({}), capture_output=True, text=True)
        doc = json.loads(info.stdout)
        rails = [r.get("netdev") for r in doc.get("rails", [])]
        why = [s["reason"] for s in doc.get("skipped", []) if s.get("name") == "eth0"]
        if "eth0" in rails or not why or not why[0].startswith("carries a default route"):
            fail(f"railyard-info lists the uplink as a rail: rails {rails}, skipped eth0: {why}")
        heard = [l for l in up.drain() if bytes.fromhex(l.split()[0]).startswith(MAGIC)]
        if heard:
            fail(f"railyard-info sent {len(heard)} datagrams on eth0")
        print(f"ok: railyard-info --ifname ^docker: rails {rails}, eth0 skipped ({checked} filter runs checked)")
    finally:
        up.close()


def case_nccl_ifname_bootstrap():
    # Twice: railyardd on h1/h3 as the ranks are set (so four hosts speak on mgmt0, a
    # shared segment), then with RAILYARD_SOCKET_IFNAME=^mgmt0 as the README recommends
    # for daemons, so only the two ranks' hosts speak on it and it would look like a cable
    # (new-user trial: it then became a rail and carried the job's data). The port
    # NCCL_SOCKET_IFNAME names is NCCL's bootstrap network, never a rail, either way.
    env_common = {"NCCL_SOCKET_IFNAME": "mgmt0", "RAILYARD_FABRIC": "on", "RAILYARD_TIMEOUT_MS": "20000"}
    # railyard-info agrees with the plugin: mgmt0 is skipped with the reason, not a rail
    # (new-user trial: its table listed mgmt0 while the plugin and railyardd left it out).
    info = subprocess.run(["ip", "netns", "exec", NS[0], INFO, "--json", "--listen-ms", "0"],
                          env=base_env(env_common), capture_output=True, text=True)
    doc = json.loads(info.stdout)
    rails = [r.get("netdev") for r in doc.get("rails", [])]
    why = [s["reason"] for s in doc.get("skipped", []) if s.get("name") == "mgmt0"]
    if "mgmt0" in rails or not why or "NCCL_SOCKET_IFNAME='mgmt0'" not in why[0]:
        fail(f"railyard-info with NCCL_SOCKET_IFNAME=mgmt0: rails {rails}, skipped mgmt0: {why}\n{info.stderr[-1500:]}")
    if not any(r and r.startswith("p") for r in rails):
        fail(f"railyard-info with NCCL_SOCKET_IFNAME=mgmt0 lists no cabled rail: {rails}")
    print(f"ok: railyard-info with NCCL_SOCKET_IFNAME=mgmt0: rails {rails}, mgmt0 skipped: {why[0]}")
    for daemons, daemon_env in (("railyardd as the ranks", {}),
                                ("railyardd with RAILYARD_SOCKET_IFNAME=^mgmt0", {"RAILYARD_SOCKET_IFNAME": "^mgmt0"})):
        relays = [subprocess.Popen(["ip", "netns", "exec", NS[h], RAILYARDD],
                                   env={**base_env(env_common), **daemon_env, "RAILYARD_HOST_NAME": f"h{h}"},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for h in (1, 3)]
        try:
            port = random.randint(30000, 39000)
            procs = [subprocess.Popen(
                ["ip", "netns", "exec", NS[h], PERF, "--rank", str(r), "--nranks", "2", "--root", f"{MGMT[0]}:{port}",
                 "-p", "sendrecv", "-b", "1K", "-e", "4M", "-f", "16", "-n", "5", "-c", "1", "-T", "60"],
                env={**base_env(env_common), "RAILYARD_HOST_NAME": f"h{h}"},
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r, h in enumerate((0, 2))]
            results = [p.communicate(timeout=90) + (p.returncode,) for p in procs]
            for r, (out, err, rc) in enumerate(results):
                if rc != 0:
                    fail(f"{daemons}: rank {r} exited {rc} with NCCL_SOCKET_IFNAME=mgmt0\n{out[-1500:]}\n{err[-2500:]}")
            out0 = results[0][0]
            dev = device_line(out0)
            if "Out of bounds values : 0 OK" not in out0:
                fail(f"{daemons}: rank 0 did not report 0 wrong values\n{out0[-1500:]}")
            if "railyard[" not in dev or "mgmt0" in dev or "p" not in dev.split("railyard[")[1]:
                fail(f"{daemons}: the fabric device is not made of the cabled rails: {dev}")
            print(f"ok: NCCL_SOCKET_IFNAME=mgmt0, {daemons}: {dev}; h0<->h2 sendrecv through railyardd passed")
        finally:
            stop(relays)


CASES = {"uplink-never-rail": case_uplink_never_rail, "nccl-ifname-bootstrap": case_nccl_ifname_bootstrap}

if __name__ == "__main__":
    CASES[CASE]()
