#!/usr/bin/env python3
"""railyard-plot: bandwidth against message size, from railyard-perf --json files.

  railyard-plot [-o OUT.png] [--metric busbw|algbw] [--title TEXT]
                [LABEL=]RUN.json ... [--baseline [LABEL=]FILE ...]

Each RUN.json is what `railyard-perf ... --json RUN.json` wrote. Files given the
same LABEL are one configuration measured several times (rounds, hosts): the line
is the median at each size and the shaded band spans min to max. Without a
LABEL, a file's label is its pattern, rank count and plugin name, so several
files of one configuration merge by themselves. --baseline adds a dashed line
(railyard-perf JSON, or the JSON lines of railyard-tcp-pump, whose algbw is
used); the i-th baseline takes the colour of the i-th configuration, so each
configuration has its baseline beside it. Sizes are on a log2 axis.

  railyard-perf -np 2 -p sendrecv -b 64K -e 64M -f 4 --json run.json
  railyard-plot run.json -o run.png

Output: PNG (or SVG/PDF, by the extension of -o, which must be .png, .svg or .pdf;
default railyard-perf.png); a missing directory of -o is created.
Needs matplotlib (Debian: python3-matplotlib). If the python3 found first on PATH
lacks it and /usr/bin/python3 has it, the command re-runs itself with that one.
Exit status: 0 written, 1 the output could not be written, 2 bad input or options
(the message names the file or option and the problem).

The drawing functions (plot_sweep, plot_bars) are also used by
tools/bench/bench_plots.py for the figures of docs/benchmarks.md.
"""
import argparse
import json
import os
import re
import statistics
import sys

SYSTEM_PYTHON = "/usr/bin/python3"

#: What -o may end in (the extension chooses matplotlib's backend).
OUTPUT_FORMATS = (".png", ".svg", ".pdf")


class InputError(Exception):
    """A file that is not a railyard-perf --json file or pump JSON lines."""


def _import_pyplot():
    """matplotlib.pyplot with the non-interactive Agg backend. Raises ImportError
    naming the package to install when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(f"matplotlib is not installed for {sys.executable} "
                          "(Debian: apt-get install python3-matplotlib)") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def human_size(n):
    """64 -> '64 B', 65536 -> '64K', 1 << 20 -> '1M', 1 << 30 -> '1G' (axis ticks)."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}"


def make_series(label, points, style="main", group=None):
    """One line of a sweep plot.

    label:  legend text.
    points: {size in bytes: [values in GB/s, one per round]} (empty lists skipped).
    style:  'main' (solid, band min–max), 'baseline' (dashed, band) or
            'reference' (dotted, no band).
    group:  configurations and their baselines with the same group share a
            colour; None = a colour of its own.
    """
    pts = {int(s): [float(v) for v in vs] for s, vs in points.items() if vs}
    return {"label": label, "points": pts, "style": style, "group": group}


def plot_sweep(out, series, title, ylabel, xlabel="message size (bytes, log scale)"):
    """Writes a line plot of value against message size to `out` (PNG/SVG/PDF by
    extension). series: from make_series. The x axis is log2 with a tick at every
    measured size; each line is the median per size with its min–max band. Raises
    ValueError when no series has a point."""
    if not any(s["points"] for s in series):
        raise ValueError("nothing to plot: no series has a data point")
    plt = _import_pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=100)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    group_colour = {}
    styles = {"main": ("-", "o", 0.18), "baseline": ("--", "s", 0.10), "reference": (":", "^", 0.0)}
    sizes_seen = set()
    for s in series:
        if not s["points"]:
            continue
        key = s["group"] if s["group"] is not None else ("solo", s["label"])
        if key not in group_colour:
            group_colour[key] = colours[len(group_colour) % len(colours)]
        colour = "0.35" if s["style"] == "reference" and s["group"] is None else group_colour[key]
        line, marker, band = styles[s["style"]]
        xs = sorted(s["points"])
        sizes_seen.update(xs)
        med = [statistics.median(s["points"][x]) for x in xs]
        lo = [min(s["points"][x]) for x in xs]
        hi = [max(s["points"][x]) for x in xs]
        ax.plot(xs, med, linestyle=line, marker=marker, markersize=4, color=colour, label=s["label"])
        if band and any(h > l for h, l in zip(hi, lo)):
            ax.fill_between(xs, lo, hi, color=colour, alpha=band, linewidth=0)
    ax.set_xscale("log", base=2)
    ticks = sorted(sizes_seen)
    ax.set_xticks(ticks)
    ax.set_xticklabels([human_size(t) for t in ticks], rotation=45 if len(ticks) > 8 else 0)
    ax.minorticks_off()
    ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    _save(fig, out)
    plt.close(fig)


