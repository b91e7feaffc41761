"""What a conference stores, by kind of object and path: the bytes behind BENCHMARKS.md's
"what a records append stores, per iteration".

    python3 bench/objects_by_path.py REPO [--per N] [REV ...] [--not REV ...]

Lists the objects reachable from the REVs (default: every ref under refs/conference/, the
conference branches and the notes) and not from the --not REVs (default: refs/heads/main), and
sums them by type and path, with digits in round folders and chunk names folded
(`round-N/attempts.jsonl.d/N/N.jsonl`), each object counted as git stores it loose (its header
and content, zlib-compressed). With --per N the sums are divided by N (say, the iterations the
run made). Keep a never-stop run's repository with `bench/never_stop.py --keep`.
"""

import argparse
import collections
import re
import subprocess
import sys
import threading
import zlib


def default_revs(repo):
    refs = subprocess.run(["git", "-C", repo, "for-each-ref", "--format=%(refname)"],
                          capture_output=True, text=True, check=True).stdout.split()
    keep = ("refs/conference/", "refs/heads/conference/", "refs/notes/")
    return [r for r in refs if r.startswith(keep)]


def objects(repo, revs, excluded):
    """(id, path) of every object reachable from `revs` and not from `excluded`."""
    out = subprocess.run(["git", "-C", repo, "rev-list", "--objects", *revs, *("^" + r for r in excluded)],
                         capture_output=True, text=True, check=True).stdout
    return [tuple((line.split(" ", 1) + [""])[:2]) for line in out.splitlines()]


def folded(path):
    """The path with what varies per object folded: round numbers, chunk and folder numbers,
    and hex names (the notes' and the evaluation cache's fan-out folders and ids)."""
    path = re.sub(r"round-\d+", "round-N", path.strip())
    path = re.sub(r"(?<=/)\d{6}(?=/|\.jsonl|$)", "N", path)
    parts = ["<hex>" if re.fullmatch(r"[0-9a-f]{2}|[0-9a-f]{12,}", p) else p for p in path.split("/")]
    return "/".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo")
    ap.add_argument("revs", nargs="*")
    ap.add_argument("--not", dest="excluded", action="append", default=None)
    ap.add_argument("--per", type=int, default=1)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    revs = args.revs or default_revs(args.repo)
    listed = objects(args.repo, revs, args.excluded or ["refs/heads/main"])
    cat = subprocess.Popen(["git", "-C", args.repo, "cat-file", "--batch"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def feed():
        # Written from a thread: cat-file's answers fill its pipe while the questions go in.
        cat.stdin.write("".join(oid + "\n" for oid, _ in listed).encode())
        cat.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    sums = collections.defaultdict(lambda: [0, 0, 0])
    for _, path in listed:
        kind, size = cat.stdout.readline().split()[1:3]
        data = cat.stdout.read(int(size))
        cat.stdout.read(1)
        row = sums[(kind.decode(), folded(path))]
        row[0] += 1
        row[1] += len(data)
        row[2] += len(zlib.compress(kind + b" " + size + b"\0" + data))
    cat.wait()
    rows = sorted(sums.items(), key=lambda kv: -kv[1][2])
    per = max(1, args.per)
    print("| type | path | objects | raw bytes | stored bytes (zlib) |%s" % (" per %d |" % per if per > 1 else ""))
    print("|---|---|---:|---:|---:|%s" % ("---:|" if per > 1 else ""))
    for (kind, path), (n, raw, stored) in rows[:args.top]:
        extra = " %.0f |" % (stored / per) if per > 1 else ""
        print("| %s | %s | %d | %d | %d |%s" % (kind, path or "(root)", n, raw, stored, extra))
    rest = rows[args.top:]
    if rest:
        print("| … | %d more paths | %d | %d | %d |" % (len(rest), sum(r[0] for _, r in rest),
              sum(r[1] for _, r in rest), sum(r[2] for _, r in rest)))
    total = sum(r[2] for _, r in rows)
    print("\nstored in all: %d bytes%s" % (total, ", %.0f per %d" % (total / per, per) if per > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
