#!/usr/bin/env python3
"""Robust criterion figures on a noisy host: runs criterion bench binaries in turn, several
rounds, and reports per bench id the fastest sample (per-iteration time) and the median
sample of each run, with same-run ratios between ids.

Criterion's mean moves by 10-40 % on the shared development machine, because other work
slows some samples. The fastest sample of a run (each sample times thousands of iterations)
and the median sample move far less; a ratio taken between two ids of the same run, round by
round, keeps the rule that a figure is a ratio against a baseline measured in the same run.

Usage:
  scripts/bench-robust.py [--rounds R] [--filter REGEX] [--ratio ID:BASE ...] \\
      [--measurement-time S] NAME=BINARY [NAME=BINARY ...]

BINARY is a built criterion bench executable, e.g. the one printed by
`cargo bench -p kvexact-benches --features peers --bench index --no-run`. Copy it elsewhere
before rebuilding to compare two builds (A/B): the rounds alternate the builds, so slow
spells of the host hit both. Each id is printed as `min / median` in the bench's own unit
(ns per iteration), one column per round. A ratio `ID:BASE` (two regular expressions, each
matching one id, anchored at its end) is printed per round and build, min over min and median
over median, both ids taken from the same run of the same binary.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def samples(root):
    """Per bench id (criterion's directory path under `root`), the per-iteration times."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        if os.path.basename(dirpath) != "new" or "sample.json" not in files:
            continue
        with open(os.path.join(dirpath, "sample.json")) as f:
            d = json.load(f)
        with open(os.path.join(dirpath, "benchmark.json")) as f:
            ident = json.load(f)["full_id"]
        out[ident] = sorted(t / i for t, i in zip(d["times"], d["iters"]))
    return out


def run_once(binary, filt, mtime, work):
    """One run of `binary` in a fresh criterion directory; its samples per id."""
    crit = os.path.join(work, "criterion")
    subprocess.run(["rm", "-rf", crit], check=True)
    env = dict(os.environ, CARGO_TARGET_DIR=work)
    args = [binary, "--bench", "--warm-up-time", "1", "--measurement-time", str(mtime)]
    if filt:
        args.append(filt)
    subprocess.run(args, cwd=work, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return samples(crit)


def fmt(v):
    return f"{v:.4g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3,
                    help="how many times each binary runs (alternating; default 3)")
    ap.add_argument("--filter", default="",
                    help="criterion's filter (a regular expression over bench ids)")
    ap.add_argument("--measurement-time", type=float, default=3,
                    help="criterion's --measurement-time in seconds (default 3)")
    ap.add_argument("--ratio", action="append", default=[],
                    help="ID:BASE: the ratio of two ids of the same run, per round")
    ap.add_argument("bins", nargs="+", metavar="NAME=BINARY",
                    help="a name for the build and its bench executable")
    a = ap.parse_args()
    bins = []
    for b in a.bins:
        name, sep, path = b.partition("=")
        if not sep or not os.access(path, os.X_OK):
            sys.exit(f"{b}: expected NAME=BINARY (an executable)")
        bins.append((name, os.path.abspath(path)))
    results = {name: [] for name, _ in bins}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for name, path in bins:
                work = os.path.join(tmp, name)
                os.makedirs(work, exist_ok=True)
                results[name].append(run_once(path, a.filter, a.measurement_time, work))
                print(f"round {r + 1}/{a.rounds}: {name} done", file=sys.stderr)
    ids = sorted({i for runs in results.values() for run in runs for i in run})
    print("id | build | per round: fastest sample / median sample (per iteration)")
    for i in ids:
        for name, runs in results.items():
            cells = [f"{fmt(run[i][0])} / {fmt(statistics.median(run[i]))}"
                     for run in runs if i in run]
            if cells:
                print(f"{i} | {name} | " + " | ".join(cells))
    for spec in a.ratio:
        num, sep, den = spec.partition(":")
        if not sep:
            sys.exit(f"--ratio {spec}: expected ID:BASE")
        pat_n, pat_d = re.compile(num + "$"), re.compile(den + "$")
        for name, runs in results.items():
            cells = []
            for run in runs:
                n = [v for k, v in run.items() if pat_n.search(k)]
                d = [v for k, v in run.items() if pat_d.search(k)]
                if len(n) == 1 and len(d) == 1:
                    cells.append(f"{n[0][0] / d[0][0]:.3f} / "
                                 f"{statistics.median(n[0]) / statistics.median(d[0]):.3f}")
            if cells:
                print(f"ratio {num} / {den} | {name} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