def plot_bars(out, cases, title, xlabel, ref=None):
    """Writes a horizontal bar chart to `out`: cases = [(label, median, lo, hi)] in
    GB/s (error bar min–max); ref = (label, value) draws a dashed vertical line
    (the baseline). Raises ValueError when cases is empty."""
    if not cases:
        raise ValueError("nothing to plot: no cases")
    plt = _import_pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(cases) + 2.0), dpi=100)
    labels = [c[0] for c in cases][::-1]
    med = [c[1] for c in cases][::-1]
    err = [[c[1] - c[2] for c in cases][::-1], [c[3] - c[1] for c in cases][::-1]]
    ax.barh(labels, med, xerr=err, capsize=3, color="tab:blue", alpha=0.8, label="railyard (median, min–max)")
    if ref is not None:
        ax.axvline(ref[1], color="tab:red", linestyle="--", label=ref[0])
    ax.set_xlim(left=0)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    fig.tight_layout()
    _save(fig, out)
    plt.close(fig)


def _save(fig, out):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    ext = os.path.splitext(out)[1].lower()
    # No software/date stamps, so that an unchanged table gives an unchanged file.
    meta = {"Software": None} if ext == ".png" else {"Date": None} if ext == ".svg" else {}
    fig.savefig(out, metadata=meta)


# ---------------------------------------------------------------- reading runs

