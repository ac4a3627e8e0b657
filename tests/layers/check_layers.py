#!/usr/bin/env python3
"""The include graph points down only (DESIGN.md, "Modules and layers"):

  core + index   kernels/include/pa/{core,index}, kernels/src/core
  kernels        kernels/include/pa/kernels, kernels/src, kernels/stages
  reference      reference/
  trace          trace/
  lessons        lessons/ (the lesson parser: Markdown, markers, anchors)
  top            cli/, viewer/  (may include every layer)

Every #include "pa/<module>/..." in a file of one layer must name a module of
that layer or a lower one. Prints each violation (file:line: include) and
exits 1 if there is any; also fails if it found few files (a moved tree must
not make the check pass by reading nothing). --self-test first proves, on a
made-up tree, that an upward include is caught."""
import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Layer of each pa/<module> include prefix, bottom first.
MODULE_LAYER = {"core": 0, "index": 0, "kernels": 1, "reference": 2, "trace": 3, "lessons": 4}
LAYER_NAME = ["core + index", "kernels", "reference", "trace", "lessons"]
SOURCES = [  # (folder, layer)
    ("kernels/include/pa/core", 0), ("kernels/include/pa/index", 0), ("kernels/src/core", 0),
    ("kernels/include/pa/kernels", 1), ("kernels/src", 1), ("kernels/stages", 1),
    ("reference", 2), ("trace", 3), ("lessons", 4),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"pa/(\w+)/')
EXTS = {".hpp", ".cpp", ".cu", ".cuh", ".h", ".in"}


def layer_of(path, root):
    rel = path.relative_to(root).as_posix()
    best = None
    for folder, layer in SOURCES:  # the longest matching folder decides
        if rel.startswith(folder + "/") and (best is None or len(folder) > len(best[0])):
            best = (folder, layer)
    return best[1] if best else None


def check(root, quiet=False):
    """(files read, upward includes found) under root."""
    paths = set()
    for folder, _ in SOURCES:
        if (root / folder).is_dir():
            paths.update(p for p in (root / folder).rglob("*") if p.suffix in EXTS and p.is_file())
    violations = 0
    for path in sorted(paths):
        layer = layer_of(path, root)
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) not in MODULE_LAYER or MODULE_LAYER[m.group(1)] <= layer:
                continue
            violations += 1
            if not quiet:
                print(f"{path.relative_to(root)}:{n}: {line.strip()}  "
                      f"({LAYER_NAME[layer]} includes {LAYER_NAME[MODULE_LAYER[m.group(1)]]})")
    return len(paths), violations


def self_test():
    """An upward include in each lower layer is found; a downward one is not."""
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        cases = [("kernels/include/pa/core/a.hpp", "trace"), ("kernels/src/core/b.cpp", "kernels"),
                 ("kernels/stages/c.cuh", "reference"), ("kernels/src/d.cpp", "trace"),
                 ("reference/src/e.cpp", "trace"), ("trace/src/f.cpp", "lessons"),
                 ("lessons/src/ok.cpp", "trace")]
        for rel, module in cases:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(f'#include "pa/{module}/x.hpp"\n')
        files, found = check(root, quiet=True)
        return files == len(cases) and found == len(cases) - 1


def main():
    if "--self-test" in sys.argv and not self_test():
        print("check_layers: the self-test did not catch the made-up upward includes")
        return 1
    files, violations = check(ROOT)
    print(f"check_layers: {files} files, {violations} upward includes")
    if files < 100:
        print("check_layers: too few files found: has the tree moved?")
        return 1
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
