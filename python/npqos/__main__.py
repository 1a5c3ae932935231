"""``python -m npqos sweep ...``: the sweep command line that ``npqos sweep --dask ADDR`` runs.

Takes the arguments of ``npqos sweep`` (``--set KEY=V1,V2`` repeatable, ``--out``, ``--seed``,
``--jobs``, ``--quiet``) plus ``--dask tcp://HOST:PORT``; writes the same sweep directory.
Exit codes as the CLI's: 0 success, 1 internal failure, 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m npqos")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sw = sub.add_parser("sweep", help="run a scenario over a grid (as npqos sweep)")
    sw.add_argument("scenario")
    sw.add_argument("--set", dest="sets", action="append", required=True, metavar="KEY=V1,V2,...")
    sw.add_argument("--out")
    sw.add_argument("--seed", type=int)
    sw.add_argument("--jobs", type=int, default=1)
    sw.add_argument("--dask", metavar="ADDR", help="Dask scheduler address (tcp://HOST:PORT)")
    sw.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)

    import npqos

    grid = {}
    for s in a.sets:
        key, eq, values = s.partition("=")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not eq or not key.strip() or not vals:
            print(f"error: --set {s!r}: expected KEY=V1,V2,... with at least one value", file=sys.stderr)
            return 2
        grid[key.strip()] = vals
    out = pathlib.Path(a.out) if a.out else pathlib.Path("results/sweep") / pathlib.Path(a.scenario).stem
    client = None
    try:
        if a.dask:
            from distributed import Client

            try:
                client = Client(a.dask, timeout=os.environ.get("NPQOS_DASK_TIMEOUT", "30s"))
            except OSError as e:
                print(f"error: --dask {a.dask}: cannot reach the Dask scheduler: {e}", file=sys.stderr)
                return 2
        df = npqos.sweep(a.scenario, grid, client=client, jobs=a.jobs, out=out, seed=a.seed,
                         progress=None if not a.quiet else False, _raw=True)
    except npqos.BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: finished points are in {out}; run the same command again to run the rest",
              file=sys.stderr)
        return 130
    finally:
        if client is not None:
            client.close()
    if not a.quiet:
        print(f"{len(df)} points -> {out}")
        print((out / "sweep.csv").read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
