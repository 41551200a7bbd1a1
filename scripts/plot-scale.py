#!/usr/bin/env python3
"""Draws the scale curves of `holdpoint-bench --scale` into docs/scale-*.svg.

Usage: scripts/plot-scale.py OUT_DIR RESULTS.txt [RESULTS.txt ...]

Each results file holds the JSON lines the bench printed (other lines are
skipped); a file may hold one store's run or several. Needs matplotlib.
"""

import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    runs = defaultdict(dict)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                row = json.loads(line)
                if "sessions" in row and "store" in row:
                    runs[row["store"]][row["sessions"]] = row
    return {store: [rows[n] for n in sorted(rows)] for store, rows in runs.items()}


def series(rows, *path):
    xs, ys = [], []
    for row in rows:
        v = row
        for key in path:
            v = v.get(key) if isinstance(v, dict) else None
        if isinstance(v, (int, float)):
            xs.append(row["sessions"])
            ys.append(v)
    return xs, ys


def axis(ax, title, ylabel, log_y=False):
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("stored sessions (a tenth waiting)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


NOTE = "2 shared cores beside other builds (load in BENCHMARKS.md): absolute figures are noisy, compare the shape"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, runs = sys.argv[1], load(sys.argv[2:])

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for store, rows in sorted(runs.items()):
        for key, style in (("sequential", "-o"), ("concurrent", "--s")):
            xs, ys = series(rows, "cyclesPerSec", key)
            conc = rows[0]["cyclesPerSec"].get("concurrency", "")
            label = f"{store}, {'1' if key == 'sequential' else conc} at once"
            ax.plot(xs, ys, style, label=label)
    axis(ax, "Approval cycles per second", "cycles/s", log_y=True)
    fig.text(0.01, 0.01, NOTE, fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(f"{out}/scale-cycles.svg")

    fig, axes = plt.subplots(3, 2, figsize=(10, 10.5))
    panels = (
        (("pendingAgent", "p99Ms"), "pending, first page (50), one agent"),
        (("pendingRolePage", "p99Ms"), "pending for one approver role, first page (50)"),
        (("pendingRole", "latency", "p99Ms"), "role inbox: all of the role's holds, then a page"),
        (("auditSession", "p99Ms"), "audit listing of one session"),
        (("getSnapshot", "p99Ms"), "getSnapshot by id"),
    )
    axes.flat[-1].set_visible(False)
    for ax, (path, title) in zip(axes.flat, panels):
        for i, (store, rows) in enumerate(sorted(runs.items())):
            color = f"C{i}"
            xs, ys = series(rows, *path)
            ax.plot(xs, ys, "-o", color=color, label=f"{store} p99")
            xs, ys = series(rows, *path[:-1], "p50Ms")
            ax.plot(xs, ys, ":x", color=color, label=f"{store} p50")
        if "first page" in title:
            ax.axhline(5, color="grey", linewidth=0.8, linestyle="--", label="target p99 at 1M")
        axis(ax, title, "ms", log_y=True)
    fig.text(0.01, 0.005, NOTE, fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(f"{out}/scale-latency.svg")

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for store, rows in sorted(runs.items()):
        xs, ys = series(rows, "diskBytesPerSession")
        if ys:
            axes[0].plot(xs, [y / 1024 for y in ys], "-o", label=store)
        xs, ys = series(rows, "rssBytesPerSession")
        axes[1].plot(xs, [y / 1024 for y in ys], "-o", label=store)
    axis(axes[0], "store size on disk per session", "KiB")
    axis(axes[1], "process memory (RSS growth) per stored session", "KiB")
    fig.text(0.01, 0.01, NOTE, fontsize=7)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(f"{out}/scale-size.svg")


if __name__ == "__main__":
    main()
