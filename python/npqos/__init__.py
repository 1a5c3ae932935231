"""npqos: network-processor QoS from Python.

The simulator and the papers' reproductions of the ``npqos`` command, with results as pandas
DataFrames and sweeps on local threads or a Dask cluster::

    import npqos
    r = npqos.run("scenarios/demo.toml", overrides={"traffic.overload": 0.9})
    r.scalars                      # one row per (replication, scalar): run, replication, seed, name, value, unit
    r.write("results/demo")        # the results directory `npqos run` writes

    df = npqos.sweep("scenarios/kim-small.toml", {"shaper.alpha": ["1500B", "3000B"]}, jobs=2)

Bad input raises :class:`BadInput` (a ``ValueError``) with the message the command prints.
Simulations run with the GIL released. See docs/python.md.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Mapping, Optional

import pandas as pd

from . import _native, model
from ._native import BadInput
from ._sweep import sweep

__version__ = _native.__version__

__all__ = [
    "BadInput",
    "Result",
    "experiment",
    "experiments",
    "model",
    "models",
    "reproduce",
    "run",
    "sweep",
    "trace_stats",
]


def _override(value: Any) -> str:
    """A Python value as the text of a ``--set`` value that reads back as that value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return _native.string_override(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_override(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_override(v)}" for k, v in value.items()) + "}"
    raise BadInput(f"value {value!r}: expected str, int, float, bool, a list or a dict, not {type(value).__name__}")


def _overrides(overrides: Optional[Mapping[str, Any]]) -> list:
    if overrides is None:
        return []
    if not isinstance(overrides, Mapping):
        raise BadInput(f"overrides: expected a dict of dotted keys to values, not {type(overrides).__name__}")
    return [(str(k), _override(v)) for k, v in overrides.items()]


def _load(scenario: Any, seed: Optional[int] = None, overrides=None, name: Optional[str] = None):
    """A validated native scenario from a path, TOML text or a dict."""
    if isinstance(scenario, Mapping):
        try:
            text = json.dumps(scenario)
        except TypeError as e:
            raise BadInput(f"<scenario dict>: {e}") from None
        return _native.load(text, "json", _overrides(overrides), seed, name)
    if isinstance(scenario, os.PathLike):
        return _native.load(os.fspath(scenario), "path", _overrides(overrides), seed, name)
    if isinstance(scenario, str):
        is_path = os.path.exists(scenario) or ("\n" not in scenario and "=" not in scenario)
        return _native.load(scenario, "path" if is_path else "toml", _overrides(overrides), seed, name)
    raise BadInput(f"scenario: expected a path, TOML text or a dict, not {type(scenario).__name__}")


def _frame(rows: list, names: list) -> pd.DataFrame:
    """A DataFrame from native rows: ``((run, params, seed), (values...))`` for per-run tables,
    flat tuples otherwise. The JSON ``params`` column becomes one column per parameter, right
    after the first column (``run`` or ``metric``)."""
    if rows and isinstance(rows[0][0], tuple):
        rows = [key + values for key, values in rows]
    return _params_columns(pd.DataFrame.from_records(rows, columns=names))


def _object_frame(rows: list, first: list) -> pd.DataFrame:
    """A DataFrame from native rows ``((run, params, seed), JSON object)``: the run's key, then
    the object's fields in its order, ``first`` before the rest."""
    records = [dict(zip(("run", "params", "seed"), key), **json.loads(obj)) for key, obj in rows]
    df = pd.DataFrame.from_records(records)
    if df.empty:
        df = pd.DataFrame(columns=["run", "params", "seed"] + first)
    order = ["run", "params", "seed"] + first
    df = df[order + [c for c in df.columns if c not in order]]
    return _params_columns(df)


