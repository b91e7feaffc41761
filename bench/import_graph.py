#!/usr/bin/env python3
"""The crate's import graph, from its own source: which file names which module.

Issues #23 and #44 measure the layout by it: circles of files that import one another (strongly
connected components, in every folder of the crate), imports running back up (from a lower floor
to a higher one, in the floor table below), imports between two phases of the engine, and what
`cli/` reaches below the engine.
A file's references are every `crate::a::b` and `super::x` path in it (in `use` lines and
inline, not in comments, and each item of a `crate::a::{b, c}` group), resolved to the file that
defines that module; a reference to a module's item counts as one to the module's file.

The floors, lowest first: the crate's layers in the order of the layout in docs/development.md
(a layer may import only the ones before it; top-level files such as error.rs or ui.rs have no
floor and are not counted), and inside `engine/` three floors, one per kind of sub-folder: the rooms the phases
share (`agent/`, `measure/`, `record/`, `stop/`, `machines/`, and the engine's `mod.rs`), the
phases and the other commands' work (`phases/`, `commands/`; the phases import none of each
other) and the run (`run/`).

    python3 bench/import_graph.py            # summary
    python3 bench/import_graph.py --edges    # also every edge inside each circle, every edge up
    python3 bench/import_graph.py --check    # exit 1 when the layout breaks (tests/e2e/code_layout.rs)

`--check` holds the layout the issues asked for: no circle anywhere, no import running back up,
none between two phases, none from `cli/` to store, git or os.
"""
import os
import re
import sys
from collections import defaultdict

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def module_files():
    """Module path (tuple) -> file, for every .rs file under src/."""
    mods = {}
    for root, _, files in os.walk(SRC):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), SRC)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            mods[tuple(parts)] = rel
    return mods


def resolve(path, mods):
    """The longest module prefix of `path` that is a file."""
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in mods:
            return mods[tuple(path[:n])]
    return None


PATH = re.compile(r"\b(crate|super)((?:::[a-z_][a-z0-9_]*)+)")
# `crate::a::{b, c::d, E}` and `super::{b, c}`: each lower-case item of a flat group is a path.
GROUP = re.compile(r"\b(crate|super)((?:::[a-z_][a-z0-9_]*)*)::\{([^{}]*)\}")
ITEM = re.compile(r"^([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)")

# The crate's layers, lowest first (the layout in docs/development.md).
LAYERS = ["clock", "os", "model", "protocol", "render", "exec", "agents", "config",
          "store", "git", "researchers", "launch", "remote", "tracker", "engine", "serve", "cli"]
# Inside engine/: the sub-folders on each floor (a file directly in engine/ is a room).
ENGINE_FLOORS = {"agent": 0, "measure": 0, "record": 0, "stop": 0, "machines": 0,
                 "phases": 1, "commands": 1, "run": 2}


def floor(rel):
    """(layer, floor inside the engine) of a file, or None for a file outside the layers."""
    parts = rel[:-3].split(os.sep)
    layer = parts[0]
    if layer not in LAYERS:
        return None
    inner = 0
    if layer == "engine" and len(parts) > 2:
        inner = ENGINE_FLOORS[parts[1]]
    return (LAYERS.index(layer), inner)


def paths(text):
    """Every (root, rest) module path a file's text names, group items expanded."""
    found = PATH.findall(text)
    for root, prefix, items in GROUP.findall(text):
        for item in items.split(","):
            m = ITEM.match(item.strip())
            if m and m.group(1) != "self":
                found.append((root, prefix + "::" + m.group(1)))
    return found


def edges(mods):
    out = defaultdict(set)
    for mod, rel in mods.items():
        is_dir_mod = os.path.basename(rel) == "mod.rs"
        text = open(os.path.join(SRC, rel), encoding="utf-8").read()
        text = text.split("#[cfg(test)]")[0]  # the tests' imports are not the layout
        text = re.sub(r"(?m)^\s*//.*$", "", text)  # nor what comments mention
        for root, rest in paths(text):
            segs = rest.strip(":").split("::")
            if root == "crate":
                base = []
            else:
                here = list(mod) if is_dir_mod else list(mod[:-1])
                base = here[:-1] if is_dir_mod else here
                while segs and segs[0] == "super":
                    segs.pop(0)
                    base = base[:-1]
            target = resolve(base + segs, mods)
            if target and target != rel:
                out[rel].add(target)
    return out


def sccs(nodes, graph):
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in nodes:
                continue
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
            comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def phase_of(rel):
    """The phase a file of `engine/phases/` belongs to (a phase may be a folder), else None."""
    parts = rel.split(os.sep)
    if len(parts) > 2 and parts[:2] == ["engine", "phases"]:
        return parts[2][:-3] if parts[2].endswith(".rs") else parts[2]
    return None


def main():
    mods = module_files()
    graph = edges(mods)
    every = set(mods.values())
    engine = {f for f in every if f.startswith("engine" + os.sep)}
    circles = [c for c in sccs(every, graph) if len(c) > 1]
    circles.sort(key=len, reverse=True)
    print(f"src: {len(every)} files, {sum(len(graph[f] & every) for f in every)} imports between them; "
          f"src/engine: {len(engine)} files, {sum(len(graph[f] & engine) for f in engine)}")
    print(f"circles (files importing one another, size > 1): {[len(c) for c in circles] or 'none'}")
    for c in circles:
        print("  " + ", ".join(c))
        if "--edges" in sys.argv:
            for f in c:
                for t in sorted(graph[f] & set(c)):
                    print(f"    {f} -> {t}")
    up = sorted((f, t) for f in graph for t in graph[f]
                if floor(f) and floor(t) and floor(f) < floor(t))
    print(f"imports running back up (lower floor -> higher): {len(up)}")
    for f, t in up:
        if "--edges" in sys.argv:
            print(f"  {f} -> {t}")
    sideways = sorted((f, t) for f in engine for t in graph[f]
                      if phase_of(f) and phase_of(t) and phase_of(f) != phase_of(t))
    print(f"imports between two phases: {len(sideways)}")
    for f, t in sideways:
        print(f"  {f} -> {t}")
    cli = {f for f in every if f.startswith("cli" + os.sep)}
    below = ("store", "git", "os")
    low = sorted(
        (f, t) for f in cli for t in graph[f] if t.split(os.sep)[0] in below
    )
    print(f"cli/ imports of {', '.join(below)}/: {len(low)}")
    for f, t in low:
        print(f"  {f} -> {t}")
    if "--check" in sys.argv:
        if circles or up or sideways or low:
            for f, t in up:
                print(f"  up: {f} -> {t}")
            sys.exit("the layout is broken: see the counts above (docs/development.md)")


if __name__ == "__main__":
    main()
