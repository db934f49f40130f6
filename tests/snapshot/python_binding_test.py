#!/usr/bin/env python3
"""The snapshot tier's C API through the Python binding (python/railyard/snapshot.py),
against a real `railyardd --snapshot-only` on loopback: the README example (a numpy
array put, evicted by more puts than the arena holds, got back by content), raw mode,
and the errors the C API returns (wrong size, out-of-range offset, refused handshake).

Usage: python_binding_test.py RAILYARDD LIBNCCL_NET_RAILYARD
"""
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))


# Run in a subprocess: a host:NAME list and connect with port 0, printing how each failed.
HOST_NAME_PROBE = """
from railyard.snapshot import list_arenas, Snapshot, SnapshotError, PAGING
for call in (lambda: list_arenas("host:no-such-host", 0),
             lambda: Snapshot("host:no-such-host", 0, "ssm", PAGING, arena_bytes=4 << 20, blob_bytes=1 << 20)):
    try:
        call()
        print("reached")
    except SnapshotError as e:
        print("SnapshotError", e.code, e)
"""


def start_daemon(railyardd, args, env, stderr=None):
    """railyardd --snapshot-only with `args`; (process, its snapshot port)."""
    d = subprocess.Popen([railyardd, "--snapshot-only", "--snapshot-address", "127.0.0.1"] + args,
                         stdout=subprocess.PIPE, stderr=stderr, env=env)
    port = 0
    deadline = time.time() + 20
    line = b""
    while time.time() < deadline and port == 0:
        r, _, _ = select.select([d.stdout], [], [], 0.2)
        if r:
            line = d.stdout.readline()
            if line.startswith(b"snapshot-port "):
                port = int(line.split()[1])
            elif not line:
                break
    if not port:
        d.kill()
        raise AssertionError("railyardd printed no snapshot port (%r, exit %r)" % (line, d.poll()))
    return d, port


def stop_daemon(d):
    d.send_signal(signal.SIGTERM)
    try:
        d.wait(10)
    except subprocess.TimeoutExpired:
        d.kill()
        d.wait()


def restart_with_sync(railyardd, env, swap):
    """A sync daemon restarted says on stderr how many committed blobs it recovered (new-user
    trial: that count was only logged at INFO), and serves them."""
    from railyard.snapshot import Snapshot, PAGING
    import numpy as np
    env = dict(env, RAILYARD_SWAP_DIR=swap, RAILYARD_SWAP_SYNC="1")
    args = ["--snapshot-arena", "kind=ssm,mode=paging,blob=64K,slots=2"]
    head = f"railyardd: snapshot kind 'ssm' (paging, 2 slots of 65536 bytes, swap in {swap}, sync on): "
    for round_ in range(2):
        with tempfile.TemporaryFile() as err:
            d, port = start_daemon(railyardd, args, env, stderr=err)
            try:
                with Snapshot("127.0.0.1", port, "ssm", PAGING, arena_bytes=2 * 65536, blob_bytes=65536) as s:
                    if round_ == 0:
                        s.put_many([(k, np.full(65536, k, dtype=np.uint8)) for k in range(3)])
                    else:
                        out = np.zeros(65536, dtype=np.uint8)
                        for k in range(3):
                            assert s.get(k, out) and (out == k).all(), f"key {k} lost in the restart"
            finally:
                stop_daemon(d)
            err.seek(0)
            text = err.read().decode("utf-8", "replace")
        want = head + ("empty, no committed blob in the swap file" if round_ == 0 else "3 committed blobs recovered")
        assert want in text.splitlines(), (want, text[-1500:])