def _params_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The JSON ``params`` column as one column per parameter, after the first column."""
    params = df.pop("params")
    parsed = {s: json.loads(s) for s in dict.fromkeys(params)}
    keys: list = []
    for p in parsed.values():
        keys.extend(k for k in p if k not in keys)
    for i, k in enumerate(keys):
        df.insert(1 + i, k if k not in df.columns else f"param_{k}", [parsed[s].get(k) for s in params])
    return df


class Result:
    """The results of one run or reproduction.

    ``scalars``, ``series``, ``histograms``, ``flows``, ``classes``, ``detections``, ``comparisons`` and ``aggregate`` are tidy pandas
    DataFrames (one row per value, with its name, unit and the run's parameters); ``summary``
    is summary.json as a dict; ``write(dir)`` writes the standard results directory.
    """

    def __init__(self, native):
        self._n = native
        self._cache: dict = {}

    def _get(self, key, build):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    @property
    def id(self) -> str:
        return self._n.id

    @property
    def complete(self) -> bool:
        """False if the run stopped early (Ctrl-C)."""
        return self._n.complete

    @property
    def summary(self) -> dict:
        """summary.json as a dict."""
        return json.loads(self._n.summary_json())

    @property
    def scalars(self) -> pd.DataFrame:
        """One row per run and scalar: run, the run's parameters, seed, name, value, unit."""
        return self._get("scalars", lambda: _frame(self._n.scalars(), ["run", "params", "seed", "name", "value", "unit"]))

    @property
    def series(self) -> pd.DataFrame:
        """One row per point of each time series: run, parameters, seed, name, x, y, x_unit, unit."""
        return self._get(
            "series",
            lambda: _frame(self._n.series(), ["run", "params", "seed", "name", "x", "y", "x_unit", "unit"]),
        )

    @property
    def histograms(self) -> pd.DataFrame:
        """One row per bin: run, parameters, seed, name, lo, hi, count, unit."""
        return self._get(
            "histograms",
            lambda: _frame(self._n.histograms(), ["run", "params", "seed", "name", "lo", "hi", "count", "unit"]),
        )

    @property
    def flows(self) -> pd.DataFrame:
        """The flow counters (flows.csv; models that keep them: the router): one row per run and
        flow, in tc's vocabulary: flow, class, kind (``exact``: counted exactly; ``heavy``: one
        of the heaviest flows past the exact table, offered bytes only, over-estimated by at
        most ``offered_bytes_error``; ``other``: every flow past the table together), packets
        and bytes offered and sent, dropped (in all and ``dropped_<reason>``), overlimits,
        backlog, mean and largest delay (ns). docs/pipeline.md."""
        return self._get("flows", lambda: _object_frame(self._n.flows(), ["flow", "class", "kind"]))

    @property
    def classes(self) -> pd.DataFrame:
        """The class counters (classes.csv; the router's services): one row per run and class,
        the same counts as ``flows`` plus the delay's p50 and p99 (ns)."""
        return self._get("classes", lambda: _object_frame(self._n.classes(), ["class"]))

    @property
    def detections(self) -> pd.DataFrame:
        """What the services' packet functions reported (detections.csv; the router with
        ``[services.function]``, docs/everest.md): one row per report and run: class, what
        (``port_scan``, ``syn_flood``), who, at_ns, window_start_ns, count."""
        return self._get("detections", lambda: _object_frame(self._n.detections(), ["class", "what", "who"]))

    @property
    def comparisons(self) -> pd.DataFrame:
        """A reproduction's quantities beside the paper's: metric, parameters, ours, paper
        (NaN where the paper gives no number), unit, source (empty for a scenario run)."""
        def build():
            df = _frame(self._n.comparisons(), ["metric", "params", "ours", "paper", "unit", "source"])
            df["paper"] = pd.to_numeric(df["paper"])
            return df

        return self._get("comparisons", build)

    @property
    def aggregate(self) -> pd.DataFrame:
        """Each scalar's mean over the replications and its 95% confidence half-width."""
        return self._get(
            "aggregate", lambda: pd.DataFrame(self._n.aggregate(), columns=["name", "mean", "ci95", "unit"])
        )

    @property
    def assumptions(self) -> list:
        """The choices a reproduction made where its paper is silent."""
        return self._n.assumptions()

    def write(self, dir) -> pathlib.Path:
        """Writes the results directory ``npqos`` writes (summary.json, results.sqlite, CSV,
        SVG plots, report.md, ...) into ``dir``; returns its path."""
        path = pathlib.Path(dir)
        self._n.write(os.fspath(path))
        return path

    def __repr__(self) -> str:
        state = "complete" if self.complete else "INCOMPLETE"
        return f"<npqos.Result {self.id!r} {state}: {len(self._n.aggregate())} scalars>"


def run(scenario, seed: Optional[int] = None, overrides: Optional[Mapping[str, Any]] = None,
        threads: Optional[int] = None, name: Optional[str] = None) -> Result:
    """Runs a scenario: a path, TOML text or a dict (as a scenario file's tables).

    ``overrides`` maps dotted keys to values (``{"link.rate": "40Gbps", "queues.count": 64}``);
    ``seed`` replaces the scenario's; ``threads`` defaults to one per CPU (results do not
    depend on it). Relative trace paths resolve against the file's directory, or the working
    directory for text and dicts.
    """
    sc = _load(scenario, seed, overrides, name)
    return Result(_native.run(sc, threads))


def reproduce(id: str, quick: bool = True, seed: int = 1, threads: Optional[int] = None) -> Result:
    """Runs one reproduction of a paper's experiment (see :func:`experiments`)."""
    return Result(_native.reproduce(id, quick, seed, threads))


def experiment(id: str) -> dict:
    """One experiment's declaration: description, grid (full and quick) and paper values."""
    for e in json.loads(_native.experiments()):
        if e["id"] == id:
            return e
    known = ", ".join(e["id"] for e in json.loads(_native.experiments()))
    raise BadInput(f"unknown experiment id {id!r}: expected one of {known}")


def experiments() -> pd.DataFrame:
    """The reproducible experiments: id, description, grid points (full, quick), paper values."""
    rows = [
        {
            "id": e["id"],
            "description": e["description"],
            "points": e["grid"]["full"]["points"],
            "quick_points": e["grid"]["quick"]["points"],
            "paper_values": len(e["paper"]),
        }
        for e in json.loads(_native.experiments())
    ]
    return pd.DataFrame(rows)


def models() -> pd.DataFrame:
    """The scenario models (``model = "<name>"``): name, description."""
    return pd.DataFrame(_native.models(), columns=["name", "description"])


def trace_stats(files, lenient: bool = False) -> pd.DataFrame:
    """Packets, bytes, duration, sizes, link types and flows of pcap / pcapng files: one row
    per file, then a ``total`` row when several are given (``npqos trace stats --json``)."""
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    rows = json.loads(_native.trace_stats([os.fspath(f) for f in files], lenient))
    return pd.json_normalize(rows)
