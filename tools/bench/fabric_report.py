#!/usr/bin/env python3
"""Renders fabric_bench.py's JSON into the fabric section of docs/benchmarks.md.

Usage: fabric_report.py RESULT.json BENCHMARKS.md COMMAND
The section lives between <!-- fabric:begin --> and <!-- fabric:end -->; it is
replaced when present and appended otherwise. Nothing else in the file changes,
except the section's figure (img/fabric-cases.png beside the page, bench_plots.py).
"""
import datetime
import json
import os
import platform
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_plots  # noqa: E402  (figures drawn from the page's tables)

BEGIN, END = "<!-- fabric:begin -->", "<!-- fabric:end -->"


def main():
    res = json.load(open(sys.argv[1]))
    path, command = sys.argv[2], sys.argv[3]
    c = res["cases"]
    one = c["sendrecv adjacent, 1 rail"]["median"]
    two = c["sendrecv adjacent, 2 rails"]["median"]
    hop2 = c["sendrecv opposite (2 hops)"]["median"]
    lines = [BEGIN, "## Switchless fabric (shaped netns ring)", "",
             f"Ring of 4 hosts (network namespaces), 2 rails per cable, every rail shaped "
             f"with tc tbf to **{res['rate_mbit_per_rail']:g} Mbit/s** "
             f"({res['rail_gbps'] * 1000:.1f} MB/s). railyard-perf in fabric mode, "
             f"{res['size'] // 2**20} MiB messages, busbw per rank (GB/s), median of "
             f"{res['rounds']} rounds [min–max]. Produced by `{command}` on "
             f"{datetime.date.today().isoformat()} ({platform.node()}, {os.cpu_count()} CPUs).", "",
             "| case | busbw GB/s | × one rail's rate |", "| --- | --- | --- |"]
    for name, v in c.items():
        lines.append(f"| {name} | {v['median']:.4f} [{v['min']:.4f}–{v['max']:.4f}] | "
                     f"{v['ratio_to_rail']:.2f} |")
    lines += ["",
              f"- 2 rails ÷ 1 rail: **{two / one:.2f}×** (target ≥ 1.9×: "
              f"{'met' if two / one >= 1.9 else 'NOT met'}).",
              f"- 2 hops ÷ direct (both over 2 rails): **{hop2 / two:.2f}×** (target ≥ 0.9×: "
              f"{'met' if hop2 / two >= 0.9 else 'NOT met'}). The 2-hop comm spreads its sockets "
              "over both ring directions, so it can use more cables than the direct one.",
              "- sendrecv is bidirectional: each rank sends and receives at once, and each "
              "direction of a rail is shaped separately.",
              "", bench_plots.image_markdown("fabric-cases"),
              END]
    section = "\n".join(lines) + "\n"
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END) + "\n?", section, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    open(path, "w").write(text)
    bench_plots.render_in_subprocess(path)


if __name__ == "__main__":
    main()
