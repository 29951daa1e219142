"""What going through Python costs: the same fit timed from Python and from Rust side by
side, and the peak memory of a fit against the size of X.

    python dgp-py/examples/overhead.py time [--rows 8000] [--steps 300] [--rounds 5]
    python dgp-py/examples/overhead.py memory [--rows 2000000]

``time``: svi DGP2, M = 128, hidden width 5, batch 1000, one training sample (the issue's
kin8nm-sized setting) on the synthetic problem; each round fits once through
``DeepGPRegressor.fit`` (validation, standardisation, build, training) and once through
``examples/reference_fit.rs`` (the library called directly: standardisation, build,
training; its own in-process wall time, not the process start), alternating; prints each
side's median and the ratio. Build the Rust side first:
``cargo build --release -p dgp-py --example reference_fit``.

``memory``: peak resident memory added by a short fit of ``rows × 9`` float64 rows that are
already in memory (``VmHWM`` after a reset of the high-water mark, less ``VmRSS`` before),
through Python and through the Rust reference (rows made in-process): what the library copies shows on both sides; a copy the
Python layer made would show as the difference.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import dgp

REPO = pathlib.Path(__file__).resolve().parents[2]


def _csv(path, X, y, name):
    with open(path, "w") as f:
        f.write(",".join([f"x{j}" for j in range(X.shape[1])] + [name]) + "\n")
        for row, t in zip(X, y):
            f.write(",".join(repr(float(v)) for v in row) + "," + repr(float(t)) + "\n")


def timing(args):
    exe = os.environ.get("DGP_REFERENCE_FIT", str(REPO / "target/release/examples/reference_fit"))
    X, y = dgp.synth(args.rows, seed=0)
    kw = dict(
        layers=2,
        num_inducing=128,
        hidden_width=5,
        batch_size=1000,
        steps=args.steps,
        train_samples=1,
        predict_samples=10,
        early_stopping=None,
        learning_rate=0.01,
    )
    est = dgp.DeepGPRegressor("svi", **kw).fit(X, y)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        _csv(tmp / "train.csv", X, y, "y")
        _csv(tmp / "test.csv", X[:10], np.zeros(10), "y_unused")
        (tmp / "config.json").write_text(json.dumps(est.config_))
        py, rs = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            dgp.DeepGPRegressor("svi", **kw).fit(X, y)
            py.append(time.perf_counter() - t0)
            out = subprocess.run(
                [exe, str(tmp / "train.csv"), str(tmp / "test.csv"), str(tmp / "config.json"), "regression"],
                check=True,
                capture_output=True,
                text=True,
            )
            rs.append(json.loads(out.stdout)["fit_seconds"])
    mp, mr = statistics.median(py), statistics.median(rs)
    print(f"rows {args.rows}, steps {args.steps}, rounds {args.rounds}")
    print("python fit seconds:", " ".join(f"{v:.3f}" for v in py))
    print("rust   fit seconds:", " ".join(f"{v:.3f}" for v in rs))
    print(f"median python {mp:.3f} s, rust {mr:.3f} s, python/rust {mp / mr:.4f}")


def _status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def memory(args):
    """Peak memory a fit adds on top of its data, from Python and from Rust (the same
    rows: the synthetic problem, 9 inputs; the same configuration)."""
    exe = os.environ.get("DGP_REFERENCE_FIT", str(REPO / "target/release/examples/reference_fit"))
    # The rows of the reference's `rows:N`, made by NumPy (memory the library's allocator
    # freed would be reused by the fit and hide part of what it adds).
    i = np.arange(args.rows, dtype=np.float64)
    X = np.sin(9 * i[:, None] + np.arange(9.0)[None, :])
    y = np.cos(i)
    del i
    if args.kind == "float32":
        X = X.astype(np.float32)
    elif args.kind == "pandas":
        import pandas as pd

        X = pd.DataFrame(X)
    kw = dict(layers=1, num_inducing=8, steps=2, batch_size=256, predict_samples=1, early_stopping=None, kmeans_iters=1)
    # Peak memory from here on: reset the high-water mark (Linux), keep the current size.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_bytes("VmRSS:")
    est = dgp.DeepGPRegressor("svi", **kw).fit(X, y)
    after = _status_bytes("VmHWM:")
    x_bytes = args.rows * 9 * 8
    py_added = after - before
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        _csv(tmp / "test.csv", np.zeros((2, 9)), np.zeros(2), "y_unused")
        (tmp / "config.json").write_text(json.dumps(est.config_))
        out = subprocess.run(
            [exe, f"rows:{args.rows}", str(tmp / "test.csv"), str(tmp / "config.json"), "regression"],
            check=True,
            capture_output=True,
            text=True,
        )
    ref = json.loads(out.stdout)
    rs_added = ref["peak_rss_after"] - ref["peak_rss_before"]
    mib = 2**20
    print(f"X: {args.rows} x 9 float64 = {x_bytes / mib:.1f} MiB; input given as {args.kind}")
    print(f"peak memory added by the fit: python {py_added / mib:.1f} MiB ({py_added / x_bytes:.2f} X), "
          f"rust {rs_added / mib:.1f} MiB ({rs_added / x_bytes:.2f} X), "
          f"difference {(py_added - rs_added) / mib:+.1f} MiB ({(py_added - rs_added) / x_bytes:+.2f} X)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["time", "memory"])
    p.add_argument("--rows", type=int)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--kind", default="float64", choices=["float64", "float32", "pandas"])
    args = p.parse_args()
    if args.what == "time":
        args.rows = args.rows or 8000
        timing(args)
    else:
        args.rows = args.rows or 2_000_000
        memory(args)


if __name__ == "__main__":
    sys.exit(main())