def main():
    railyardd, lib = sys.argv[1], sys.argv[2]
    # A pinned library that does not load is an error naming it, never a silent
    # fallback to the build tree's copy (new-user trial).
    probe = subprocess.run([sys.executable, "-c", "import railyard._lib as l; l.load()"],
                           env=dict(os.environ, RAILYARD_LIB="/nonexistent/libnccl-net-railyard.so",
                                    PYTHONPATH=os.path.join(here, "..", "..", "python")),
                           capture_output=True, text=True)
    if probe.returncode == 0 or "RAILYARD_LIB='/nonexistent/libnccl-net-railyard.so' cannot be loaded" not in probe.stderr:
        print(f"FAIL: a RAILYARD_LIB that does not load was not refused (rc {probe.returncode}):\n{probe.stderr[-800:]}")
        return 1
    # A pinned library that loads but is not Railyard's says so (it was a raw AttributeError
    # at the first call).
    probe = subprocess.run([sys.executable, "-c", "import railyard._lib as l; l.load()"],
                           env=dict(os.environ, RAILYARD_LIB="libc.so.6",
                                    PYTHONPATH=os.path.join(here, "..", "..", "python")),
                           capture_output=True, text=True)
    if probe.returncode == 0 or ("RAILYARD_LIB='libc.so.6' loads but is not Railyard's libnccl-net-railyard.so, "
                                 "or is older than this package: it exports no railyard_expert_open") not in probe.stderr:
        print(f"FAIL: a RAILYARD_LIB without the C endpoints was not refused (rc {probe.returncode}):\n{probe.stderr[-800:]}")
        return 1
    os.environ["RAILYARD_LIB"] = lib
    # railyardd's snapshot errors carry one "snapshot: " prefix (it used to print
    # "railyardd: snapshot: snapshot: listen on ...").
    for args, want in ((["--snapshot-address", "192.0.2.1", "--snapshot-arena", "kind=a,mode=raw,blob=4K,slots=2"],
                        "railyardd: snapshot: listen on 192.0.2.1:0: Cannot assign requested address (errno 99)"),
                       (["--snapshot-address", "127.0.0.1", "--snapshot-arena", "kind=a,mode=raw,blob=4K,slots=0"],
                        "railyardd: snapshot: arena spec 'kind=a,mode=raw,blob=4K,slots=0': slots='0' is out of range: "
                        "expected an integer of 1 or more (slots x blob at most 1 TiB)"),
                       # One prefix for the server's own errors too (it printed "snapshot: snapshot server:").
                       (["--snapshot-address", "127.0.0.1", "--snapshot-arena", "kind=a,mode=raw,blob=4K,slots=2",
                         "--snapshot-arena", "kind=a,mode=raw,blob=4K,slots=2"],
                        "railyardd: snapshot server: kind 'a' given twice")):
        r = subprocess.run([railyardd, "--snapshot-only"] + args, capture_output=True, text=True, timeout=30,
                           env={k: v for k, v in os.environ.items() if k != "RAILYARD_SOCKET_IFNAME"})
        if r.returncode != 2 or want not in r.stderr.splitlines():
            print(f"FAIL: railyardd {' '.join(args)}: rc {r.returncode}, wanted the line {want!r} in:\n{r.stderr[-800:]}")
            return 1
    try:
        import numpy as np
    except ImportError:
        print("numpy missing (python3-numpy): skipped")
        return 77
    from railyard.snapshot import Snapshot, SnapshotError, PAGING, RAW, list_arenas

    swap = tempfile.mkdtemp(prefix="railyard-snapshot-py-")
    env = dict(os.environ, RAILYARD_SWAP_DIR=swap, RAILYARD_SOCKET_IFNAME="")
    env.pop("RAILYARD_SOCKET_IFNAME")
    blob = 1 << 20
    d, port = start_daemon(railyardd, ["--snapshot-arena", "kind=ssm,mode=paging,blob=1M,slots=4",
                                       "--snapshot-arena", "kind=kv,mode=raw,blob=64K,slots=8"], env)
    try:
        # Discovery: both arenas of the daemon, with their sizes.
        arenas = {a["kind"]: a for a in list_arenas("127.0.0.1", port)}
        assert sorted(arenas) == ["kv", "ssm"], arenas
        assert arenas["ssm"]["mode"] == "paging" and arenas["ssm"]["blob_bytes"] == blob, arenas
        assert arenas["ssm"]["arena_bytes"] == 4 * blob, arenas
        assert arenas["kv"]["mode"] == "raw" and arenas["kv"]["arena_bytes"] == 8 * 65536, arenas

        with Snapshot("127.0.0.1", port, "ssm", PAGING, arena_bytes=4 * blob, blob_bytes=blob) as s:
            state = np.random.default_rng(1).random(blob // 8)
            s.put(1, state)
            for k in range(2, 20):  # 19 blobs into a 4-slot arena: key 1 goes to swap
                s.put(k, np.full(blob // 8, k, dtype=np.float64))
            back = np.empty_like(state)
            assert s.get(1, back), "key 1 lost"
            assert (back == state).all(), "key 1 came back with other bytes"
            for k in range(2, 20):
                assert s.get(k, back) and (back == k).all(), k
            assert not s.get(12345, back)
            assert s.remove(3) and not s.remove(3)
            # Negative keys used to wrap to 2**64-1 in ctypes and be stored there (new-user trial).
            for call, arg in ((lambda: s.put(-1, state), "key=-1"), (lambda: s.get(-1, back), "key=-1"),
                              (lambda: s.remove(-2), "key=-2"), (lambda: s.get(1 << 64, back), "key=")):
                try:
                    call()
                    raise AssertionError("a key outside 0..2**64-1 was accepted: " + arg)
                except ValueError as e:
                    assert str(e).startswith(arg) and "out of range: expected 0..18446744073709551615" in str(e), e
            try:
                s.get("1", back)
                raise AssertionError("a str key was accepted")
            except TypeError as e:
                assert str(e) == "key must be an integer, not str", e
            try:
                s.put(5, np.zeros(10))
                raise AssertionError("a wrong-size put was accepted")
            except SnapshotError as e:
                assert e.code == 4 and "1048576 bytes" in str(e), e
            # Registered buffers: puts from them and gets into them skip the staging copy;
            # a blob evicted to swap between the two comes back by content.
            reg_in = np.random.default_rng(2).random(blob // 8)
            reg_out = np.zeros(blob // 8)
            s.register(reg_in)
            s.register(reg_out)
            s.put(40, reg_in)
            for k in range(41, 46):
                s.put(k, np.full(blob // 8, k, dtype=np.float64))
            assert s.get(40, reg_out) and (reg_out == reg_in).all(), "a registered round trip changed the bytes"
            try:
                s.register(reg_in)
                raise AssertionError("a buffer registered twice was accepted")
            except SnapshotError as e:
                assert e.code == 5 and "is registered on this handle already" in str(e), e
            s.deregister(reg_in)
            s.deregister(reg_out)
            try:
                s.deregister(reg_in)
                raise AssertionError("a deregister of a buffer not registered was accepted")
            except SnapshotError as e:
                assert e.code == 4 and "is not registered on this handle" in str(e), e
            try:
                s.register(b"read-only")
                raise AssertionError("a read-only buffer was registered")
            except ValueError as e:
                assert "writable" in str(e), e
            s.register(reg_out)  # left registered: close() releases it
            # Batches: 10 blobs in one call (past the 4 slots), back in one call with a key
            # the peer does not hold; a wrong-size blob fails the batch before anything moves.
            many = [(100 + k, np.full(blob // 8, 100 + k, dtype=np.float64)) for k in range(10)]
            s.put_many(many)
            outs = [np.zeros(blob // 8) for _ in range(11)]
            found = s.get_many([(100 + k, outs[k]) for k in range(10)] + [(999, outs[10])])
            assert found == [True] * 10 + [False], found
            for k in range(10):
                assert (outs[k] == 100 + k).all(), f"batch blob {k} came back with other bytes"
            assert not outs[10].any(), "an absent key's buffer was written"
            try:
                s.put_many([(200, many[0][1]), (201, np.zeros(10))])
                raise AssertionError("a batch with a wrong-size blob was accepted")
            except SnapshotError as e:
                assert e.code == 4 and "put batch: blob 1 (key 201) has 80 bytes; kind 'ssm'" in str(e), e
                assert e.results == [-1, 4], e.results
            try:
                s.get_many([(200, out) for out in outs[:2]] + [(201, b"read-only")])
                raise AssertionError("a read-only buffer was accepted by get_many")
            except ValueError as e:
                assert str(e) == "item 2 (key 201): snapshot: the buffer must be writable", e
            assert not s.get(200, back), "a refused batch stored its first blob"
            try:
                s.put_many([(1, 2, 3)])
                raise AssertionError("a malformed batch item was accepted")
            except ValueError as e:
                assert str(e) == "item 0: a (key, buffer) pair expected, got a tuple of 3", e
        with Snapshot("127.0.0.1", port, "kv", RAW, arena_bytes=8 * 65536, blob_bytes=65536) as r:
            a = np.arange(65536, dtype=np.uint8)
            r.write_at(7 * 65536, a)
            out = np.zeros(65536, dtype=np.uint8)
            r.read_at(7 * 65536, out)
            assert (out == a).all()
            # A paging call on a raw arena names this binding's calls, not the C++ ones
            # (new-user trial: "use WriteAt" where Python says write_at), and the code by name.
            try:
                r.put(1, a)
                raise AssertionError("put on a raw arena was accepted")
            except SnapshotError as e:
                assert e.code == 5 and e.name == "INVALID_USAGE", e
                assert str(e) == ("railyard snapshot error INVALID_USAGE (5): Snapshot.put on raw kind 'kv' "
                                  "(use Snapshot.write_at)"), e
            try:
                r.get_many([(1, out)])
                raise AssertionError("get_many on a raw arena was accepted")
            except SnapshotError as e:
                assert str(e) == ("railyard snapshot error INVALID_USAGE (5): Snapshot.get_many on raw kind 'kv' "
                                  "(use Snapshot.read_at)"), e
            try:
                r.write_at(8 * 65536, a)
                raise AssertionError("an out-of-range write was accepted")
            except SnapshotError as e:
                assert e.code == 4 and "nothing was written" in str(e), e
            try:
                r.read_at(-65536, out)
                raise AssertionError("a negative offset was accepted")
            except ValueError as e:
                assert str(e) == "offset=-65536 is out of range: expected 0..18446744073709551615", e
        # After close(), a clear "closed" error (it used to be "NULL handle or data").
        try:
            r.read_at(0, out)
            raise AssertionError("read_at after close() was accepted")
        except SnapshotError as e:
            assert str(e) == ("railyard snapshot error INVALID_ARGUMENT (4): Snapshot.read_at: the connection is closed "
                              "(close() was called)"), e
        r.close()  # a second close is harmless
        try:
            list_arenas(b"127.0.0.1", port)
            raise AssertionError("a bytes host was accepted")
        except TypeError as e:  # it was AttributeError: 'bytes' object has no attribute 'encode' (trial)
            assert str(e).startswith("host must be a str"), e
        try:
            list_arenas("127.0.0.1", -1)
            raise AssertionError("port -1 was accepted")
        except ValueError as e:
            assert str(e) == "port=-1 is out of range: expected 1..65535", e
        # A host:NAME peer ignores the port: 0 is taken (it raised ValueError, new-user trial),
        # and both calls go the host:NAME way (the tunnel), failing there by name. In a
        # process of its own whose RAILYARD_SOCKET_IFNAME matches no interface, so no
        # cabling hello can leave this host.
        probe = subprocess.run([sys.executable, "-c", HOST_NAME_PROBE],
                               env=dict(os.environ, RAILYARD_SOCKET_IFNAME="=ry-no-such-if",
                                        PYTHONPATH=os.path.join(here, "..", "..", "python")),
                               capture_output=True, text=True, timeout=60)
        lines = probe.stdout.splitlines()
        for call, line in zip(("list_arenas", "Snapshot"), lines + ["", ""]):
            want = f"SnapshotError 5 railyard snapshot error INVALID_USAGE (5): {call} host:no-such-host: "
            assert line.startswith(want) and "needs fabric rails" in line, (want, probe.stdout, probe.stderr[-800:])
        try:
            Snapshot("127.0.0.1", port, "ssm", PAGING, arena_bytes=8 * blob, blob_bytes=blob)
            raise AssertionError("a mismatched arena size was accepted")
        except SnapshotError as e:
            assert e.code == 5 and "arena bytes" in str(e), e
        # close() from another thread while a put_many runs waits for it (new-user trial: the
        # handle was freed under the batch: "receive failed: Bad file descriptor"). Whichever
        # thread gets there first, the batch either ends well or is refused as closed.
        import threading
        c = Snapshot("127.0.0.1", port, "ssm", PAGING, arena_bytes=4 * blob, blob_bytes=blob)
        outcome = []

        def batch():
            try:
                c.put_many([(500 + k, np.full(blob // 8, k, dtype=np.float64)) for k in range(40)])
                outcome.append("stored")
            except SnapshotError as e:
                outcome.append(str(e))

        t = threading.Thread(target=batch)
        t.start()
        c.close()
        t.join(60)
        assert outcome and (outcome[0] == "stored" or "put_many: the connection is closed" in outcome[0]), outcome
        stop_daemon(d)
        sync_swap = os.path.join(swap, "sync")
        os.mkdir(sync_swap)
        restart_with_sync(railyardd, env, sync_swap)
        print("python binding: ok")
        return 0
    finally:
        stop_daemon(d)
        shutil.rmtree(swap, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
