#!/usr/bin/env python3
"""One rank of tools/gpu/nccl-check.sh: PyTorch torch.distributed over NCCL, with
NCCL's net transport given to Railyard.

nccl-check.sh starts two of these on the one GPU, each with its own NCCL_HOSTID
and with NCCL_SHM_DISABLE=1 / NCCL_P2P_DISABLE=1, so NCCL sees two hosts and
has to move every byte through its net plugin (NCCL_NET_PLUGIN=railyard,
NCCL_NET=Railyard: no fallback to IB or Socket).

  nccl_check_ranks.py --out RESULT.json [--sizes BYTES,...]   (RANK, WORLD_SIZE,
                                     MASTER_ADDR, MASTER_PORT in the environment)
  nccl_check_ranks.py --dry --out RESULT.json   no torch: checks this rank's
                                     environment and dlopens the plugin by name as
                                     NCCL would (the rehearsal, nccl-check.sh --no-gpu)
  nccl_check_ranks.py --self-test    checks the expected-value formulas (no torch)
  nccl_check_ranks.py --bench ITERS ...   after the checks, times all_reduce and
                                     send/recv at each size (see bench())

Operations, on CUDA tensors of each size (bytes; default 4K, 1M, 64M):
  all_reduce SUM (float32, and int32 at the smallest size), all_gather
  (all_gather_into_tensor), send/recv both ways at once (batch_isend_irecv).
Each result is compared element by element with the value computed here; the
JSON result lists every case with ok, the number of wrong elements and seconds.
Exit status: 0 all cases right, 1 a wrong result, 2 set-up failed (message says).
"""
import argparse
import ctypes
import json
import os
import sys
import time

DEFAULT_SIZES = (4 << 10, 1 << 20, 64 << 20)
PLUGIN_LIB = "libnccl-net-railyard.so"


# ------------------------------------------------------------ expected values
# Plain integer formulas (exact in float32: every value stays below 2^24). They
# work on Python ints (the self-test, no torch) and on int64 CUDA tensors of
# element indices (the real run) alike.

def contribution(rank, i):
    """What rank `rank` puts at element i before a collective: small integers."""
    return (i % 251) + 1000 * (rank + 1)


def allreduce_expected(world, i):
    """Element i of SUM over ranks of contribution(rank, i)."""
    return sum(contribution(r, i) for r in range(world))


def sendrecv_payload(sender, i):
    """What `sender` sends at element i in the send/recv case."""
    return (i % 509) + 7 * (sender + 1)


def self_test():
    """Checks the formulas against hand-computed values; returns a list of failures."""
    bad = []
    if contribution(0, 0) != 1000 or contribution(1, 252) != 2001:
        bad.append("contribution")
    if allreduce_expected(2, 3) != (3 + 1000) + (3 + 2000):
        bad.append("allreduce_expected")
    if sendrecv_payload(1, 510) != 1 + 14:
        bad.append("sendrecv_payload")
    if bus_factor("all_reduce", 4) != 1.5 or bus_factor("send/recv", 2) != 1.0:
        bad.append("bus_factor")
    if median([3, 1, 2]) != 2 or median([4, 1, 3, 2]) != 2.5:
        bad.append("median")
    top = max(allreduce_expected(2, i) for i in range(251))
    if top >= 1 << 24:
        bad.append("values exceed float32's exact integers")
    return bad


# ------------------------------------------------------------ dry rehearsal

