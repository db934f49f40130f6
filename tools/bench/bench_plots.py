#!/usr/bin/env python3
"""The figures of docs/benchmarks.md, drawn from the page's own tables.

  bench_plots.py [PAGE.md]      (default: docs/benchmarks.md)

Every figure is drawn from a table the benchmark scripts wrote into the page
(loopback.sh, verbs_lane.sh, fabric.sh), so a figure always shows exactly the
numbers beside it: median per size as the line, [min–max] as the band, the
baseline dashed in the same colour, sizes on a log2 axis. The PNG files go to
img/ next to the page (docs/img/); the report scripts put the image links
under their tables (image_markdown) and call render_in_subprocess after
writing the page. A figure whose table is not on the page is skipped.

Needs matplotlib (Debian: python3-matplotlib); the drawing is
tools/plot/railyard_plot.py's. Exit status 0, or 2 when a table is malformed.
"""
import importlib.util
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT_DIR = os.path.join(HERE, "..", "plot")
SYSTEM_PYTHON = "/usr/bin/python3"
IMG_SUBDIR = "img"

# name -> alt text of its image link (what the figure shows, in words).
FIGURES = {
    "loopback-sendrecv": "busbw against message size: railyard-perf sendrecv (2 ranks) and the pump's pair baseline",
    "loopback-ring": "busbw against message size: railyard-perf ring (4 ranks) and the pump's ring baseline",
    "verbs-bandwidth": "bandwidth per direction against message size: railyard-perf over verbs and ib_write_bw",
    "fabric-cases": "busbw of the fabric cases against one shaped rail's rate",
}


def image_markdown(name):
    """The Markdown line that shows figure `name` (a key of FIGURES) from a page
    in the docs directory."""
    return f"![{FIGURES[name]}]({IMG_SUBDIR}/{name}.png)"


class TableError(Exception):
    """A table the figures need is on the page but cannot be read."""


def parse_size(text):
    """'64 KiB' -> 65536, '8 B' -> 8, '2 MiB' -> 2097152. Raises TableError."""
    m = re.fullmatch(r"\s*(\d+)\s*(B|KiB|MiB|GiB)\s*", text)
    if not m:
        raise TableError(f"not a size: {text!r}")
    return int(m.group(1)) << {"B": 0, "KiB": 10, "MiB": 20, "GiB": 30}[m.group(2)]


def parse_cell(text):
    """'0.69 [0.40–1.29]' -> (0.69, 0.40, 1.29); '0.0085' -> (v, v, v);
    '—' or empty -> None. Bold markers are ignored. Raises TableError."""
    t = text.replace("*", "").strip()
    if t in ("", "—", "-"):
        return None
    m = re.fullmatch(r"([0-9.]+)\s*\[([0-9.]+)\s*[–-]\s*([0-9.]+)\]", t)
    if m:
        return float(m.group(1)), float(m.group(2)), float(m.group(3))
    m = re.fullmatch(r"[0-9.]+", t)
    if m:
        v = float(t)
        return v, v, v
    raise TableError(f"not a value or 'median [min–max]': {text!r}")


def tables(page_text):
    """[(heading, header cells, [row cells])] for every Markdown table, with the
    nearest heading above it (the '#' line without its hashes)."""
    out, heading, block = [], "", []

    def flush():
        if len(block) >= 2:
            rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in block]
            out.append((heading, rows[0], rows[2:]))

    for line in page_text.splitlines():
        if line.startswith("|"):
            block.append(line)
            continue
        flush()
        block = []
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
    flush()
    return out


def find_table(all_tables, heading_prefix):
    for heading, header, rows in all_tables:
        if heading.startswith(heading_prefix):
            return header, rows
    return None


def column(header, prefix):
    for i, h in enumerate(header):
        if h.startswith(prefix):
            return i
    raise TableError(f"no column starting with {prefix!r} in {header}")


def sweep_points(header, rows, col_prefix):
    """{size: [min, median, max]} of one column (railyard_plot keeps median and range)."""
    ci, si = column(header, col_prefix), column(header, "size")
    pts = {}
    for r in rows:
        v = parse_cell(r[ci])
        if v is not None:
            pts[parse_size(r[si])] = [v[1], v[0], v[2]]
    return pts


