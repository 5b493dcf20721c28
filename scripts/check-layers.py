#!/usr/bin/env python3
"""Fails when product code includes a folder on a floor above its own.

The floors, bottom up, are FLOORS below (docs/ARCHITECTURE.md explains each). A file may include
its own floor and those below; folders on one floor may include each other. Tests, fuzz drivers
and benchmarks (*_test.cc, *_fuzz.cc, *_bench.cc, tests/) drive a floor from above and are not
checked. Usage: check-layers.py [--root DIR]; prints each upward include and exits 1, else a
one-line summary and exits 0.
"""
import argparse
import pathlib
import re
import sys

# (prefix, floor). The longest matching prefix names a file's floor. Inside the daemon, the
# inventory cycle is below its workers (they implement its seams), the API serves both, and
# start-up wires everything.
FLOORS = [
    ("agent/common/", 0),
    ("agent/hostfs/", 1),
    ("agent/rdma/", 2),
    ("agent/inventory/", 3),
    ("agent/policy/", 4),
    ("agent/fabric/", 5),
    ("agent/publish/", 6),
    ("agent/config/", 7),
    ("agent/daemon/cycle/", 8),
    ("agent/daemon/workers/", 9),
    ("agent/daemon/api/", 10),
    ("agent/daemon/lifecycle/", 11),
    ("agent/fabricctl/", 12),
    ("agent/fabricenv/", 12),
    ("cni-hook/", 12),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
NOT_PRODUCT = re.compile(r"(_test|_fuzz|_bench)\.(cc|h)$|/testdata/")


def floor_of(path):
    best = None
    for prefix, floor in FLOORS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, floor)
    return best


def check(root):
    upward = []
    files = 0
    for top in ("agent", "cni-hook"):
        for f in sorted((root / top).rglob("*")):
            if f.suffix not in (".cc", ".h") or not f.is_file():
                continue
            rel = f.relative_to(root).as_posix()
            if NOT_PRODUCT.search(rel):
                continue
            mine = floor_of(rel)
            if mine is None:
                upward.append(f"{rel}: in no floor (add its folder to FLOORS)")
                continue
            files += 1
            text = f.read_text(errors="replace")
            for m in INCLUDE.finditer(text):
                theirs = floor_of(m.group(1))
                if theirs is not None and theirs[1] > mine[1]:
                    line = text.count("\n", 0, m.start()) + 1
                    upward.append(f"{rel}:{line}: includes {m.group(1)} ({theirs[0]}, floor "
                                  f"{theirs[1]}) from {mine[0]} (floor {mine[1]})")
    return files, upward


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    args = ap.parse_args()
    files, upward = check(pathlib.Path(args.root))
    for u in upward:
        print(u)
    if upward:
        print(f"layers: {len(upward)} upward includes in {files} product files")
        return 1
    print(f"layers: {files} product files include only their floor and those below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
