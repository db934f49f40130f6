#!/usr/bin/env python3
"""End to end on loopback: a Mixtral-style checkpoint written by this script in the real
safetensors format (sharded, with model.safetensors.index.json), packed by railyard-pack,
served by `railyardd --expert-store --expert-only`, fetched through the Python binding
(ctypes over libnccl-net-railyard.so) over both transports into a numpy array (or a
bytearray when numpy is missing), every record compared with the checkpoint's tensors.
Then the faults through the C API: out of range, a peer SIGKILLed mid-batch
(PEER_LOST, and the client stays failed), the pin cap (ADMISSION_REFUSED), and
railyard-pack refusing a truncated checkpoint while leaving no store behind.

Usage: expert_e2e_test.py RAILYARD_PACK RAILYARDD LIBDIR
"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

try:
    import numpy as np
except ImportError:  # the binding takes any writable buffer
    np = None


def write_safetensors(path, tensors):
    """tensors: {name: (dtype, shape, bytes)} -> the real format."""
    header, at = {"__metadata__": {"format": "pt"}}, 0
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        at += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in sorted(tensors):
            f.write(tensors[name][2])


def checkpoint(dirname, layers=2, experts=4, rows=96, cols=64):
    """A Mixtral-style sharded checkpoint (one shard per layer); returns the tensors."""
    tensors, index = {}, {"weight_map": {}}
    for l in range(layers):
        shard = {}
        for e in range(experts):
            for w, shape in (("w1", [rows, cols]), ("w2", [cols, rows]), ("w3", [rows, cols])):
                name = f"model.layers.{l}.block_sparse_moe.experts.{e}.{w}.weight"
                data = os.urandom(rows * cols * 2)
                shard[name] = tensors[name] = ("BF16", shape, data)
                index["weight_map"][name] = f"model-{l:05d}.safetensors"
        gate = f"model.layers.{l}.block_sparse_moe.gate.weight"
        shard[gate] = ("BF16", [experts, cols], os.urandom(experts * cols * 2))
        index["weight_map"][gate] = f"model-{l:05d}.safetensors"
        write_safetensors(os.path.join(dirname, f"model-{l:05d}.safetensors"), shard)
    with open(os.path.join(dirname, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)
    return tensors


def start_peer(railyardd, store, env, prefix=(), listen=("--expert-listen", "127.0.0.1:0")):
    """railyardd --expert-store STORE --expert-only (run under `prefix`, e.g. ip netns exec NS)
    and the "ADDRESS:PORT" it says it listens on."""
    p = subprocess.Popen([*prefix, railyardd, "--expert-store", store, "--expert-only", *listen],
                         stderr=subprocess.PIPE, text=True, env=env)
    m, line = None, ""
    while m is None:
        line = p.stderr.readline()
        if not line:
            break
        m = re.search(r"listening on ([0-9.]+:\d+)", line)
    if not m:
        p.kill()
        raise SystemExit(f"FAIL: railyardd did not say where it listens: {line!r} {p.stderr.read()}")
    return p, m.group(1)


def main():
    pack, railyardd, libdir = sys.argv[1:4]
    os.environ["RAILYARD_LIB"] = os.path.join(libdir, "libnccl-net-railyard.so")
    from railyard.expert import ExpertClient, ExpertError
    tmp = tempfile.mkdtemp(prefix="railyard-expert-e2e-")
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            failures.append(what)

    try:
        ck = os.path.join(tmp, "ckpt")
        os.mkdir(ck)
        tensors = checkpoint(ck)
        store = os.path.join(tmp, "store")
        dry = subprocess.run([pack, ck, "--dry-run", "--align", "256"], capture_output=True, text=True)
        check(dry.returncode == 0 and "2 MoE layers x 4 experts" in dry.stdout and not os.path.exists(store),
              "railyard-pack --dry-run prints the layout and writes nothing")
        # The stride line tells the tensors' bytes from where they end (alignment gaps between).
        held = re.search(r"its tensors hold (\d+) bytes and end at byte (\d+), each aligned to 256", dry.stdout)
        want = sum(len(tensors[f"model.layers.0.block_sparse_moe.experts.0.{w}.weight"][2]) for w in ("w1", "w2", "w3"))
        check(held is not None and int(held.group(1)) == want and int(held.group(2)) >= want,
              f"railyard-pack --dry-run: a record's tensors hold {want} bytes ({held.group(0) if held else dry.stdout})")
        r = subprocess.run([pack, ck, store, "--align", "256", "--verify", "--no-progress"], capture_output=True, text=True)
        check(r.returncode == 0, f"railyard-pack packs the sharded checkpoint ({r.stderr.strip()})")
        check("verified" in r.stdout, f"railyard-pack --verify says the store was verified ({r.stdout.strip()})")
        again = subprocess.run([pack, ck, store, "--align", "256", "--no-progress"], capture_output=True, text=True)
        check(again.returncode == 1 and "already exists" in again.stderr and "nothing was left" not in again.stderr
              and os.path.exists(os.path.join(store, "manifest.json")),
              f"railyard-pack into an existing store refuses and leaves it as it was ({again.stderr.strip()})")
        manifest = json.load(open(os.path.join(store, "manifest.json")))
        stride = manifest["record_stride"]

        env = dict(os.environ)
        env.pop("RAILYARD_SOCKET_IFNAME", None)
        r = subprocess.run([railyardd, "--expert-only"], capture_output=True, text=True, env=env, timeout=30)
        check(r.returncode == 2 and "--expert-store" in r.stderr, "railyardd --expert-only without a store exits 2")
        r = subprocess.run([railyardd, "--expert-listen", "127.0.0.1:0"], capture_output=True,
                           text=True, env=env, timeout=30)
        check(r.returncode == 2 and "--expert-listen needs --expert-store" in r.stderr,
              f"railyardd --expert-listen without a store exits 2 ({r.stderr.strip()})")
        r = subprocess.run([railyardd, "--expert-store", os.path.join(tmp, "nope"), "--expert-only",
                            "--expert-listen", "127.0.0.1:0"], capture_output=True, text=True, env=env, timeout=30)
        check(r.returncode == 2 and "manifest.json" in r.stderr, f"railyardd --expert-store of a missing store exits 2 ({r.stderr.strip()})")
        peer, addr = start_peer(railyardd, store, env)
        try:
            n = 2 * 4
            for transport in ("tcp", "read"):
                arena = np.zeros(n * stride, dtype=np.uint8) if np is not None else bytearray(n * stride)
                with ExpertClient(addr, arena, transport=transport) as c:
                    check((c.layers, c.experts_per_layer, c.record_stride) == (2, 4, stride),
                          f"{transport}: the manifest arrives ({c.manifest['model_id']}, {c.manifest['scheme']})")
                    c.fetch_batch([(i // 4, i % 4, i * stride) for i in range(n)])
                    buf = bytes(arena)
                    same = True
                    for i in range(n):
                        for t in manifest["tensors"]:
                            name = f"model.layers.{i // 4}.block_sparse_moe.experts.{i % 4}.{t['name']}"
                            got = buf[i * stride + t["offset"]: i * stride + t["offset"] + t["bytes"]]
                            same &= got == tensors[name][2]
                    check(same, f"{transport}: all {n} records are byte-identical to the checkpoint's tensors")
                    try:  # an unknown name is a KeyError naming the tensors, numpy or not
                        c.tensor(arena, "w9.weight")
                        check(False, f"{transport}: tensor('w9.weight') is refused")
                    except KeyError as e:
                        check("no tensor 'w9.weight'" in str(e) and "'w2.weight'" in str(e),
                              f"{transport}: tensor() of an unknown name is a KeyError naming the tensors ({e})")
                    if np is None:
                        try:
                            c.tensor(arena, "w2.weight")
                            check(False, f"{transport}: tensor() without numpy is refused")
                        except ImportError as e:
                            check("needs numpy" in str(e), f"{transport}: tensor() without numpy says it needs numpy ({e})")
                    if np is not None:
                        w2 = c.tensor(arena, "w2.weight", offset=3 * stride)
                        check(w2.shape == (64, 96) and w2.tobytes() == tensors[
                            "model.layers.0.block_sparse_moe.experts.3.w2.weight"][2], f"{transport}: tensor() views a record")
                        align = c.manifest["alignment"]
                        past = len(arena) // align * align  # aligned, with no room for a record
                        try:  # past the arena's end: a ValueError naming the offset (numpy's said only "buffer is smaller")
                            c.tensor(arena, "w2.weight", offset=past)
                            check(False, f"{transport}: tensor() past the arena is refused")
                        except ValueError as e:
                            check(f"arena offset {past}" in str(e) and "past the arena" in str(e),
                                  f"{transport}: tensor() past the arena names the offset ({e})")
                        if align > 1:  # where fetch() puts no record (new-user trial: a garbage view)
                            try:
                                c.tensor(arena, "w2.weight", offset=3 * stride + 1)
                                check(False, f"{transport}: tensor() at an unaligned offset is refused")
                            except ValueError as e:
                                check(f"is not a multiple of the store's alignment {align}" in str(e),
                                      f"{transport}: tensor() at an unaligned offset names the alignment ({e})")
                    try:
                        c.fetch(2, 0, 0)
                        check(False, f"{transport}: layer 2 of 2 is refused")
                    except ExpertError as e:
                        check(e.name == "OUT_OF_RANGE", f"{transport}: layer 2 of 2 is OUT_OF_RANGE ({e})")
                    # Negative indices used to wrap around in ctypes (layer -1 read as 4294967295).
                    for args, text in (((-1, 0, 0), "layer=-1 is out of range: expected 0..4294967295"),
                                       ((0, -1, 0), "expert=-1 is out of range: expected 0..18446744073709551615"),
                                       ((0, 0, -8), "offset=-8 is out of range: expected 0..18446744073709551615")):
                        try:
                            c.fetch(*args)
                            check(False, f"{transport}: fetch{args} is refused")
                        except ValueError as e:
                            check(str(e) == text, f"{transport}: fetch{args} is ValueError '{text}' ({e})")
                    try:
                        c.fetch_batch([(0, 0, 0), (0, -3, 0)])
                        check(False, f"{transport}: a batch with expert -3 is refused")
                    except ValueError as e:
                        check(str(e).startswith("records[1] expert=-3 is out of range"),
                              f"{transport}: a batch with expert -3 names records[1] ({e})")
                    # An offset off the store's alignment (new-user trial: accepted silently).
                    align = c.manifest["alignment"]
                    check(align > 1, f"{transport}: the test store has an alignment to break ({align})")
                    try:
                        c.fetch(0, 0, align + 1)
                        check(False, f"{transport}: fetch at offset {align + 1} is refused")
                    except ExpertError as e:
                        check(e.name == "INVALID_ARGUMENT" and
                              f"not a multiple of the store's alignment {align}" in str(e),
                              f"{transport}: fetch at offset {align + 1} is INVALID_ARGUMENT naming {align} ({e})")
                c.close()
                try:
                    c.fetch(0, 0, 0)
                    check(False, f"{transport}: fetch after close() is refused")
                except ExpertError as e:
                    check(e.name == "CLOSED" and "ExpertClient.fetch: the client is closed" in str(e),
                          f"{transport}: fetch after close() is CLOSED ({e})")

                # One client, four threads (new-user trial: "a 0-byte record", then a
                # client broken for good; a close() under a fetch crashed the interpreter).
                import threading
                arena = bytearray(n * stride)
                c = ExpertClient(addr, arena, transport=transport)
                errors = []

                def fetch_own(t):
                    try:
                        for r in range(10):
                            i = (t + 4 * r) % n  # thread t fills slot t with records t, t+4, ...
                            c.fetch(i // 4, i % 4, t * stride)
                    except Exception as e:  # noqa: BLE001 (any failure is the test's)
                        errors.append(f"thread {t}: {e}")
                threads = [threading.Thread(target=fetch_own, args=(t,)) for t in range(4)]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()
                check(not errors, f"{transport}: four threads share one client ({errors[:2]})")
                last = {t: (t + 4 * 9) % n for t in range(4)}
                first = manifest["tensors"][0]
                same = all(arena[t * stride + first["offset"]: t * stride + first["offset"] + first["bytes"]] ==
                           tensors[f"model.layers.{i // 4}.block_sparse_moe.experts.{i % 4}.{first['name']}"][2]
                           for t, i in last.items())
                check(same, f"{transport}: each thread's slot holds its last record")
                outcomes = []

                def fetch_until_closed():
                    while True:
                        try:
                            c.fetch(0, 1, 0)
                            outcomes.append("ok")
                        except ExpertError as e:
                            outcomes.append(e.name)
                            return
                fetcher = threading.Thread(target=fetch_until_closed)
                fetcher.start()
                while not outcomes:  # the fetcher is under way
                    time.sleep(0.001)
                c.close()
                fetcher.join()
                check(outcomes[-1] == "CLOSED" and set(outcomes[:-1]) <= {"ok"},
                      f"{transport}: close() from another thread waits for the fetch under way, then fetches are "
                      f"CLOSED ({outcomes[-3:]})")

            # SIGKILL the peer while a long batch is in flight: PEER_LOST, never success.
            for transport in ("tcp", "read"):
                big = 4000
                arena = bytearray(big * stride) if np is None else np.zeros(big * stride, dtype=np.uint8)
                c = ExpertClient(addr, arena, transport=transport)
                import threading
                killer = threading.Timer(0.05, lambda: peer.send_signal(signal.SIGKILL))
                killer.start()
                try:
                    for _ in range(50):  # long enough that the kill lands mid-batch
                        c.fetch_batch([(i % 2, i % 4, i * stride) for i in range(big)])
                    check(False, f"{transport}: a batch with the peer killed fails")
                except ExpertError as e:
                    check(e.name == "PEER_LOST", f"{transport}: peer SIGKILLed mid-batch is PEER_LOST ({e})")
                try:
                    c.fetch(0, 0, 0)
                    check(False, f"{transport}: the client stays failed")
                except ExpertError as e:
                    check(e.name == "PEER_LOST", f"{transport}: a later fetch is PEER_LOST too")
                killer.join()
                peer.wait(timeout=10)
                try:
                    c.close()
                except ExpertError:
                    pass
                peer, addr = start_peer(railyardd, store, env)

            # The pin cap, through the daemon's variable: one TCP client fits, a second is refused.
            peer.send_signal(signal.SIGTERM)
            peer.wait(timeout=10)
            env["RAILYARD_EXPERT_PIN_CAP"] = str(stride)
            peer, addr = start_peer(railyardd, store, env)
            a = ExpertClient(addr, bytearray(stride), transport="tcp")
            try:
                ExpertClient(addr, bytearray(stride), transport="tcp")
                check(False, "a second client over RAILYARD_EXPERT_PIN_CAP is refused")
            except ExpertError as e:
                check(e.name == "ADMISSION_REFUSED", f"a second client over the cap is ADMISSION_REFUSED ({e})")
            a.close()
        finally:
            peer.kill()
            peer.wait()

        # A truncated shard: refused, and nothing left that looks like a store.
        shard = os.path.join(ck, "model-00001.safetensors")
        with open(shard, "r+b") as f:
            f.truncate(os.path.getsize(shard) - 1000)
        out = os.path.join(tmp, "store2")
        r = subprocess.run([pack, ck, out, "--no-progress"], capture_output=True, text=True)
        check(r.returncode == 1 and "truncated" in r.stderr and not os.path.exists(out) and
              not any(x.startswith("store2") for x in os.listdir(tmp)),
              f"a truncated shard is refused and leaves nothing ({r.stderr.strip()})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} FAILED", flush=True)
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