def load_run(path, metric="busbw"):
    """Reads one file: railyard-perf --json (an object with "rows") or
    railyard-tcp-pump JSON lines. Returns (default label, {size: value in GB/s}).
    metric: 'busbw' or 'algbw' for railyard-perf (the pump only has algbw).
    Raises InputError naming the file and what is wrong."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from e
    try:
        doc = json.loads(text)
    except ValueError as e:
        doc = None
        # railyard-perf --json writes one object naming its tool; a file that says so but
        # does not parse is a broken railyard-perf file, not a railyard-tcp-pump one.
        if re.search(r'"tool"\s*:\s*"railyard-perf"', text):
            raise InputError(f"{path}: railyard-perf --json output that is not valid JSON "
                             f"(line {e.lineno} column {e.colno}: {e.msg})") from e
    if isinstance(doc, dict):
        if doc.get("tool") != "railyard-perf" or not isinstance(doc.get("rows"), list):
            raise InputError(f"{path}: a JSON object but not railyard-perf --json output (no \"rows\")")
        key = f"{metric}_gbps"
        pts = {}
        for i, r in enumerate(doc["rows"]):
            try:
                pts[int(r["size"])] = float(r[key])
            except (KeyError, TypeError, ValueError) as e:
                raise InputError(f"{path}: row {i} has no numeric size/{key}") from e
        plugin = (doc.get("plugin") or {}).get("name") or "plugin"
        label = f"{doc.get('pattern', '?')}, {doc.get('nranks', '?')} ranks ({plugin})"
        return label, pts
    pts, label = {}, None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
            pts[int(r["size"])] = float(r["algbw_gbps"])
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(f"{path}:{n}: neither railyard-perf --json output (one JSON object with \"rows\") "
                             f"nor a railyard-tcp-pump JSON line (an object with size and algbw_gbps)") from e
        label = label or f"pump {r.get('pattern', '?')}, {r.get('ranks', '?')} ranks"
    if not pts:
        raise InputError(f"{path}: neither railyard-perf --json output nor railyard-tcp-pump JSON lines")
    return label, pts


def _split_label(arg):
    """'LABEL=PATH' -> (LABEL, PATH); 'PATH' -> (None, PATH). A path that exists
    as given wins over a split, so a file name containing '=' still works."""
    if "=" in arg and not os.path.exists(arg):
        label, path = arg.split("=", 1)
        return label, path
    return None, arg


def build_series(runs, baselines, metric):
    """runs/baselines: lists of '[LABEL=]PATH'. Returns the series for plot_sweep:
    configurations in first-seen label order, then baselines, the i-th baseline
    in the group (colour) of the i-th configuration."""
    def merge(args):
        out, files = {}, {}
        for arg in args:
            label, path = _split_label(arg)
            default, pts = load_run(path, metric)
            key = label or default
            files[key] = files.get(key, 0) + 1
            merged = out.setdefault(key, {})
            for size, v in pts.items():
                merged.setdefault(size, []).append(v)
        # "label (median of 3 runs)" when files were merged.
        return [(k if files[k] == 1 else f"{k} (median of {files[k]} runs)", v) for k, v in out.items()]

    configs = merge(runs)
    series = [make_series(lbl, pts, "main", group=i) for i, (lbl, pts) in enumerate(configs)]
    for i, (lbl, pts) in enumerate(merge(baselines)):
        series.append(make_series(lbl, pts, "baseline", group=i if i < len(configs) else None))
    return series


def _reexec_with_system_python():
    """When matplotlib is missing here but present for /usr/bin/python3, run this
    command again with that interpreter (pyenv/venv shims come first on PATH)."""
    if os.environ.get("RY_PLOT_REEXECED") or not os.path.exists(SYSTEM_PYTHON):
        return
    if os.path.realpath(sys.executable) == os.path.realpath(SYSTEM_PYTHON):
        return
    os.environ["RY_PLOT_REEXECED"] = "1"
    os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(sys.argv[0])] + sys.argv[1:])


def main(argv=None):
    p = argparse.ArgumentParser(prog="railyard-plot", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="[LABEL=]RUN.json", help="railyard-perf --json files")
    p.add_argument("--baseline", action="append", default=[], metavar="[LABEL=]FILE",
                   help="a baseline run (railyard-perf --json or railyard-tcp-pump JSON lines); repeatable")
    p.add_argument("-o", "--output", default="railyard-perf.png", help="output file (.png, .svg, .pdf)")
    p.add_argument("--metric", choices=("busbw", "algbw"), default="busbw",
                   help="railyard-perf column to plot (default busbw)")
    p.add_argument("--title", default=None, help="plot title")
    a = p.parse_args(argv)
    ext = os.path.splitext(a.output)[1].lower()
    if ext not in OUTPUT_FORMATS:
        # Checked before anything is read: matplotlib would otherwise raise a ValueError
        # traceback (exit 1) for "-o run.jpeg2", and write a hidden ".png" for "-o ''".
        print(f"railyard-plot: -o {a.output!r}: the extension must be one of "
              f"{', '.join(OUTPUT_FORMATS)} (it chooses the format)", file=sys.stderr)
        return 2
    try:
        series = build_series(a.runs, a.baseline, a.metric)
        title = a.title or f"railyard-perf {a.metric} against message size"
        plot_sweep(a.output, series, title, f"{a.metric} (GB/s)")
    except InputError as e:
        print(f"railyard-plot: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        if argv is None:
            _reexec_with_system_python()
        print(f"railyard-plot: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"railyard-plot: cannot write {a.output}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"railyard-plot: wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
