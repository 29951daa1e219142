"""Replays the rise rule of `EarlyStopping::rises` on stored held-out traces.

Every dspp and ppgpr record under `results/` with a `heldout_trace` (the final fit's
held-out NLL per evaluation) was made with the patience rule alone (20 evaluations),
except those made with the rises stop (`WITH_RISES`), which are skipped. For each rises = k, the script finds the evaluation at which "each of the last k
evaluations scored worse than the one before" first holds, and compares the best score
up to there with the best of the whole trace: a loss is a run that would have kept a
worse held-out NLL. Run from the repository root: `python3 results/dspp-time/replay_rises.py`
(dspp and ppgpr), or with backend names as arguments for other backends' traces
(`... replay_rises.py svi`).
"""

import glob
import json
import sys


# Records made with dspp's rises stop: their traces end where the rule stopped them.
WITH_RISES = {"results/dspp-time/rises.jsonl", "results/default-job/concrete.jsonl"}


def traces(backends):
    out = []
    for path in sorted(glob.glob("results/**/*.jsonl", recursive=True)):
        if path in WITH_RISES:
            continue
        for line in open(path):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if rec.get("backend") in backends and rec.get("heldout_trace"):
                out.append((path.split("/")[1], rec))
    return out


def replay(trace, k):
    """(evaluation index where the rule stops or None, best index up to there)."""
    best = 0
    rising = 0
    for i in range(1, len(trace)):
        rising = rising + 1 if trace[i][1] > trace[i - 1][1] else 0
        if trace[i][1] < trace[best][1]:
            best = i
        elif rising >= k:
            return i, best
    return None, best


def main():
    recs = traces(sys.argv[1:] or ["dspp", "ppgpr"])
    print(f"{len(recs)} traces")
    print("| rises | runs stopped earlier | steps saved | runs with a worse kept score | largest loss (model units) |")
    print("|---:|---:|---:|---:|---:|")
    for k in (4, 5, 6, 7, 8):
        fired = lost = 0
        saved = total = 0
        worst = 0.0
        for _, rec in recs:
            tr = rec["heldout_trace"]
            overall = min(range(len(tr)), key=lambda i: (tr[i][1], i))
            stop, best = replay(tr, k)
            total += tr[-1][0]
            if stop is None:
                continue
            fired += 1
            saved += tr[-1][0] - tr[stop][0]
            if best != overall:
                lost += 1
                worst = max(worst, tr[best][1] - tr[overall][1])
        print(f"| {k} | {fired} | {100 * saved / total:.1f} % | {lost} | {worst:.3f} |")


if __name__ == "__main__":
    main()
