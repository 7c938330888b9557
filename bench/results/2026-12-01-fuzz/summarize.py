#!/usr/bin/env python3
"""Summarises a run_long.sh output folder into summary.json and results.md (next to this script).

    bench/results/2026-12-01-fuzz/summarize.py RUN_DIR [BUILD_TIME_FILE]

RUN_DIR: what run_long.sh wrote (logs/<target>.log from libFuzzer's fork mode, artifacts/, corpus/,
plan.txt, commit.txt). Per target, from the last "#N: cov: C ft: F corp: K exec/s E
oom/timeout/crash: O/T/X time: Ss" status line: executions N, seconds S, N/S exec/s, edge
coverage C, features F, corpus size K; plus the saved crash/timeout/oom inputs in artifacts/.
BUILD_TIME_FILE (optional): `/usr/bin/time -v` output of the clean fuzz build (CPU seconds).
"""
import json
import os
import re
import sys

# Where summary.json and results.md go, and how the run is described: this folder and run 1's
# conditions unless FUZZ_OUT / FUZZ_CONTEXT / FUZZ_DEVICE say otherwise (run 2 sets them).
HERE = os.environ.get("FUZZ_OUT", os.path.dirname(os.path.abspath(__file__)))
CONTEXT = os.environ.get("FUZZ_CONTEXT", "libFuzzer -fork=1, ASan+UBSan, nice 10, 2 targets at a time on a shared 2-core machine")
DEVICE = os.environ.get("FUZZ_DEVICE", "2-core CPU machine (shared), no GPU")
STATUS = re.compile(r"^#(\d+): cov: (\d+) ft: (\d+) corp: (\d+) exec/s (\d+) oom/timeout/crash: (\d+)/(\d+)/(\d+) time: (\d+)s")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    run = sys.argv[1]
    plan = open(os.path.join(run, "plan.txt")).read().split()
    commit = open(os.path.join(run, "commit.txt")).read().strip()
    rows, table = [], []
    total = 0
    for item in plan:
        t, planned = item.split(":")
        log = os.path.join(run, "logs", t + ".log")
        last = None
        if os.path.exists(log):
            for line in open(log, errors="replace"):
                m = STATUS.match(line)
                if m:
                    last = m
        if not last:
            table.append((t, planned, "not run", "", "", "", "", "", ""))
            continue
        n, cov, ft, corp, _, ooms, timeouts, crashes, secs = (int(x) for x in last.groups())
        art_dir = os.path.join(run, "artifacts", t)
        arts = sorted(os.listdir(art_dir)) if os.path.isdir(art_dir) else []
        eps = n / secs if secs else 0.0
        total += n
        for metric, value in [("fuzz_execs", n), ("fuzz_seconds", secs), ("fuzz_exec_per_s", round(eps, 1)),
                              ("fuzz_cov_edges", cov), ("fuzz_features", ft), ("fuzz_corpus_inputs", corp),
                              ("fuzz_crashes", crashes), ("fuzz_timeouts", timeouts), ("fuzz_ooms", ooms),
                              ("fuzz_saved_inputs", len(arts))]:
            rows.append({"metric": metric, "target": t, "value": value,
                         "context": CONTEXT})
        table.append((t, planned, str(n), str(secs), "%.0f" % eps, str(cov), str(ft), str(corp),
                      "%d/%d/%d" % (crashes, timeouts, ooms) + ((" (" + ", ".join(arts) + ")") if arts else "")))
    rows.append({"metric": "fuzz_execs", "target": "all", "value": total})
    if len(sys.argv) > 2:
        txt = open(sys.argv[2]).read()
        cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", txt))
        rows.append({"metric": "fuzz_build_cpu_s", "target": "all", "value": round(cpu, 1),
                     "context": "clean `make fuzz` build of the six targets (clang -O1, ASan+UBSan), CPU seconds"})
    summary = {"commit": commit, "date": "2026-12-01", "device": DEVICE, "rows": rows}
    with open(os.path.join(HERE, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    with open(os.path.join(HERE, "results.md"), "w") as f:
        f.write("# Long fuzz run, %s (commit %s)\n\n" % (summary["date"], commit[:7]))
        f.write("| target | planned s | executions | s | exec/s | cov | ft | corpus | crash/timeout/oom (saved) |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for r in table:
            f.write("| " + " | ".join(r) + " |\n")
        f.write("\nTotal executions: %d\n" % total)
    print(open(os.path.join(HERE, "results.md")).read())


if __name__ == "__main__":
    main()
