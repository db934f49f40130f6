#!/usr/bin/env python3
"""Render a tools/bench/verbs_lane.sh run folder as the verbs section of a markdown page.

    verbs_report.py report --work BUILD/bench/verbs-<date> --out docs/benchmarks.md

The section lives between <!-- verbs:begin --> and <!-- verbs:end -->; it replaces
what is between the markers, or is appended at the end of the file when they are
absent. The rest of the file is left alone. Standard library only.

Inputs (written by verbs_lane.sh): meta.env (host side), guest.env, plan.env,
raw/r<k>-ry-bw-<lo>.json and raw/r<k>-ry-lat.json (railyard-perf --json, rank 0),
raw/r<k>-pt-bwbi-<size>.txt, raw/r1-pt-bwuni-<size>.txt (ib_write_bw client output),
raw/r<k>-pt-lat-<size>.txt (ib_write_lat client output), logs/check.rank0.log,
failures.txt, runs.txt, round-load.txt.
The bandwidth table's figure (img/verbs-bandwidth.png beside the page) is drawn
by bench_plots.py (matplotlib) once the page is written.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_plots  # noqa: E402  (figures drawn from the page's tables)

BEGIN, END = "<!-- verbs:begin -->", "<!-- verbs:end -->"
TARGET = 0.9
TARGET_FROM = 64 << 10


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def load_env(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    out[k] = v.strip('"')
    except OSError:
        pass
    return out


def round_of(path):
    m = re.search(r"/r(\d+)-", path)
    return int(m.group(1)) if m else 0


def railyard_rows(work, pattern):
    """{size: [(round, time_us)]} from railyard-perf JSON files matching pattern."""
    out = {}
    for path in sorted(glob.glob(os.path.join(work, "raw", pattern))):
        try:
            with open(path) as f:
                rows = json.load(f)["rows"]
        except (OSError, ValueError, KeyError):
            continue
        for r in rows:
            if r.get("time_us"):
                out.setdefault(int(r["size"]), []).append((round_of(path), float(r["time_us"])))
    return out


def perftest_bw(path):
    """(size, BW average Gb/s) from an ib_write_bw --report_gbits client output."""
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return None
    if "BW average[Gb/sec]" not in text:
        return None
    rows = re.findall(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", text, re.M)
    if not rows:
        return None
    size, _iters, _peak, avg, _rate = rows[-1]
    return int(size), float(avg)


def perftest_lat(path):
    """(size, t_typical us, t_avg us) from an ib_write_lat client output."""
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return None
    rows = re.findall(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", text, re.M)
    if not rows:
        return None
    size, _it, _tmin, _tmax, typ, avg, _sd = rows[-1]
    return int(size), float(typ), float(avg)


def med(xs):
    return statistics.median(xs) if xs else None


def cell(xs, fmt="{:.4f}"):
    if not xs:
        return "—"
    return (fmt + " [" + fmt + "–" + fmt + "]").format(med(xs), min(xs), max(xs))


def check_result(work):
    try:
        text = open(os.path.join(work, "logs", "check.rank0.log"), errors="replace").read()
    except OSError:
        return "not run"
    m = re.search(r"Out of bounds values\s*:\s*(\d+)\s*(\w+)", text)
    failed = any(l.startswith("check ") for l in open(os.path.join(work, "failures.txt")))
    if m and not failed:
        return f"{m.group(1)} wrong values ({m.group(2)})"
    return "FAILED (see logs/check.rank*.log)"


def render(work):
    meta, guest, plan = (load_env(os.path.join(work, f)) for f in ("meta.env", "guest.env", "plan.env"))
    rounds = int(meta.get("rounds", "0") or 0)

    # ---- bandwidth: GB/s (10^9 B/s) per direction --------------------------------
    ry = {s: [s / t / 1e3 for _, t in v] for s, v in railyard_rows(work, "r*-ry-bw-*.json").items()}
    bi, uni = {}, {}
    for path in glob.glob(os.path.join(work, "raw", "r*-pt-bwbi-*.txt")):
        r = perftest_bw(path)
        if r:
            bi.setdefault(r[0], []).append(r[1] / 8 / 2)   # sum of both directions -> one direction
    for path in glob.glob(os.path.join(work, "raw", "r*-pt-bwuni-*.txt")):
        r = perftest_bw(path)
        if r:
            uni.setdefault(r[0], []).append(r[1] / 8)

    bw_lines = [
        "| size | railyard algbw GB/s (per direction) median [min–max] | n | ib_write_bw -b GB/s per direction median [min–max] | n | ratio | ≥ 0.9× | ib_write_bw one direction GB/s (ref.) | railyard ÷ one direction |",
        "|---:|---:|---:|---:|---:|---:|:---:|---:|---:|",
    ]
    passed, failed, missing = [], [], []
    above, bi_below_uni = [], []
    for size in sorted(set(ry) | set(bi)):
        r, b = ry.get(size, []), bi.get(size, [])
        ratio = med(r) / med(b) if r and b and med(b) > 0 else None
        if ratio is None:
            mark = "—"
            missing.append(size)
        elif size < TARGET_FROM:
            mark = "(< 64 KiB)"
        elif ratio >= TARGET:
            mark = "pass"
            passed.append((size, ratio))
        else:
            mark = "**FAIL**"
            failed.append((size, ratio))
        rs = f"{ratio:.2f}" if ratio is not None else "—"
        u = cell(uni.get(size, []), "{:.4f}") if len(uni.get(size, [])) != 1 else f"{uni[size][0]:.4f}"
        ur = f"{med(r) / med(uni[size]):.2f}" if r and uni.get(size) and med(uni[size]) > 0 else "—"
        if b and uni.get(size) and 2 * med(b) < med(uni[size]):
            bi_below_uni.append(size)
        if ratio is not None and ratio > 1.1:
            above.append((size, ratio))
        bw_lines.append(f"| {human(size)} | {cell(r)} | {len(r)} | {cell(b)} | {len(b)} | {rs} | {mark} | {u} | {ur} |")

    # ---- latency -------------------------------------------------------------------
    rl = {s: [t for _, t in v] for s, v in railyard_rows(work, "r*-ry-lat.json").items()}
    pl_typ, pl_avg = {}, {}
    for path in glob.glob(os.path.join(work, "raw", "r*-pt-lat-*.txt")):
        r = perftest_lat(path)
        if r:
            pl_typ.setdefault(r[0], []).append(r[1])
            pl_avg.setdefault(r[0], []).append(r[2])
    lat_lines = [
        "| size | railyard time µs (mean per iteration) median [min–max] | n | ib_write_lat t_avg µs (½ round trip) median [min–max] | ib_write_lat t_typical µs | n | round trip 2×t_avg µs | railyard ÷ round trip |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lat_ratio = {}
    for size in sorted(set(rl) | set(pl_avg)):
        r, a, t = rl.get(size, []), pl_avg.get(size, []), pl_typ.get(size, [])
        rtt = 2 * med(a) if a else None
        ratio = med(r) / rtt if r and rtt else None
        if ratio is not None:
            lat_ratio[size] = ratio
        lat_lines.append(f"| {human(size)} | {cell(r, '{:.0f}')} | {len(r)} | {cell(a, '{:.0f}')} | "
                         f"{cell(t, '{:.0f}')} | {len(a)} | {rtt:.0f} | {ratio:.2f} |" if ratio is not None else
                         f"| {human(size)} | {cell(r, '{:.0f}')} | {len(r)} | {cell(a, '{:.0f}')} | "
                         f"{cell(t, '{:.0f}')} | {len(a)} | — | — |")

    # ---- plan text -------------------------------------------------------------------
    sweeps = []
    for sw in meta.get("sweeps", "").split():
        parts = sw.split(":")
        if len(parts) == 4:
            lo, hi, n, w = parts
            sweeps.append(f"{human(int(lo))}–{human(int(hi))} ×2: railyard `-n {n} -w {w}`, ib_write_bw `-n {n}`")
    try:
        loads = [l.strip() for l in open(os.path.join(work, "round-load.txt")) if l.strip()]
    except OSError:
        loads = []
    fails = [l.strip() for l in open(os.path.join(work, "failures.txt")) if l.strip()] \
        if os.path.exists(os.path.join(work, "failures.txt")) else ["no failures.txt: the guest script did not run"]

    d = [BEGIN, "## Verbs transport in the soft-RoCE lane (railyard-perf vs perftest)", ""]
    d.append("<!-- Generated by tools/bench/verbs_lane.sh (tools/bench/verbs_report.py); rerun it rather than editing. -->")
    d.append("")
    d.append("How much does the verbs (RoCE v2) transport add on top of the RDMA device itself? One boot of "
             "the soft-RoCE lane (`tests/lanes/rxe`, topology 2x2, flat mode), rail 0 only: rank 0 and the "
             "perftest client on `rxe_h0r0`, rank 1 and the perftest server on `rxe_h1r0` (perftest connects "
             "to 10.77.0.2, h1r0's rail address). rxe under QEMU TCG makes the absolute numbers meaningless "
             "(megabytes per second, milliseconds); the ratio in the same guest run is what shows overhead.")
    d.append("")
    d.append("- **railyard**: `railyard-perf -p sendrecv` with 2 ranks as two processes (`--rank 0/1 --nranks 2 "
             "--root 127.0.0.1:PORT`), `RAILYARD_TRANSPORT=verbs`, `RAILYARD_HCA==rxe_h0r0` / `==rxe_h1r0`, "
             "`RAILYARD_SOCKET_IFNAME==lo` (bootstrap and connection setup only), other settings default "
             "(1 QP per connection, inline on), `-c 0` (iterations back to back). sendrecv is "
             "bidirectional: each rank sends S bytes to the other and receives S bytes in every iteration; "
             "`time` is the mean µs per iteration (max over ranks) and the column used is **algbw = S / time**, "
             "i.e. the bandwidth of *one* direction (busbw = algbw for sendrecv).")
    d.append("- **ib_write_bw** (perftest): `-b` (bidirectional, both sides write at once, like sendrecv), "
             "`-s SIZE -n ITERS --report_gbits -x 1 -F`, same sizes and iteration counts as railyard. "
             "perftest's `-b` figure is the **sum of both directions** (its report adds the remote side's "
             "figure), so it is halved here to give one direction, the same unit as railyard's algbw; "
             "Gb/s ÷ 8 = GB/s (10^9). The one-direction run (no `-b`, first round only) is a reference: "
             "on 2 emulated CPUs both directions share the CPU that rxe runs on, so one direction alone "
             "goes faster than each direction of a bidirectional run.")
    d.append("- **Latency**: `ib_write_lat -s SIZE -n ITERS` reports **half a round trip** (ping-pong of RDMA "
             "writes; t_avg = mean, t_typical = median). railyard-perf's `time` at 8 B and 64 KiB is the mean "
             "time of one sendrecv iteration, both directions at once, and each message needs the receiver's "
             "clear-to-send (an RDMA write to the sender) before the sender's data write: one iteration is at "
             "least **one full round trip** (CTS one way, data back). So railyard's time is compared with "
             "2 × t_avg; the last column is the overhead factor beyond that unavoidable round trip.")
    d.append("")
    d.append("### What was run")
    d.append("")
    d.append(f"```sh\n{meta.get('command', 'tools/bench/verbs_lane.sh')}\n```")
    d.append("")
    d.append(f"- Date: {meta.get('date', '?')}; wall time {meta.get('elapsed', '?')} s (boot included); host load "
             f"average before/after: {meta.get('load_before', '?')} / {meta.get('load_after', '?')}; guest "
             f"1-minute load at the start of each round: {', '.join(loads) or '?'}.")
    d.append(f"- Lane: `tests/lanes/rxe/lane.sh -T 2x2` (flat), QEMU TCG with {guest.get('guest_cpus', '?')} vCPUs, "
             f"guest kernel {guest.get('guest_kernel', '?')} (rdma_rxe), veth MTU {guest.get('lane_mtu', '?')} → "
             f"RoCE MTU {guest.get('active_mtu', '?')}, GID index 1 (RoCE v2, IPv4-mapped), perftest "
             f"{guest.get('perftest', '?').replace('Version: ', '')}. Host: {meta.get('nproc', '?')} CPUs, "
             f"{meta.get('cpu', '?')}, {meta.get('kernel', '?')} (shared, noisy VM).")
    dirty = meta.get("dirty", "0")
    d.append(f"- Code: commit {meta.get('commit', '?')}"
             + (f" ({dirty} file(s) under proxy/, plugin/, tools/railyard-perf/ differed from it in the working "
                "tree at the time of the run; the binaries are what build/ held then)"
                if dirty not in ("", "0") else "") + f", CMake build type {meta.get('build_type', '?')}.")
    d.append(f"- {rounds} interleaved rounds (railyard sweep, ib_write_bw -b sweep, [round 1: ib_write_bw one "
             "direction], railyard latency, ib_write_lat), medians over rounds with [min–max]; "
             + "; ".join(sweeps) + f"; latency: railyard `-b 8 -e 64K -f 8192 -n {meta.get('lat_iters', '?')} "
             f"-w {meta.get('lat_warm', '?')}`, ib_write_lat `-n {meta.get('lat_iters', '?')}`.")
    d.append(f"- Correctness (railyard-perf `-c 1`, 64 KiB–{human(int(meta.get('check_max', '0') or 0))}, "
             f"untimed, after the rounds): {check_result(work)}. The rail veths' tx counters confirm the "
             "railyard bytes crossed the rail (raw `runs.txt`).")
    d.append("")
    d.append("### Bandwidth")
    d.append("")
    d.extend(bw_lines)
    d.append("")
    d.append(bench_plots.image_markdown("verbs-bandwidth"))
    d.append("")
    d.append("### Latency")
    d.append("")
    d.extend(lat_lines)
    d.append("")
    d.append("### Verdict")
    d.append("")
    want = [s for s in sorted(set(ry) | set(bi)) if s >= TARGET_FROM]
    if not failed and not missing and want:
        head = f"**meets the target** (≥ {TARGET}× at every size ≥ 64 KiB)"
    else:
        head = "**does not meet the target**"
    parts = []
    if passed:
        parts.append(f"≥ {TARGET}× at " + ", ".join(f"{human(s)} ({r:.2f}×)" for s, r in passed))
    if failed:
        parts.append("**below** it at " + ", ".join(f"{human(s)} ({r:.2f}×)" for s, r in failed))
    if missing:
        parts.append("no data at " + ", ".join(human(s) for s in missing))
    d.append(f"- Bandwidth, railyard ÷ ib_write_bw -b (per direction): {head} — " + "; ".join(parts) + ".")
    if above:
        d.append("- Ratios above 1.1 (" + ", ".join(f"{human(s)} {r:.2f}×" for s, r in above) + "): railyard "
                 "cannot move bytes faster than the device, so there ib_write_bw -b is a floor, not a ceiling. "
                 + (f"At {len(bi_below_uni)} of {len(set(bi))} sizes the sum of both directions of `-b` is below "
                    "what one direction alone moved (" + ", ".join(human(s) for s in bi_below_uni) + "): "
                    "perftest's bidirectional run does badly on this lane. " if bi_below_uni else "")
                 + "Why was not investigated (a guess: its two processes busy-poll their completion queues "
                 "on the same 2 emulated CPUs on which rxe does all packet work in the kernel). The target "
                 "is then met only formally; the one-direction column (one round) is the other yardstick.")
    if lat_ratio:
        d.append("- Latency, railyard iteration ÷ perftest round trip: "
                 + ", ".join(f"{human(s)} {r:.2f}×" for s, r in sorted(lat_ratio.items()))
                 + " (no target set; 1.0 would mean no cost beyond the CTS round trip).")
    d.append("- Under TCG every byte rxe moves is emulated CPU work, so both tools are CPU-bound on the "
             "same 2 vCPUs, and other jobs on the host (load average up to "
             f"{max((meta.get('load_after') or '0').split()[:1] + (meta.get('load_before') or '0').split()[:1], key=float)}"
             ") slow rounds unevenly: the spread between rounds is large; read a ratio together with the "
             "[min–max] of both sides.")
    if fails:
        def why(f):
            m = re.match(r"(\S+) .*?(raw/\S+\.txt)", f)
            if not m:
                return f"`{f}`"
            try:
                errs = [l.strip() for l in open(os.path.join(work, m.group(2)), errors="replace")
                        if re.search(r"error|fail|should be", l, re.I)]
            except OSError:
                errs = []
            return f"`{f}`" + (f" — perftest said: “{errs[0]}”" if errs else "")
        d.append("- Runs that failed (their figures are missing above): " + "; ".join(why(f) for f in fails))
    d.append("")
    d.append("Raw outputs (railyard-perf JSON and logs, perftest outputs) stay in the build tree, "
             "`build/bench/verbs-<date>/`; `tools/bench/verbs_report.py report --work DIR --out PATH` "
             "renders one again.")
    d.append(END)
    return "\n".join(d) + "\n"


def write_section(out, section):
    text = open(out).read() if os.path.exists(out) else ""
    b, e = text.find(BEGIN), text.find(END)
    if b >= 0 and e > b:
        e += len(END)
        if text[e:e + 1] == "\n":
            e += 1
        text = text[:b] + section + text[e:]
    else:
        if text and not text.endswith("\n"):
            text += "\n"
        text += ("\n" if text else "") + section
    with open(out, "w") as f:
        f.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report")
    r.add_argument("--work", required=True)
    r.add_argument("--out", required=True)
    a = p.parse_args()
    write_section(a.out, render(a.work))
    bench_plots.render_in_subprocess(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
