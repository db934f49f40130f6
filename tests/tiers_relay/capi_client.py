#!/usr/bin/env python3
"""A storage-tier client through the installed user path: the Python binding
(python/railyard, hence the C API of libnccl-net-railyard.so) naming its peer as
"host:NAME", so the library resolves the host in its cabling graph and reaches
railyardd's tier tunnel there, relayed when there is no cable (tiers_relay_lane.py
runs it on h0 with railyardd serving on h2).

Usage:
  capi_client.py expert PEER STORE_DIR [--stream SECONDS]
      every record of the store fetched (fabric Reads) and compared byte by byte
      with the store's layer files; prints "expert ok BYTES bytes"
  capi_client.py snapshot PEER KIND BLOB_BYTES SLOTS COUNT [--stream SECONDS]
      COUNT blobs put into the paging arena and got back, compared byte by byte
Output on a fault: "error-at-ms MS", "error NAME: SENTENCE", "stays-failed yes|no"; exit 3.
Exit 1 with "TORN" when a call returned success with other bytes; 2 on a bad set-up.
"""
import hashlib
import json
import os
import sys
import time

from railyard.expert import ExpertClient, ExpertError
from railyard.snapshot import PAGING, Snapshot, SnapshotError, list_arenas


def now_ms():
    """Wall-clock milliseconds (the lane compares them with its own fault time)."""
    return int(time.time() * 1000)


def fault(err, again):
    """Prints the named error `err` and whether calling `again` fails too, then exits 3."""
    print(f"error-at-ms {now_ms()}")
    print(f"error {getattr(err, 'name', 'SNAPSHOT')}: {err}")
    try:
        again()
        print("stays-failed no")
    except (ExpertError, SnapshotError):
        print("stays-failed yes")
    sys.stdout.flush()
    sys.exit(3)


def stream_seconds(argv):
    """The seconds after --stream in `argv`, None without it."""
    return float(argv[argv.index("--stream") + 1]) if "--stream" in argv else None


def rounds(stream):
    """Round numbers 0, 1, ...: one round when `stream` is None, else rounds until
    `stream` seconds have passed, printing "streaming" (the lane's cue to inject its
    fault) once round 0 is done."""
    start, rnd = time.monotonic(), 0
    while True:
        yield rnd
        if rnd == 0 and stream is not None:
            print("streaming", flush=True)
        rnd += 1
        if stream is None or time.monotonic() - start > stream:
            return


def expert(peer, store, stream):
    """Fetches every record of `peer`'s store into an arena (fabric Reads), each compared
    with the store's files in `store`; rounds of it for `stream` seconds when given."""
    arena = bytearray(16 << 20)
    c = ExpertClient(peer, arena, transport="read")
    print(f"opened {peer}: {c.layers} layers x {c.experts_per_layer} experts, stride {c.record_stride}", flush=True)
    per = max(1, len(arena) // c.record_stride)
    files = [open(os.path.join(store, l["file"]), "rb") for l in c.manifest["layers"]]
    total = 0
    for _ in rounds(stream):
        for layer in range(c.layers):
            for e0 in range(0, c.experts_per_layer, per):
                batch = [(layer, e, (e - e0) * c.record_stride) for e in range(e0, min(e0 + per, c.experts_per_layer))]
                try:
                    c.fetch_batch(batch)
                except ExpertError as err:
                    fault(err, lambda: c.fetch(0, 0, 0))
                for (l, e, off) in batch:
                    files[l].seek(e * c.record_stride)
                    want = files[l].read(c.record_stride)
                    if arena[off:off + c.record_stride] != want:
                        print(f"TORN: record ({l}, {e}) differs from the store's bytes", flush=True)
                        sys.exit(1)
                    total += c.record_stride
    c.close()
    print(f"expert ok {total} bytes", flush=True)


def blob(key, rnd, n):
    """The `n` bytes put under `key` in round `rnd`: a SHA-256 of both, repeated."""
    seed = hashlib.sha256(f"{key}/{rnd}".encode()).digest()
    return (seed * (n // len(seed) + 1))[:n]


def snapshot(peer, kind, blob_bytes, slots, count, stream):
    """Puts `count` blobs into `peer`'s paging arena `kind` and gets each back, compared
    byte by byte, then (without `stream`) once more with put_many and get_many; rounds
    of the first for `stream` seconds when given. First lists the peer's
    arenas (discovery through the same tunnel) and checks `kind` is there as asked."""
    arenas = {a["kind"]: a for a in list_arenas(peer, 0)}
    if kind not in arenas or arenas[kind]["mode"] != "paging" or arenas[kind]["blob_bytes"] != blob_bytes \
            or arenas[kind]["arena_bytes"] != blob_bytes * slots:
        print(f"LIST: {peer} lists {arenas}, not a paging arena {kind} of {slots} x {blob_bytes} bytes", flush=True)
        sys.exit(1)
    print(f"listed {peer}: {sorted(arenas)}", flush=True)
    s = Snapshot(peer, 0, kind, PAGING, blob_bytes * slots, blob_bytes)
    print(f"connected {peer} arena {kind}", flush=True)
    out = bytearray(blob_bytes)
    moved = 0
    for rnd in rounds(stream):
        for k in range(count):
            data = blob(k, rnd, blob_bytes)
            try:
                s.put(k, data)
            except SnapshotError as err:
                fault(err, lambda: s.put(k, data))
            moved += blob_bytes
        for k in range(count):
            try:
                found = s.get(k, out)
            except SnapshotError as err:
                fault(err, lambda: s.get(k, out))
            if not found or out != blob(k, rnd, blob_bytes):
                print(f"TORN: blob {k} of round {rnd} came back {'with other bytes' if found else 'absent'}", flush=True)
                sys.exit(1)
            moved += blob_bytes
    if stream is None:  # once more in batches: two blobs in flight through the same tunnel
        rnd = 1000
        s.put_many([(k, blob(k, rnd, blob_bytes)) for k in range(count)])
        outs = [bytearray(blob_bytes) for _ in range(count)]
        found = s.get_many(list(zip(range(count), outs)))
        for k in range(count):
            if not found[k] or outs[k] != blob(k, rnd, blob_bytes):
                print(f"TORN: batch blob {k} came back {'with other bytes' if found[k] else 'absent'}", flush=True)
                sys.exit(1)
        moved += 2 * count * blob_bytes
        print(f"batches ok {count} blobs", flush=True)
    s.close()
    print(f"snapshot ok {moved} bytes", flush=True)


def main(argv):
    """Runs the case argv[1] names; exit 2 on a bad set-up (see the module's usage)."""
    try:
        if argv[1] == "expert":
            expert(argv[2], argv[3], stream_seconds(argv))
        elif argv[1] == "snapshot":
            snapshot(argv[2], argv[3], int(argv[4]), int(argv[5]), int(argv[6]), stream_seconds(argv))
        else:
            print(f"setup-failed unknown case {argv[1]}")
            sys.exit(2)
    except (ExpertError, SnapshotError) as err:  # at open or connect: set-up
        print(f"setup-failed {getattr(err, 'name', '')}: {err}", flush=True)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
