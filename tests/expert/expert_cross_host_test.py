#!/usr/bin/env python3
"""The expert tier between two hosts, with the client set up as the README shows it:
no RAILYARD_SOCKET_IFNAME. Two network namespaces joined by one veth cable
(10.96.0.1/30 - 10.96.0.2/30); railyardd --expert-store --ifname =xa serves on host a's end; a client
on host b fetches every record over both transports and compares them with the
checkpoint's tensors. (New-user trial: the default read transport failed, its rail on
loopback: "fabric connect on rail 0 (lo 127.0.0.1) to 10.96.0.1:...: Invalid argument";
now the client's rail is the interface the kernel routes the peer through.)

Usage: expert_cross_host_test.py RAILYARD_PACK RAILYARDD LIBDIR
Exit: 0 pass, 1 fail, 77 not root (skipped).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from expert_e2e_test import checkpoint, start_peer  # noqa: E402  (the checkpoint writer, the peer)

CLIENT = r"""
import json, sys
from railyard.expert import ExpertClient
peer, n, stride, transport, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
arena = bytearray(n * stride)
with ExpertClient(peer, arena, transport=transport) as c:
    c.fetch_batch([(i // 4, i % 4, i * stride) for i in range(n)])
open(out, "wb").write(bytes(arena))
"""


def main():
    pack, railyardd, libdir = sys.argv[1:4]
    if os.geteuid() != 0:
        print("expert_cross_host_test: needs root (network namespaces); skipped")
        return 77
    tag = f"ex{os.getpid()}"
    ns = [f"{tag}-a", f"{tag}-b"]
    tmp = tempfile.mkdtemp(prefix="railyard-expert-xhost-")
    peer = None
    failures = []

    def sh(*cmd):
        subprocess.run(cmd, check=True)

    try:
        for n in ns:
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        sh("ip", "-n", ns[0], "link", "add", "xa", "type", "veth", "peer", "name", "xb", "netns", ns[1])
        sh("ip", "-n", ns[0], "addr", "add", "10.96.0.1/30", "dev", "xa")
        sh("ip", "-n", ns[1], "addr", "add", "10.96.0.2/30", "dev", "xb")
        sh("ip", "-n", ns[0], "link", "set", "xa", "up")
        sh("ip", "-n", ns[1], "link", "set", "xb", "up")
        ck = os.path.join(tmp, "ckpt")
        os.mkdir(ck)
        tensors = checkpoint(ck)
        store = os.path.join(tmp, "store")
        subprocess.run([pack, ck, store, "--align", "256", "--no-progress"], check=True, capture_output=True)
        manifest = json.load(open(os.path.join(store, "manifest.json")))
        stride = manifest["record_stride"]
        env = {k: v for k, v in os.environ.items() if k not in ("RAILYARD_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")}
        # The rail by --ifname, not the variable: the flag chooses the tiers' rails too (new-user
        # trial: railyardd --ifname served its store on loopback, unreachable from host b).
        peer, addr = start_peer(railyardd, store, env, prefix=("ip", "netns", "exec", ns[0]), listen=("--ifname", "=xa"))
        if not addr.startswith("10.96.0.1:"):
            print(f"FAIL: railyardd --ifname =xa listens on {addr}, not on its rail 10.96.0.1")
            return 1
        # The snapshot tier takes --ifname's rail too (review: it kept loopback). Started
        # alone in host a's namespace; its stderr line says where its arenas listen.
        swap = os.path.join(tmp, "swap")
        os.mkdir(swap)
        snap = subprocess.Popen(["ip", "netns", "exec", ns[0], railyardd, "--snapshot-arena",
                                 "kind=kv,mode=paging,blob=4K,slots=2", "--snapshot-only", "--ifname", "=xa"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(env, RAILYARD_SWAP_DIR=swap))
        try:
            line = ""
            while "snapshot arenas on" not in line:
                line = snap.stderr.readline()
                if not line:
                    break
        finally:
            snap.terminate()
            snap.wait(timeout=30)
        if "snapshot arenas on 10.96.0.1:" not in line:
            failures.append(f"railyardd --snapshot-only --ifname =xa does not listen on its rail: {line!r}")
        else:
            print("ok   railyardd --snapshot-only --ifname =xa: its arenas listen on the rail, 10.96.0.1")
        client_env = dict(env, RAILYARD_LIB=os.path.join(libdir, "libnccl-net-railyard.so"),
                          PYTHONPATH=os.path.join(HERE, "..", "..", "python"), RAILYARD_TIMEOUT_MS="20000")
        n = 2 * 4
        for transport in ("read", "tcp"):
            out = os.path.join(tmp, f"arena.{transport}")
            r = subprocess.run(["ip", "netns", "exec", ns[1], sys.executable, "-c", CLIENT, addr, str(n), str(stride),
                                transport, out], capture_output=True, text=True, env=client_env, timeout=90)
            if r.returncode != 0:
                failures.append(f"{transport}: the client on host b failed: {r.stderr.strip()[-1500:]}")
                continue
            buf = open(out, "rb").read()
            same = all(buf[i * stride + t["offset"]: i * stride + t["offset"] + t["bytes"]] ==
                       tensors[f"model.layers.{i // 4}.block_sparse_moe.experts.{i % 4}.{t['name']}"][2]
                       for i in range(n) for t in manifest["tensors"])
            if not same:
                failures.append(f"{transport}: records differ from the checkpoint's tensors")
            else:
                print(f"ok   {transport}: all {n} records fetched from host a without RAILYARD_SOCKET_IFNAME are "
                      "byte-identical to the checkpoint's tensors")
    finally:
        if peer is not None:
            peer.kill()
            peer.wait()
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