def render(page):
    """Draws every figure whose table is on `page` into <page dir>/img/. Returns
    the files written. Raises TableError or ImportError (no matplotlib)."""
    sys.path.insert(0, os.path.abspath(PLOT_DIR))
    import railyard_plot as rp

    text = open(page).read()
    all_tables = tables(text)
    img = os.path.join(os.path.dirname(os.path.abspath(page)), IMG_SUBDIR)
    written = []

    def out(name):
        path = os.path.join(img, name + ".png")
        written.append(path)
        return path

    oneway = find_table(all_tables, "Reference: pump `oneway`")
    oneway_pts = sweep_points(*oneway, "GB/s") if oneway else {}
    for name, heading, label, base_col, base_label in (
            ("loopback-sendrecv", "sendrecv, 2 ranks", "railyard sendrecv, 2 ranks (bidirectional)",
             "pump pair", "baseline: railyard-tcp-pump pair (raw TCP)"),
            ("loopback-ring", "ring, 4 ranks", "railyard ring, 4 ranks", "pump ring",
             "baseline: railyard-tcp-pump ring --np 4 (raw TCP)")):
        t = find_table(all_tables, heading)
        if not t:
            continue
        series = [rp.make_series(label, sweep_points(*t, "railyard busbw"), "main"),
                  rp.make_series(base_label, sweep_points(*t, base_col), "baseline")]
        if oneway_pts:
            series.append(rp.make_series("reference: pump oneway (one direction)", oneway_pts, "reference"))
        rp.plot_sweep(out(name), series, f"Loopback, {label.split(',')[0].replace('railyard ', '')}: "
                      "railyard-perf vs raw TCP (median, band = min–max over rounds)", "busbw (GB/s)")

    t = find_table(all_tables, "Bandwidth")
    if t:
        series = [rp.make_series("railyard sendrecv over verbs (algbw, per direction)",
                                 sweep_points(*t, "railyard algbw"), "main"),
                  rp.make_series("baseline: ib_write_bw -b (per direction)",
                                 sweep_points(*t, "ib_write_bw -b"), "baseline"),
                  rp.make_series("reference: ib_write_bw one direction (1 round)",
                                 sweep_points(*t, "ib_write_bw one direction"), "reference")]
        rp.plot_sweep(out("verbs-bandwidth"), series,
                      "Soft-RoCE lane (QEMU TCG, rxe): railyard-perf vs perftest", "GB/s per direction")

    t = find_table(all_tables, "Switchless fabric")
    if t:
        header, rows = t
        ci, ri, ki = column(header, "case"), column(header, "busbw"), column(header, "×")
        cases, rate = [], None
        for r in rows:
            v = parse_cell(r[ri])
            if v is None:
                continue
            cases.append((r[ci], v[0], v[1], v[2]))
            ratio = float(r[ki])
            if ratio > 0 and rate is None:
                rate = v[0] / ratio
        m = re.search(r"shaped with tc tbf to \*\*([0-9.]+) Mbit/s\*\*", text)
        ref_label = f"one rail's shaped rate ({m.group(1)} Mbit/s)" if m else "one rail's shaped rate"
        if m:
            rate = float(m.group(1)) / 8 / 1000
        rp.plot_bars(out("fabric-cases"), cases, "Shaped netns ring of 4, 2 rails per cable: busbw per rank",
                     "busbw (GB/s)", ref=(ref_label, rate) if rate else None)
    return written


def python_with_matplotlib():
    """An interpreter that can import matplotlib: this one, else /usr/bin/python3
    (Debian's python3-matplotlib), else None."""
    if importlib.util.find_spec("matplotlib") is not None:
        return sys.executable
    if os.path.exists(SYSTEM_PYTHON):
        ok = subprocess.run([SYSTEM_PYTHON, "-c", "import matplotlib"], capture_output=True).returncode == 0
        if ok:
            return SYSTEM_PYTHON
    return None


def render_in_subprocess(page):
    """For the report scripts: draws the page's figures with an interpreter that
    has matplotlib. Never raises: on failure prints why and how to draw them
    later, and returns False (the page itself is already written)."""
    py = python_with_matplotlib()
    if py is None:
        print("bench_plots: matplotlib not found (apt-get install python3-matplotlib); the figures were "
              f"not redrawn. Later: python3 {os.path.join(HERE, 'bench_plots.py')} {page}", file=sys.stderr)
        return False
    r = subprocess.run([py, os.path.join(HERE, "bench_plots.py"), page])
    return r.returncode == 0


def main(argv):
    page = argv[1] if len(argv) > 1 else os.path.join(HERE, "..", "..", "docs", "benchmarks.md")
    try:
        written = render(page)
    except TableError as e:
        print(f"bench_plots: {page}: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        py = python_with_matplotlib()
        if py and os.path.realpath(py) != os.path.realpath(sys.executable):
            os.execv(py, [py] + argv)
        print(f"bench_plots: {e}", file=sys.stderr)
        return 2
    for w in written:
        rel = os.path.relpath(w)
        print(f"bench_plots: wrote {w if rel.startswith('..') else rel}")
    if not written:
        print(f"bench_plots: {page} has none of the benchmark tables; nothing drawn")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
