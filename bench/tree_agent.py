#!/usr/bin/env python3
"""A stochastic scripted researcher for the tree-of-ideas benchmarks (bench/tree_quality.py): no
LLM, seeded by TREE_SEED (with the researcher, round, iteration and the node's content, so the same
seed makes the same proposals from the same node).

In fixtures/tree (a path.txt of moves) it appends one move, `x`, `y` or `z`, drawn among those it
has not tried from this node yet (it remembers them in TREE_MEMORY, a JSON file: what the prompt's
list of attempts tells an agent). Under `Branching: agent-decided` (its prompt has the branches
section) it forks on a rule: the first attempt from a node that still has two untried moves ends
with `BRANCH: fork` (try the other direction from the same node next); and when the node it starts
from shows three attempts in a row without a gain in the prompt's list, it ends with
`BRANCH: <id>` of the other alive branch with the fewest attempts (ties: the better metric).

In a fixture with a params.sh of `# tune: [lo, hi]` literals it is a random-step hill climber:
it moves one parameter, drawn at random, by a Gaussian step of 15% of its range (on a log scale
for a range spanning 20x or more, rounded for `int`), clipped to the bounds.
"""

import hashlib
import json
import math
import os
import random
import re
import sys


def rng_for(node):
    key = "|".join(
        [
            os.environ.get("TREE_SEED", "0"),
            os.environ.get("CONFERENCE_RESEARCHER", "A"),
            os.environ.get("CONFERENCE_ROUND", "0"),
            os.environ.get("CONFERENCE_ITERATION", "0"),
            node,
        ]
    )
    return random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))


def note(text):
    path = os.environ.get("CONFERENCE_NOTE_FILE")
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")


def prompt():
    path = os.environ.get("CONFERENCE_PROMPT_FILE")
    if not path:
        return ""
    with open(path) as f:
        return f.read()


BRANCH_LINE = re.compile(
    r"^- (?P<label>.+?) \(commit (?P<commit>\w+)\)\s+metric (?P<metric>\S+)\s+depth \d+\s+"
    r"(?P<tries>\d+) attempt\(s\) from it(?:; latest: (?P<latest>.*))?$"
)


def branches(text):
    """The alive branches the prompt lists: [(label, metric, tries, [verdicts, newest last],
    commit)]."""
    out = []
    for line in text.splitlines():
        m = BRANCH_LINE.match(line)
        if not m:
            continue
        latest = [part.split(":", 1)[0].strip() for part in (m["latest"] or "").split(" | ") if part]
        try:
            metric = float(m["metric"])
        except ValueError:
            metric = math.inf
        out.append((m["label"], metric, int(m["tries"]), latest, m["commit"]))
    return out


def branch_request(text, first_here, untried_left):
    """The BRANCH line the fork rule asks for, or None."""
    if "## Your branches" not in text or "`BRANCH: fork`" not in text:
        return None
    if first_here and untried_left >= 2:
        return "fork"
    m = re.search(r"^This attempt starts from (.+?) \(metric", text, re.M)
    if not m:
        return None
    here = m.group(1)
    alive = branches(text)
    mine = [b for b in alive if b[0] == here]
    if not mine or len(mine[0][3]) < 3 or any(v == "kept" for v in mine[0][3][-3:]):
        return None
    others = [b for b in alive if b[0] != here]
    if not others:
        return None
    others.sort(key=lambda b: (b[2], b[1]))
    return others[0][4]


def tree_move():
    with open("path.txt") as f:
        node = f.read()
    memory_path = os.environ.get("TREE_MEMORY")
    memory = {}
    if memory_path and os.path.exists(memory_path):
        with open(memory_path) as f:
            memory = json.load(f)
    tried = memory.get(node, [])
    untried = [m for m in "xyz" if m not in tried]
    rng = rng_for(node)
    move = rng.choice(untried or list("xyz"))
    memory[node] = tried + [move]
    if memory_path:
        with open(memory_path, "w") as f:
            json.dump(memory, f)
    with open("path.txt", "a") as f:
        f.write(move + "\n")
    text = f"move {move} after {len([l for l in node.splitlines() if l.strip()])} moves"
    request = branch_request(prompt(), not tried, len(untried) - 1)
    if request:
        text += f"\nBRANCH: {request}"
    note(text)


PARAM = re.compile(
    r"^(?P<name>[A-Za-z_]\w*)=(?P<value>\S+)(?P<rest>\s*#\s*tune:?\s*(?P<int>int)?\s*"
    r"\[\s*(?P<lo>[^,\]]+),\s*(?P<hi>[^\]]+)\].*)$"
)


def climb():
    with open("params.sh") as f:
        lines = f.read().splitlines()
    params = [(i, PARAM.match(l)) for i, l in enumerate(lines)]
    params = [(i, m) for i, m in params if m]
    rng = rng_for("\n".join(lines))
    i, m = rng.choice(params)
    lo, hi, value = float(m["lo"]), float(m["hi"]), float(m["value"])
    if lo > 0 and hi / lo >= 20:
        z = math.log(value) + rng.gauss(0, 0.15 * (math.log(hi) - math.log(lo)))
        new = math.exp(min(max(z, math.log(lo)), math.log(hi)))
    else:
        new = min(max(value + rng.gauss(0, 0.15 * (hi - lo)), lo), hi)
    text = str(int(round(new))) if m["int"] else f"{new:.6g}"
    lines[i] = f"{m['name']}={text}{m['rest']}"
    with open("params.sh", "w") as f:
        f.write("\n".join(lines) + "\n")
    note(f"{m['name']} {m['value']} -> {text}")


def main():
    if os.path.exists("path.txt"):
        tree_move()
    elif os.path.exists("params.sh"):
        climb()
    else:
        sys.exit("tree_agent.py: neither path.txt nor params.sh here")


if __name__ == "__main__":
    main()
