"""Sweep kim's reschedule threshold alpha on a local Dask cluster and plot what it buys.

kim (section 3.1, Algorithm 1): a queue that runs out of tokens is rescheduled on its core's
heap when its bucket is more than alpha bytes short; a larger alpha means fewer reschedules
(the heap's work) but more tokens owed at once. This script runs 16 values of alpha, 500 B to
32 KB, on 10,000 queues shaped on one core (the bucket cap follows alpha), as 16 Dask tasks on a
LocalCluster of worker processes, then plots reschedules and heap size against alpha.

    pip install . matplotlib "dask[distributed]"
    python examples/kim_alpha_sweep.py                  # 2 workers, results/kim-alpha/
    python examples/kim_alpha_sweep.py --workers 4 --duration 60s
    python examples/kim_alpha_sweep.py --local          # the same sweep on one local thread
    python examples/kim_alpha_sweep.py --scheduler tcp://10.0.0.1:8786   # an existing cluster

Running it again with the same --out reuses the finished points.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import npqos

ALPHAS = [500, 750, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000, 10000, 12000, 16000, 24000, 32000]


def scenario(duration: str) -> dict:
    """kim at one core's scale (as scenarios/kim-small.toml, without a fixed cap): 10,000 queues
    shaped to 100 kbps each on a 1 Gbps link, IMIX sizes, exponential arrivals at overload 1.29."""
    return {
        "model": "kim",
        "run": {"seed": 1, "duration": duration, "warmup": "1s"},
        "link": {"rate": "1Gbps"},
        "queues": {"count": 10000, "buffer": "64KiB"},
        "traffic": {"overload": 1.29, "sizes": "imix", "arrivals": "exponential"},
        "shaper": {"fill": "event", "cores": 1},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes (default 2)")
    ap.add_argument("--scheduler", help="address of an existing Dask scheduler instead of a LocalCluster")
    ap.add_argument("--local", action="store_true", help="run the points on one local thread, without Dask")
    ap.add_argument("--duration", default="20s", help="simulated time per point (default 20s)")
    ap.add_argument("--out", default="results/kim-alpha", help="sweep directory (default results/kim-alpha)")
    a = ap.parse_args()

    grid = {"shaper.alpha": [f"{b}B" for b in ALPHAS]}
    t0 = time.monotonic()
    if a.local:
        df = npqos.sweep(scenario(a.duration), grid, jobs=1, out=a.out)
    else:
        from distributed import Client, LocalCluster

        if a.scheduler:
            with Client(a.scheduler) as client:
                df = npqos.sweep(scenario(a.duration), grid, client=client, out=a.out)
        else:
            with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster, Client(cluster) as client:
                df = npqos.sweep(scenario(a.duration), grid, client=client, out=a.out)
    wall = time.monotonic() - t0
    print(f"{len(df)} points in {wall:.1f} s ({len(df.attrs['ran'])} run, {len(df.attrs['reused'])} reused) "
          f"-> {a.out}")

    df["alpha_B"] = [int(v.rstrip("B")) for v in df["shaper.alpha"]]
    span_s = float(a.duration.rstrip("s")) - 1.0  # measured after the 1 s warm-up
    df["reschedules_per_s"] = df["reschedules"] / span_s
    print(df[["alpha_B", "reschedules_per_s", "heap_mean_per_core", "heap_max_per_core", "rate_ratio"]]
          .to_string(index=False))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    left.plot(df["alpha_B"], df["reschedules_per_s"], "o-", color="tab:blue")
    left.set(xscale="log", yscale="log", xlabel="reschedule threshold alpha (bytes)",
             ylabel="reschedules per second", title="Heap work falls as alpha grows")
    right.plot(df["alpha_B"], df["heap_mean_per_core"], "o-", color="tab:orange", label="mean")
    right.plot(df["alpha_B"], df["heap_max_per_core"], "s--", color="tab:red", label="max")
    right.set(xscale="log", xlabel="reschedule threshold alpha (bytes)", ylabel="queues on the heap",
              title="Heap size per core (10,000 queues, 1 core)")
    right.legend(loc="best")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
    png = pathlib.Path(a.out) / "kim-alpha.png"
    fig.savefig(png, dpi=110)
    print(f"plot: {png}")


if __name__ == "__main__":
    main()
