#!/usr/bin/env python3
"""Bytes per waiting session by allocation site, from a massif profile of
`holdpoint-bench --store memory --paused N` (system allocator build).

    python3 scripts/massif-by-site.py massif.out 10000

Reads the last detailed snapshot taken before the first resume claim (the
end of the pause phase) and prints, per waiting session, the heap under
the allocation sites that matter, and the allocator's overhead.
"""
import re
import sys

SITES = [
    ("outbox hold.created event (JSON tree)", r"outbox::events::hold_events"),
    ("packed row (Stored::pack)", r"Stored::pack"),
    ("memory store's save (rows, index, event)", r"memory::rows::Rows::save"),
]


def snapshots(path):
    snaps, cur = [], None
    for line in open(path):
        if line.startswith("snapshot="):
            cur = {"lines": []}
            snaps.append(cur)
        elif line.startswith("mem_heap_B="):
            cur["heap"] = int(line.split("=")[1])
        elif line.startswith("mem_heap_extra_B="):
            cur["extra"] = int(line.split("=")[1])
        elif line.startswith("heap_tree="):
            cur["tree"] = line.strip().split("=")[1]
        elif cur is not None and re.match(r"^\s*n\d+:", line):
            depth = len(line) - len(line.lstrip(" "))
            m = re.match(r"\s*n\d+: (\d+) (.*)", line)
            cur["lines"].append((depth, int(m.group(1)), m.group(2)))
    return snaps


def under(nodes, pattern):
    """Bytes under the outermost frames matching `pattern`."""
    total, skip = 0, None
    for depth, size, frame in nodes:
        if skip is not None and depth > skip:
            continue
        skip = None
        if re.search(pattern, frame):
            total, skip = total + size, depth
    return total


def main():
    path, sessions = sys.argv[1], int(sys.argv[2])
    detailed = [s for s in snapshots(path) if s.get("tree") in ("detailed", "peak")]
    paused = [s for s in detailed if under(s["lines"], r"claim_resume") == 0]
    last = max(paused, key=lambda s: s["heap"])
    print(f"heap {last['heap']} B + allocator overhead {last['extra']} B for {sessions} sessions: "
          f"{(last['heap'] + last['extra']) / sessions:.0f} B per session")
    print(f"allocator overhead: {last['extra'] / sessions:.0f} B per session")
    for name, pattern in SITES:
        print(f"{name}: {under(last['lines'], pattern) / sessions:.0f} B per session")


if __name__ == "__main__":
    main()