def loaded_path(name):
    """The file of the first mapping in /proc/self/maps whose name ends in `name`."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.rstrip("\n").split(None, 5)  # the sixth field, the path, may hold spaces
            if len(parts) == 6 and parts[5].endswith("/" + name):
                return parts[5]
    return None


def dry(out):
    """No torch: the checks of this rank's environment that the real run relies
    on, and the plugin loaded the way NCCL loads it (dlopen by file name through
    LD_LIBRARY_PATH), its v11 table and railyard_version() found."""
    rank = int(os.environ.get("RANK", "-1"))
    checks = {}
    want = {"NCCL_SHM_DISABLE": "1", "NCCL_P2P_DISABLE": "1", "NCCL_NET_PLUGIN": "railyard", "NCCL_NET": "Railyard"}
    for k, v in want.items():
        checks[f"env {k}={v}"] = os.environ.get(k) == v
    checks["env NCCL_HOSTID set"] = bool(os.environ.get("NCCL_HOSTID"))
    checks["env NCCL_DEBUG_FILE set"] = bool(os.environ.get("NCCL_DEBUG_FILE"))
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        checks[f"env {k} set"] = bool(os.environ.get(k))
    info = {"rank": rank, "hostid": os.environ.get("NCCL_HOSTID")}
    try:
        lib = ctypes.CDLL(PLUGIN_LIB, mode=ctypes.RTLD_LOCAL)
        lib.railyard_version.restype = ctypes.c_char_p
        info["plugin_version"] = lib.railyard_version().decode()
        info["plugin_path"] = loaded_path(PLUGIN_LIB)
        ctypes.c_void_p.in_dll(lib, "ncclNetPlugin_v11")
        checks["dlopen(libnccl-net-railyard.so) by name, ncclNetPlugin_v11 and railyard_version found"] = True
    except (OSError, ValueError, AttributeError) as e:
        info["plugin_error"] = str(e)
        checks["dlopen(libnccl-net-railyard.so) by name, ncclNetPlugin_v11 and railyard_version found"] = False
    result = {"mode": "dry", **info, "checks": checks, "ok": all(checks.values())}
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    return 0 if result["ok"] else 1


# ------------------------------------------------------------ the real run

# ------------------------------------------------------------ the benchmark

def bus_factor(op, world):
    """nccl-tests' bus-bandwidth factor: all_reduce moves 2(n-1)/n of the buffer
    over each rank's link; send/recv moves the buffer once each way."""
    return 2.0 * (world - 1) / world if op == "all_reduce" else 1.0


def median(xs):
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def bench(torch, dist, dev, rank, world, sizes, iters, warmup=3):
    """Times all_reduce SUM (float32) and send/recv both ways at each size (bytes):
    `warmup` untimed calls, then `iters` calls each timed on the monotonic clock
    around the call and a device synchronize. Returns one row per (op, size):
    median seconds per call, algbw = bytes / median (GB/s, 1e9 B), busbw =
    algbw x bus_factor (nccl-tests' columns)."""
    rows = []
    peer = 1 - rank
    for nbytes in sizes:
        n = max(1, nbytes // 4)
        # zeros: summed in place over and over they stay finite (the values are not checked here)
        x = (contribution(rank, torch.arange(n, device=dev, dtype=torch.int64)) * 0).to(torch.float32)
        recv = torch.empty(n, device=dev, dtype=torch.float32)

        def allreduce():
            dist.all_reduce(x, op=dist.ReduceOp.SUM)

        def sendrecv():
            for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, peer), dist.P2POp(dist.irecv, recv, peer)]):
                w.wait()

        ops = [("all_reduce", allreduce)] + ([("send/recv", sendrecv)] if world == 2 else [])
        for name, fn in ops:
            for _ in range(warmup):
                fn()
            torch.cuda.synchronize(dev)
            times = []
            for _ in range(iters):
                t = time.monotonic()
                fn()
                torch.cuda.synchronize(dev)
                times.append(time.monotonic() - t)
            med = median(times)
            algbw = nbytes / med / 1e9 if med > 0 else 0.0
            row = {"op": name, "bytes": nbytes, "iters": iters, "median_s": med,
                   "algbw_GBs": round(algbw, 4), "busbw_GBs": round(algbw * bus_factor(name, world), 4)}
            rows.append(row)
            print(f"rank {rank}: bench {name} {nbytes} B: {med * 1e6:.1f} us, busbw {row['busbw_GBs']:.3f} GB/s",
                  flush=True)
    return rows


