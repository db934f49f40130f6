#!/usr/bin/env python3
"""Turns collnet_inner.sh's raw output (stdin) into the markdown of docs/benchmarks.md's
CollNet section. argv[1]: the tbf rate ("100mbit")."""
import re, sys

rate_txt = sys.argv[1]
m = re.match(r"(\d+)(k|m|g)bit", rate_txt)
rate_bps = int(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
bound = 4 * rate_bps / 8  # bytes/s: a host's 4 rails sending at once
section, ry, ryz, p2p, mpi, loads, ceiling = None, {}, {}, {}, {}, [], None
for line in sys.stdin:
    if line.startswith("load average"):
        loads.append(line.strip()); continue
    if line.startswith("iperf3 flows"):
        f = line.split()
        ceiling = (int(f[2]), float(f[4]))  # flows, Mbit/s received in all
        continue
    if line.startswith("## "):
        section = line[3:].split()[1]; continue
    f = line.split()
    if section in ("allreduce", "allreduce-blocking", "p2p") and len(f) >= 6 and f[0].isdigit():
        {"allreduce": ry, "allreduce-blocking": ryz, "p2p": p2p}[section][int(f[0])] = float(f[5])
    elif section == "MPI" and len(f) == 2 and f[0].isdigit():
        mpi[int(f[0])] = float(f[1])
def busbw(b, us): return b / (us * 1e-6) * 1.5  # AllReduce 2(n-1)/n, n = 4
def size(b): return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
print(f"Ring of 4 namespaces (testbed lane ring4x2: 2 rails per cable), every rail veth shaped by "
      f"`tc tbf` at {rate_txt}; bound = 4 rails x {rate_txt} = {bound / 1e6:.1f} MB/s busbw (raw line rate; "
      f"TCP/IP headers take ~4.4% of it). float sum, 10 timed iterations after 2 warm-ups, one run. "
      f"Railyard runs twice: iterations posted back to back (railyard-perf -z 0, the default: 2 in "
      f"flight on two sets of buffers, as nccl-tests enqueues its iterations and NCCL's CollNet proxy "
      f"keeps several collectives posted), and each iteration waited for before the next (-z 1). "
      f"{'; '.join(loads)}. Ratios only.\n")
# The TCP ceiling: what iperf3 moved per host with a flow on each of its rails at once.
tcp = ceiling[1] * 1e6 / 8 / 4 if ceiling and ceiling[0] else None
if tcp:
    print(f"TCP ceiling, same run: iperf3 with one flow on every rail in each direction at once "
          f"({ceiling[0]} flows, 5 s) received {ceiling[1]:.0f} Mbit/s in all = {tcp / 1e6:.1f} MB/s per host = "
          f"{tcp / bound:.2f}x of the bound: what TCP itself gets from these shaped links on this machine.\n")
print("| size | Railyard time (us) | Railyard busbw (MB/s) | vs bound | vs TCP ceiling | -z 1 time (us) | -z 1 vs bound | MPI_Allreduce time (us) | MPI busbw (MB/s) | Railyard / MPI |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for b in sorted(ry):
    r = busbw(b, ry[b])
    mp = mpi.get(b)
    mcol = f"{mp:.0f} | {busbw(b, mp) / 1e6:.2f} | {mp / ry[b]:.2f}x" if mp else "- | - | -"
    tcol = f"{r / tcp:.2f}x" if tcp else "-"
    z = ryz.get(b)
    zcol = f"{z:.0f} | {busbw(b, z) / bound:.2f}x" if z else "- | -"
    print(f"| {size(b)} | {ry[b]:.0f} | {r / 1e6:.2f} | {r / bound:.2f}x | {tcol} | {zcol} | {mcol} |")
print("\nLatency, 8 KiB - 1 MiB: Railyard allreduce time, each iteration waited for (-z 1), beside 2 x the "
      "p2p sendrecv time on one cable of the same lane (railyard-perf -p sendrecv h0<->h1, same shaping):\n")
print("| size | allreduce (us) | p2p sendrecv (us) | 2 x p2p (us) | allreduce / (2 x p2p) |")
print("|---:|---:|---:|---:|---:|")
for b in sorted(ryz):
    if b > 1 << 20: continue
    p = p2p.get(b)
    print(f"| {size(b)} | {ryz[b]:.0f} | " + (f"{p:.0f} | {2 * p:.0f} | {ryz[b] / (2 * p):.2f}" if p else "- | - | -") + " |")
