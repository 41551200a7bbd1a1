#!/usr/bin/env python3
"""Size limits of the non-test code under crates/*/src and examples/*/src
(issue 38).

Usage: sizes.py [--files N] [--fns N] [ROOT...]

A file's size is its lines of code: lines that are not blank and not only
a comment, outside `#[cfg(test)]` modules; files named tests.rs or under a
tests/ directory, files only compiled for tests, and the crates that are
tests themselves (holdpoint-testkit: the store suite's cases and the
state-machine model the property tests run) are test code. A
function's size is its lines from the `fn` line to its closing brace, all
lines counted. Prints each file over --files (400) and each function over
--fns (80), and exits 1 when any is found."""
import os, re, sys

args = sys.argv[1:]
def opt(name, default):
    if name in args:
        i = args.index(name)
        v = int(args[i + 1])
        del args[i:i + 2]
        return v
    return default
MAX_FILE = opt('--files', 400)
MAX_FN = opt('--fns', 80)
# Crates whose code is tests (see the docstring).
TEST_CRATES = {'holdpoint-testkit'}
roots = args or sorted(
    os.path.join(top, c, 'src') for top in ('crates', 'examples') for c in os.listdir(top)
    if os.path.isdir(os.path.join(top, c, 'src')) and c not in TEST_CRATES)

TEST_MOD = re.compile(r'#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*(;|\{)')

def mask(src):
    """src with comments, strings and char literals blanked (newlines kept),
    so braces inside them do not count."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', src[i:j])); i = j
        elif (m := re.match(r'b?r(#*)"', src[i:i + 260])) and (i == 0 or not (src[i - 1].isalnum() or src[i-1] == '_')):
            end = '"' + m.group(1)
            j = src.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r'[^\n]', ' ', src[i:j])); i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == '\\' else 1
            j += 1
            out.append(re.sub(r'[^\n]', ' ', src[i:j])); i = j
        elif c == "'" and (m := re.match(r"'(\\.[^']*|[^\\'])'", src[i:i + 12])):
            out.append(' ' * m.end()); i += m.end()
        else:
            out.append(c); i += 1
    return ''.join(out)

def block_end(masked, start):
    """Index just past the brace block opening at or after start."""
    i = masked.index('{', start)
    depth = 0
    while i < len(masked):
        depth += {'{': 1, '}': -1}.get(masked[i], 0)
        i += 1
        if depth == 0:
            return i
    return i

def test_files(root):
    """Files reached only through `#[cfg(test)] mod x;`."""
    found = set()
    for d, _, fs in os.walk(root):
        for f in fs:
            if not f.endswith('.rs'):
                continue
            p = os.path.join(d, f)
            src = open(p).read()
            base = d if f in ('mod.rs', 'lib.rs', 'main.rs') else os.path.join(d, f[:-3])
            for m in TEST_MOD.finditer(src):
                if m.group(2) == ';':
                    for c in (os.path.join(base, m.group(1) + '.rs'), os.path.join(base, m.group(1), 'mod.rs')):
                        found.add(os.path.normpath(c))
    return found

bad = 0
for root in roots:
    tests = test_files(root)
    for d, _, fs in os.walk(root):
        for f in sorted(fs):
            p = os.path.normpath(os.path.join(d, f))
            if not f.endswith('.rs') or f == 'tests.rs' or p in tests or '/tests/' in p:
                continue
            src = open(p).read()
            masked = mask(src)
            keep = [True] * len(masked)
            for m in TEST_MOD.finditer(masked):
                if m.group(2) == '{':
                    for k in range(m.start(), block_end(masked, m.start())):
                        keep[k] = False
            code = ''.join(ch if keep[k] or ch == '\n' else ' ' for k, ch in enumerate(masked))
            lines = sum(1 for l in code.split('\n') if l.strip())
            if lines > MAX_FILE:
                bad += 1
                print(f'{p}: {lines} lines of code (limit {MAX_FILE})')
            for m in re.finditer(r'\bfn\s+(\w+)', code):
                # a declaration without a body (trait method) ends at ';'
                semi = code.find(';', m.end())
                brace = code.find('{', m.end())
                if brace < 0 or (0 <= semi < brace):
                    continue
                end = block_end(code, m.end())
                first = code.count('\n', 0, m.start())
                last = code.count('\n', 0, end - 1)
                size = last - first + 1
                if size > MAX_FN:
                    bad += 1
                    print(f'{p}:{first + 1}: fn {m.group(1)} is {size} lines (limit {MAX_FN})')
sys.exit(1 if bad else 0)
