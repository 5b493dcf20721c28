#!/usr/bin/env python3
"""Fails when product code includes a folder on a floor above its own, or loops inside a folder.

The floors, bottom up, are FLOORS below (docs/ARCHITECTURE.md explains each). A file may include
its own floor and those below; folders on one floor may include each other. Tests, fuzz drivers
and benchmarks (*_test.cc, *_fuzz.cc, *_bench.cc, tests/) drive a floor from above and are not
checked. Inside a folder, files have no floors, but the modules (foo.h with foo.cc) may not
include each other in a loop: one of them would be including upward. Usage: check-layers.py
[--root DIR]; prints each upward include and loop and exits 1, else a one-line summary and exits
0.
"""
import argparse
import pathlib
import re
import sys

# (prefix, floor). The longest matching prefix names a file's floor. Inside the daemon, the
# inventory cycle is below its workers (they implement its seams), the transport knows no call,
# the API's service serves both over it, and start-up wires everything.
FLOORS = [
    ("agent/common/", 0),
    ("agent/hostfs/", 1),
    ("agent/rdma/", 2),
    ("agent/inventory/", 3),
    ("agent/policy/", 4),
    ("agent/fabric/", 5),
    ("agent/publish/", 6),
    ("agent/config/", 7),
    ("agent/launch/", 8),
    ("agent/daemon/cycle/", 9),
    ("agent/daemon/workers/", 10),
    ("agent/daemon/transport/", 11),
    ("agent/daemon/api/", 12),
    ("agent/daemon/lifecycle/", 13),
    ("agent/fabricctl/", 14),
    ("agent/fabricenv/", 14),
    ("agent/ncclenv/", 14),
    ("cni-hook/", 14),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
NOT_PRODUCT = re.compile(r"(_test|_fuzz|_bench)\.(cc|h)$|/testdata/")


def floor_of(path):
    best = None
    for prefix, floor in FLOORS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, floor)
    return best


def product_files(root):
    """(path relative to root, [(include, line)]) of every product source file."""
    for top in ("agent", "cni-hook"):
        for f in sorted((root / top).rglob("*")):
            if f.suffix not in (".cc", ".h") or not f.is_file():
                continue
            rel = f.relative_to(root).as_posix()
            if NOT_PRODUCT.search(rel):
                continue
            text = f.read_text(errors="replace")
            includes = [(m.group(1), text.count("\n", 0, m.start()) + 1)
                        for m in INCLUDE.finditer(text)]
            yield rel, includes


def check(root):
    upward = []
    files = 0
    for rel, includes in product_files(root):
        mine = floor_of(rel)
        if mine is None:
            upward.append(f"{rel}: in no floor (add its folder to FLOORS)")
            continue
        files += 1
        for inc, line in includes:
            theirs = floor_of(inc)
            if theirs is not None and theirs[1] > mine[1]:
                upward.append(f"{rel}:{line}: includes {inc} ({theirs[0]}, floor "
                              f"{theirs[1]}) from {mine[0]} (floor {mine[1]})")
    return files, upward


def module_of(rel):
    """foo.h and foo.cc are one module: "agent/x/foo"."""
    return rel.rsplit(".", 1)[0]


def folder_loops(root):
    """Include loops between the modules of one folder: a file of module A includes module B's
    header and one of B's files includes A's, directly or through others of the folder. Within a
    folder nothing says which file is lower, so a loop is the upward include."""
    edges = {}  # module -> {module: "file:line: includes X"}
    for rel, includes in product_files(root):
        me = module_of(rel)
        edges.setdefault(me, {})
        for inc, line in includes:
            if not (root / inc).is_file() or NOT_PRODUCT.search(inc):
                continue
            them = module_of(inc)
            if them == me or them.rsplit("/", 1)[0] != me.rsplit("/", 1)[0]:
                continue
            edges[me].setdefault(them, f"{rel}:{line}: includes {inc}")
    # Tarjan's strongly connected components; each with more than one module is a loop.
    index, low, stack, on, loops = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                loops.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    out = []
    for comp in sorted(loops):
        members = set(comp)
        why = [edges[a][b] for a in comp for b in sorted(edges[a]) if b in members]
        out.append(f"include loop in {comp[0].rsplit('/', 1)[0]}/: "
                   f"{', '.join(c.rsplit('/', 1)[1] for c in comp)} ({'; '.join(why)})")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    args = ap.parse_args()
    files, upward = check(pathlib.Path(args.root))
    upward += folder_loops(pathlib.Path(args.root))
    for u in upward:
        print(u)
    if upward:
        print(f"layers: {len(upward)} upward includes in {files} product files")
        return 1
    print(f"layers: {files} product files include only their floor and those below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
