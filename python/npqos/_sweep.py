"""``npqos.sweep``: a scenario over a grid, on local threads or as tasks on a Dask cluster.

The grid is planned and validated in Rust (the plan ``npqos sweep`` makes) before anything is
written. Each point is a self-contained resolved scenario; running it is ``npqos run`` of that
scenario. On Dask, a task runs one point on a worker into a temporary directory there and
returns the directory's files; the client installs them as ``point-NNNN/`` with one atomic
rename. Workers therefore need no shared file system, a point retried after a lost worker is
stored once, and a sweep directory holds only whole points: running the sweep again into it runs
only the points missing there.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import shutil
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Mapping, Optional

import pandas as pd

from . import _native
from ._native import BadInput


def _run_point(toml: str, with_files: bool, threads: int = 1) -> dict:
    """A Dask task: runs one point; returns its aggregate scalars and, if asked, the files of its
    results directory (name -> bytes)."""
    from npqos import _native as native  # imported on the worker

    if not with_files:
        return {"aggregate": native.run_point(toml, None, threads), "files": None}
    with tempfile.TemporaryDirectory(prefix="npqos-point-") as d:
        aggregate = native.run_point(toml, d, threads)
        files = {n: pathlib.Path(d, n).read_bytes() for n in sorted(os.listdir(d))}
    return {"aggregate": aggregate, "files": files}


def _install(out: pathlib.Path, dir_name: str, files: dict) -> None:
    """Writes a point's files under a temporary name in ``out`` and renames it into place."""
    tmp = pathlib.Path(_native.point_tmp(os.fspath(out), dir_name))
    tmp.mkdir()
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        _native.commit_point(os.fspath(out), dir_name, os.fspath(tmp))
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


class _Progress:
    """``done/total points`` on stderr, only on a terminal."""

    def __init__(self, total: int, show: Optional[bool]):
        self.total, self.done = total, 0
        self.show = sys.stderr.isatty() if show is None else show
        self.t0 = time.monotonic()

    def step(self) -> None:
        self.done += 1
        if self.show:
            el = time.monotonic() - self.t0
            eta = el / self.done * (self.total - self.done)
            print(f"\rnpqos sweep: {self.done}/{self.total} points, {el:.0f} s, eta {eta:.0f} s ",
                  end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.show and self.done:
            print(file=sys.stderr)


def sweep(scenario, grid: Mapping[str, Any], client=None, jobs: int = 1, out=None,
          seed: Optional[int] = None, overrides: Optional[Mapping[str, Any]] = None,
          progress: Optional[bool] = None, _raw: bool = False) -> pd.DataFrame:
    """Runs ``scenario`` at every point of ``grid`` and returns one row per point: the swept
    keys, then the mean of every scalar over the point's replications.

    ``grid`` maps dotted keys to lists of values; the product is swept, first key slowest
    (``{"link.rate": ["10Gbps", "40Gbps"], "queues.count": [8, 64]}`` is 4 points). With
    ``client`` (a ``dask.distributed.Client``) every point is a Dask task on the cluster's
    workers; otherwise points run on ``jobs`` local threads. With ``out``, the sweep directory
    ``npqos sweep`` writes (``point-NNNN/`` per point, sweep.csv, results.sqlite, summary.json,
    report.md); points already finished there are not run again. ``seed`` overrides every
    point's seed (the same for all: common random numbers). The DataFrame's ``attrs`` hold
    ``ran`` and ``reused`` (point indices) and ``out``.
    """
    from . import _load, _override

    if not isinstance(grid, Mapping) or not grid:
        raise BadInput("grid: expected a non-empty dict of dotted keys to lists of values")
    axes, py_values = [], []
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise BadInput(f"grid[{key!r}]: expected a list of values, not {values!r}")
        values = list(values)
        if not values:
            raise BadInput(f"grid[{key!r}]: no values")
        axes.append((str(key), [str(v) if _raw else _override(v) for v in values]))
        py_values.append(values)
    if jobs < 1:
        raise BadInput(f"jobs = {jobs}: expected at least 1")
    sc = _load(scenario, None, overrides)
    plan = _native.plan_sweep(sc, axes, seed)
    points = plan.points()
    if client is None:
        plan.check_memory(jobs)

    out_path = pathlib.Path(out) if out is not None else None
    if out_path is not None:
        plan.prepare(os.fspath(out_path))
        todo = [p for p in points if not plan.finished(os.fspath(out_path), p[0])]
    else:
        todo = list(points)
    reused = sorted(set(p[0] for p in points) - set(p[0] for p in todo))
    if reused and progress is not False:
        print(f"npqos sweep: {len(reused)} of {len(points)} points already finished in {out_path}; "
              f"running the other {len(todo)}", file=sys.stderr)

    aggregates: dict = {}
    bar = _Progress(len(todo), progress)
    t0 = time.monotonic()

    def finish(point, res) -> None:
        index, dir_name = point[0], point[1]
        if out_path is not None and res.get("files") is not None:
            _install(out_path, dir_name, res["files"])
        aggregates[index] = res["aggregate"]
        bar.step()

    if client is None:
        workers = min(jobs, max(1, len(todo)))

        def local(point):
            if out_path is None:
                return _run_point(point[3], False)
            # Written in place (no round trip through bytes as from a Dask worker).
            tmp = pathlib.Path(_native.point_tmp(os.fspath(out_path), point[1]))
            try:
                aggregate = _native.run_point(point[3], os.fspath(tmp), 1)
                _native.commit_point(os.fspath(out_path), point[1], os.fspath(tmp))
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
            return {"aggregate": aggregate, "files": None}

        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(local, p): p for p in todo}
            try:
                for f in as_completed(futures):
                    finish(futures[f], f.result())
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    else:
        from distributed import as_completed as dask_completed

        workers = len(client.scheduler_info().get("workers", {})) or 1
        token = uuid.uuid4().hex[:8]
        futures = {}
        for p in todo:
            f = client.submit(_run_point, p[3], out_path is not None, 1,
                              key=f"npqos-{plan.name}-point-{p[0]:04d}-{token}", pure=False, retries=2)
            futures[f] = p
        try:
            for f in dask_completed(list(futures)):
                finish(futures[f], f.result())
        except BaseException:
            client.cancel(list(futures))
            raise
    bar.close()
    elapsed = time.monotonic() - t0

    if out_path is not None:
        for index in reused:
            aggregates[index] = _native.read_point(os.fspath(out_path / points[index][1]))
        plan.assemble(os.fspath(out_path), elapsed, workers)

    keys = [a[0] for a in axes]
    names: list = []
    for index in sorted(aggregates):
        names.extend(n for n, *_ in aggregates[index] if n not in names)
    rows = []
    for (index, _, _, _), values in zip(points, itertools.product(*py_values)):
        row = dict(zip(keys, values))
        row.update({n: m for n, m, _, _ in aggregates.get(index, [])})
        rows.append(row)
    df = pd.DataFrame(rows, columns=keys + [n for n in names if n not in keys])
    df.index.name = "point"
    df.attrs.update({"ran": sorted(p[0] for p in todo), "reused": reused,
                     "out": os.fspath(out_path) if out_path is not None else None,
                     "elapsed_s": elapsed})
    return df
