#!/usr/bin/env python3
"""The module dependency graph of a crate's src/ (non-test code).

Usage: modgraph.py SRC [--files]

Each .rs file is a node (src/a/mod.rs is `a`, src/a/b.rs is `a::b`); with
the default (top-level) view, nodes are merged into their top-level module.
An edge m -> n means a path `crate::n…` or `super::…` resolving to n occurs
in m outside comments and `#[cfg(test)]` modules (files named tests.rs are
tests); a `crate::Name` the crate root re-exports (`pub use a::Name`) is
a path to `a`. A parent's references to its own submodules (its `mod`,
`pub use child::…`) are its facade, not a dependency, and are not
counted. Prints the edges, then either the cycles (strongly connected
components) or the layers (longest path to a node with no edges), and
exits 1 on a cycle. A crate with no module beyond its root (only lib.rs
or main.rs) has no edges and passes."""
import os, re, sys

root = sys.argv[1]
files_view = '--files' in sys.argv

def is_mod(parts):
    p = os.path.join(root, *parts)
    return os.path.exists(p + '.rs') or os.path.exists(os.path.join(p, 'mod.rs'))

def name_of(path):
    parts = os.path.relpath(path, root)[:-3].split(os.sep)
    if parts[-1] in ('mod', 'lib', 'main'):
        parts = parts[:-1]
    return parts

TEST_MOD = re.compile(r'#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*(;|\{)')

def strip(src):
    src = re.sub(r'//[^\n]*', '', src)
    while (m := TEST_MOD.search(src)):
        end = m.end()
        if m.group(1) == '{':
            depth = 1
            while depth and end < len(src):
                depth += {'{': 1, '}': -1}.get(src[end], 0)
                end += 1
        src = src[:m.start()] + src[end:]
    return src

def expand(body):
    """The paths of a `{a, b::{c, d}}` use group, flattened."""
    out, depth, cur = [], 0, ''
    for ch in body + ',':
        if ch == ',' and depth == 0:
            cur = cur.strip()
            if cur:
                m = re.match(r'([\w:]*?)::\{(.*)\}$', cur, re.S)
                out += [m.group(1) + '::' + p for p in expand(m.group(2))] if m else [cur]
            cur = ''
            continue
        depth += {'{': 1, '}': -1}.get(ch, 0)
        cur += ch
    return out

def paths(src, prefix):
    """Every `prefix::…` path in src, use groups expanded."""
    found = []
    for m in re.finditer(prefix + r'::((?:\w+::)*)\{', src):
        depth, i = 1, m.end()
        while depth and i < len(src):
            depth += {'{': 1, '}': -1}.get(src[i], 0)
            i += 1
        found += [m.group(1) + p for p in expand(src[m.end():i - 1])]
    found += [m.group(1) for m in re.finditer(prefix + r'::((?:\w+::)*\w+)\b(?!::)', src)]
    return [[x for x in p.split('::') if x] for p in found]

def root_reexports():
    """The names the crate root re-exports (`pub use a::b::Name;` in lib.rs
    or main.rs), each with the module path it comes from."""
    out = {}
    for f in ('lib.rs', 'main.rs'):
        p = os.path.join(root, f)
        if not os.path.exists(p):
            continue
        src = strip(open(p).read())
        for m in re.finditer(r'\bpub(?:\([^)]*\))?\s+use\s+([^;]+);', src):
            text = re.sub(r'\s+', ' ', m.group(1)).strip()
            group = re.match(r'([\w:]*?)::\{(.*)\}$', text, re.S)
            items = [group.group(1) + '::' + i for i in expand(group.group(2))] if group else [text]
            for item in items:
                path, _, alias = item.partition(' as ')
                parts = [x for x in re.sub(r'^(crate|self)::', '', path.strip()).split('::') if x]
                if len(parts) >= 2:
                    out.setdefault(alias.strip() or parts[-1], parts[:-1])
    return out

REEXPORTS = {}

def resolve(parts):
    """The deepest file module that `parts` (from the crate root) names; a
    name the root re-exports (`crate::Name`) stands for its module."""
    if parts and not is_mod(parts[:1]) and parts[0] in REEXPORTS:
        parts = REEXPORTS[parts[0]] + parts[1:]
    best = None
    for i in range(1, len(parts) + 1):
        if is_mod(parts[:i]):
            best = parts[:i]
        else:
            break
    return best

REEXPORTS = root_reexports()
edges = {}
for dirpath, _, names in os.walk(root):
    for f in names:
        if not f.endswith('.rs') or f == 'tests.rs':
            continue
        me = tuple(name_of(os.path.join(dirpath, f)))
        if not me:
            continue  # lib.rs: the crate's facade
        src = strip(open(os.path.join(dirpath, f)).read())
        targets = [resolve(p) for p in paths(src, r'\bcrate')]
        parent = list(me[:-1])
        for p in paths(src, r'\bsuper'):
            targets.append(resolve(parent + p) or parent or None)
        out = edges.setdefault(me, set())
        for t in targets:
            t = tuple(t or ())
            if not t or t == me or t[:len(me)] == me:
                continue  # itself, or its own submodules (its facade)
            out.add(t)

def view(node):
    return '::'.join(node if files_view else node[:1])

graph = {}
for m, ts in edges.items():
    g = graph.setdefault(view(m), set())
    for t in ts:
        if view(t) != view(m):
            g.add(view(t))
for t in [t for ts in graph.values() for t in ts]:
    graph.setdefault(t, set())

for m in sorted(graph):
    print(f"{m:22} -> {', '.join(sorted(graph[m])) or '(none)'}")

index, low, stack, on, sccs = {}, {}, [], set(), []
def tarjan(v):
    index[v] = low[v] = len(index)
    stack.append(v); on.add(v)
    for w in graph[v]:
        if w not in index:
            tarjan(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop(); on.discard(w); c.append(w)
            if w == v:
                break
        sccs.append(c)
sys.setrecursionlimit(10000)
for v in sorted(graph):
    if v not in index:
        tarjan(v)
cycles = [c for c in sccs if len(c) > 1]
if cycles:
    for c in cycles:
        print(f"CYCLE of {len(c)}: {' '.join(sorted(c))}")
    sys.exit(1)
level = {}
def lv(v):
    if v not in level:
        level[v] = 1 + max((lv(w) for w in graph[v]), default=-1)
    return level[v]
for v in graph:
    lv(v)
print("acyclic; layers (each uses only lower ones):")
for l in range(max(level.values(), default=-1) + 1):
    print(f"  {l}: {' '.join(sorted(v for v in level if level[v] == l))}")
