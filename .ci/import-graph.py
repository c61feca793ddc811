#!/usr/bin/env python3
"""The import graph of host/src, by top-level module (docs/architecture.md):
its levels, any cycle (with the files that make it), and the non-test files
over 500 lines. `-v` prints each module's level and imports; `--check` exits
1 when there is a cycle (CI runs it so)."""
import os, re, sys, collections
args = [a for a in sys.argv[1:] if not a.startswith('-')]
root = args[0] if args else 'host/src'
mods = set()
for e in os.listdir(root):
    if e.endswith('.rs') and e not in ('lib.rs', 'main.rs'): mods.add(e[:-3])
    elif os.path.isdir(os.path.join(root, e)): mods.add(e)
edges = collections.defaultdict(set); where = collections.defaultdict(set)
big = []
for d, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith('.rs'): continue
        p = os.path.join(d, f); rel = os.path.relpath(p, root)
        top = rel.split(os.sep)[0]; top = top[:-3] if top.endswith('.rs') else top
        src = open(p).read()
        n = src.count('\n')
        is_test = f == 'tests.rs' or '/tests/' in rel or f.endswith('_tests.rs')
        if n > 500 and not is_test: big.append((n, rel))
        if top not in mods: continue
        # drop #[cfg(test)] mod tests { ... } blocks crudely: cut from '#[cfg(test)]\nmod tests' to end
        m = re.search(r'#\[cfg\(test\)\]\s*mod tests\s*\{', src)
        if m: src = src[:m.start()]
        # expand `use crate::{a, b::c}` groups
        for m in re.finditer(r'crate::\{([^;]*?)\};', src, re.S):
            for part in re.findall(r'(?:^|[,{\s])([a-z_]+)(?=::|\s*[,}]|$)', m.group(1)):
                if part in mods and part != top: edges[top].add(part); where[(top, part)].add(rel)
        for t in re.findall(r'crate::([a-z_]+)', src):
            if t in mods and t != top: edges[top].add(t); where[(top, t)].add(rel)
# SCCs (Tarjan)
idx = {}; low = {}; st = []; on = set(); sccs = []; c = [0]
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(comp)
sys.setrecursionlimit(10000)
for v in sorted(mods):
    if v not in idx: sc(v)
cyc = [s for s in sccs if len(s) > 1]
comp_of = {v: i for i, s in enumerate(sccs) for v in s}
level = {}
def lv(i):
    if i in level: return level[i]
    level[i] = 0
    deps = {comp_of[w] for v in sccs[i] for w in edges[v]} - {i}
    level[i] = 1 + max((lv(j) for j in deps), default=-1)
    return level[i]
for i in range(len(sccs)): lv(i)
print(f"modules: {len(mods)}  levels: {max(level.values())+1}  cycles: {len(cyc)}")
for s in cyc:
    print("  cycle:", sorted(s))
    for a in s:
        for b in edges[a]:
            if b in s: print(f"    {a} -> {b}: {sorted(where[(a,b)])}")
if '-v' in sys.argv:
    for i in sorted(range(len(sccs)), key=lambda i: level[i]):
        for v in sccs[i]: print(f"  L{level[i]:2} {v:10} -> {sorted(edges[v])}")
big.sort(reverse=True)
print(f"non-test files over 500 lines: {len(big)}")
for n, r in big: print(f"  {n:5} {r}")
if '--check' in sys.argv and cyc:
    print("a cycle between host modules: see docs/architecture.md for where things go", file=sys.stderr)
    sys.exit(1)
