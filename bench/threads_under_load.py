#!/usr/bin/python3
"""headlab at 1 thread against all cores, on a quiet and on a busy machine.

The measurement behind --threads 0's rule (core::threads_for_work, see
docs/performance.md "Threads that fit the work"). Each round runs, for each
load and each workload, headlab at every thread count, each in a fresh
process, one after the other, so the counts compared saw the same moment of
the machine. Load "none" adds nothing to whatever else runs on the machine;
"yes" starts one `yes > /dev/null` per core minus one (a neighbour that keeps
the other cores busy) for the duration of its runs. The load average is
printed with every run: "none" is only quiet on a quiet machine.

Workloads: the default demo (`headlab train`, its ms/step as logged, with
--steps 200) and the bench presets (`headlab bench --json`). The ratio
2 threads / 1 thread is taken per round; the median and spread are printed.

Usage:
  /usr/bin/python3 bench/threads_under_load.py --headlab build/headlab --rounds 3
  /usr/bin/python3 bench/threads_under_load.py --headlab build/headlab --workloads demo,tiny --loads yes
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

BENCH = {"tiny": [], "small": ["--bench-steps", "10"], "medium": ["--warmup-steps", "2", "--bench-steps", "3", "--runs", "3"]}


def run_once(headlab, workload, threads):
    if workload == "demo":
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run([headlab, "train", "--steps", "200", "--threads", str(threads), "--out", tmp + "/run",
                                  "--force"], capture_output=True, text=True, check=True).stdout
        m = re.search(r"\(([0-9.]+) ms/step\)", out)
        if not m:
            raise SystemExit("no ms/step in the demo's output:\n" + out)
        return float(m.group(1))
    out = subprocess.run([headlab, "bench", "--preset", workload, "--threads", str(threads), "--json"] + BENCH[workload],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])["ms_per_step"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--headlab", default="build/headlab")
    p.add_argument("--workloads", default="demo,tiny,small,medium")
    p.add_argument("--loads", default="none,yes")
    p.add_argument("--threads", default=f"1,{os.cpu_count()}")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    workloads, loads = a.workloads.split(","), a.loads.split(",")
    for x in workloads:
        if x != "demo" and x not in BENCH:
            p.error(f"--workloads: unknown workload '{x}' (valid: demo, {', '.join(BENCH)})")
    for x in loads:
        if x not in ("none", "yes"):
            p.error(f"--loads: unknown load '{x}' (valid: none, yes)")
    counts = [int(t) for t in a.threads.split(",")]
    ms = {}  # (load, workload, threads) -> [ms per round]
    for r in range(a.rounds):
        for load in loads:
            hogs = []
            if load == "yes":
                hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(max(1, os.cpu_count() - 1))]
            try:
                for w in workloads:
                    for t in counts:
                        ms.setdefault((load, w, t), []).append(run_once(a.headlab, w, t))
                        print(f"round {r + 1} {load:4} {w:6} {t} thread(s): {ms[(load, w, t)][-1]:9.3f} ms/step "
                              f"(load average {os.getloadavg()[0]:.1f})", flush=True)
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
    print(f"\nmedian ms/step of {a.rounds} round(s); ratio {counts[-1]} / {counts[0]} threads per round, median (min-max)")
    print("| load | workload | " + " | ".join(f"{t} thread(s)" for t in counts) + f" | {counts[-1]}T / {counts[0]}T |")
    print("|---|---|" + "---|" * len(counts) + "---|")
    for load in loads:
        for w in workloads:
            row = [statistics.median(ms[(load, w, t)]) for t in counts]
            ratios = sorted(x / y for x, y in zip(ms[(load, w, counts[-1])], ms[(load, w, counts[0])]))
            print(f"| {load} | {w} | " + " | ".join(f"{v:.2f}" for v in row) +
                  f" | {statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f}) |")


if __name__ == "__main__":
    main()