def run(out, sizes, bench_iters=0):
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"nccl_check_ranks: cannot import torch: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("nccl_check_ranks: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    result = {"mode": "gpu", "rank": rank, "world": world, "torch": torch.__version__,
              "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(dev), "cases": []}
    try:
        result["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    except (AttributeError, RuntimeError, TypeError):
        result["nccl"] = None
    t0 = time.monotonic()
    try:
        dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=world, device_id=dev)
    except TypeError:  # torch < 2.3 has no device_id
        dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=world)
    result["init_seconds"] = round(time.monotonic() - t0, 3)

    def case(name, nbytes, fn):
        t = time.monotonic()
        try:
            wrong = fn()
            err = None
        except Exception as e:  # a collective that raises is a failed case, not a crash
            wrong, err = -1, f"{type(e).__name__}: {e}"
        torch.cuda.synchronize(dev)
        c = {"op": name, "bytes": nbytes, "ok": wrong == 0, "wrong": wrong,
             "seconds": round(time.monotonic() - t, 4)}
        if err:
            c["error"] = err
        result["cases"].append(c)
        print(f"rank {rank}: {name} {nbytes} B: {'ok' if wrong == 0 else f'WRONG ({wrong})'}"
              + (f" {err}" if err else ""), flush=True)

    def idx(n):
        return torch.arange(n, device=dev, dtype=torch.int64)

    def allreduce(n, dtype):
        def fn():
            i = idx(n)
            x = contribution(rank, i).to(dtype)
            dist.all_reduce(x, op=dist.ReduceOp.SUM)
            want = allreduce_expected(world, i).to(dtype)
            return int((x != want).sum().item())
        return fn

    def allgather(n):
        def fn():
            i = idx(n)
            mine = contribution(rank, i).to(torch.float32)
            got = torch.empty(world * n, device=dev, dtype=torch.float32)
            dist.all_gather_into_tensor(got, mine)
            want = torch.cat([contribution(r, i).to(torch.float32) for r in range(world)])
            return int((got != want).sum().item())
        return fn

    def sendrecv(n):
        def fn():
            peer = 1 - rank
            i = idx(n)
            send = sendrecv_payload(rank, i).to(torch.float32)
            recv = torch.empty(n, device=dev, dtype=torch.float32)
            ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            want = sendrecv_payload(peer, i).to(torch.float32)
            return int((recv != want).sum().item())
        return fn

    for nbytes in sizes:
        n = max(1, nbytes // 4)
        case("all_reduce sum float32", nbytes, allreduce(n, torch.float32))
        if nbytes == min(sizes):
            case("all_reduce sum int32", nbytes, allreduce(n, torch.int32))
        case("all_gather float32", nbytes, allgather(n))
        if world == 2:
            case("send/recv both ways float32", nbytes, sendrecv(n))
    result["ok"] = all(c["ok"] for c in result["cases"]) and bool(result["cases"])

    def write():
        result["seconds"] = round(time.monotonic() - t0, 3)
        with open(out, "w") as f:
            json.dump(result, f, indent=1)

    if bench_iters > 0:
        write()  # the checks' results stand even if the bench does not end
        result["bench"] = bench(torch, dist, dev, rank, world, sizes, bench_iters)
    dist.barrier()
    dist.destroy_process_group()
    write()
    return 0 if result["ok"] else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="where this rank writes its JSON result")
    p.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES),
                   help="comma-separated message sizes in bytes")
    p.add_argument("--bench", type=int, default=0, metavar="ITERS",
                   help="after the checks, time all_reduce and send/recv at each size ITERS times (median)")
    p.add_argument("--dry", action="store_true", help="no torch: environment and plugin-load checks")
    p.add_argument("--self-test", action="store_true", help="check the expected-value formulas and exit")
    a = p.parse_args()
    if a.self_test:
        bad = self_test()
        print("self-test: " + ("ok" if not bad else "FAILED: " + ", ".join(bad)))
        return 0 if not bad else 1
    if not a.out:
        p.error("--out is required")
    try:
        sizes = sorted({int(s) for s in a.sizes.split(",") if s.strip()})
    except ValueError:
        p.error(f"--sizes wants comma-separated integers, got {a.sizes!r}")
    if not sizes or sizes[0] < 4:
        p.error("--sizes: at least one size of 4 bytes or more")
    if a.bench < 0:
        p.error("--bench wants a count of iterations (0 = no benchmark)")
    return dry(a.out) if a.dry else run(a.out, sizes, a.bench)


if __name__ == "__main__":
    sys.exit(main())
