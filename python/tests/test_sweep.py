"""Sweeps on local threads and on a real Dask cluster (LocalCluster, 2 worker processes):
the same values, point directories byte for byte as `npqos run`, a killed worker, resume,
bad input."""

import os
import signal
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest

import npqos
from conftest import run_cli, scenario_file

GRID8 = {"traffic.overload": [0.5, 0.7, 0.9, 1.1], "queues.count": [8, 32]}


def points_in(out):
    return sorted(p.name for p in out.iterdir() if p.name.startswith("point-"))


def test_dask_sweep_equals_local_and_points_equal_npqos_run(cluster, npqos_bin, tmp_path):
    _, client = cluster
    s = scenario_file(tmp_path, "1s")
    t0 = time.monotonic()
    local = npqos.sweep(s, GRID8, jobs=1, out=tmp_path / "local")
    t_local = time.monotonic() - t0
    t0 = time.monotonic()
    dask = npqos.sweep(s, GRID8, client=client, out=tmp_path / "dask")
    t_dask = time.monotonic() - t0
    print(f"\n8 points: local 1 thread {t_local:.1f} s, LocalCluster 2 workers {t_dask:.1f} s")
    assert len(local) == 8 and list(local.columns[:2]) == ["traffic.overload", "queues.count"]
    assert local["throughput"].notna().all()
    pd.testing.assert_frame_equal(local, dask, check_exact=True)
    for f in ["sweep.csv", "summary.json", "jobs.json", "report.md"]:
        assert (tmp_path / "local" / f).read_bytes() == (tmp_path / "dask" / f).read_bytes(), f
    # Without an output directory, the same values.
    pd.testing.assert_frame_equal(npqos.sweep(s, GRID8, client=client), local, check_exact=True)
    # Each point is `npqos run` of its resolved scenario, byte for byte.
    assert points_in(tmp_path / "dask") == [f"point-{i:04d}" for i in range(8)]
    for i in range(8):
        point = tmp_path / "dask" / f"point-{i:04d}"
        o = run_cli(npqos_bin, "run", point / "scenario.resolved.toml", "--quiet", "--out", tmp_path / f"cli-{i}")
        assert o.returncode == 0, o.stderr
        assert (point / "summary.json").read_bytes() == (tmp_path / f"cli-{i}" / "summary.json").read_bytes(), i


def _executing(dask_worker):
    """The keys of the tasks a worker is running (on the worker)."""
    return [ts.key for ts in dask_worker.state.executing]


def test_a_killed_worker_loses_and_duplicates_no_point(cluster, tmp_path):
    c, client = cluster
    s = scenario_file(tmp_path, "6s")
    result = {}

    def go():
        try:
            result["df"] = npqos.sweep(s, GRID8, client=client, out=tmp_path / "dask")
        except BaseException as e:  # noqa: BLE001 (reported below)
            result["error"] = e

    t = threading.Thread(target=go)
    t.start()
    # Kill a worker process while it runs a point: SIGKILL, as the OOM killer would.
    victim, running = None, []
    deadline = time.monotonic() + 60
    while not running and time.monotonic() < deadline:
        for w, keys in client.run(_executing).items():
            if keys:
                victim, running = w, keys
                break
        else:
            time.sleep(0.05)
    assert running, "no task started"
    time.sleep(0.3)  # into the point's run (a point takes seconds)
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    t.join(timeout=300)
    assert not t.is_alive()
    assert "error" not in result, result.get("error")
    df = result["df"]
    out = tmp_path / "dask"
    assert points_in(out) == [f"point-{i:04d}" for i in range(8)]
    assert not [p for p in os.listdir(out) if ".tmp-" in p]
    rows = (out / "sweep.csv").read_text().splitlines()[1:]
    assert sorted(int(r.split(",")[0]) for r in rows) == list(range(8))
    import sqlite3

    db = sqlite3.connect(out / "results.sqlite")
    assert db.execute("SELECT count(*), count(DISTINCT point) FROM runs").fetchone() == (8, 8)
    # The killed worker's point ran again from scratch: the values are those of a clean sweep.
    clean = npqos.sweep(s, GRID8, jobs=2)
    pd.testing.assert_frame_equal(df, clean, check_exact=True)
    print(f"\nkilled worker {victim} (pid {pid}) while it ran {running}; 8 of 8 points, each once")


def test_resume_runs_only_the_missing_points(tmp_path):
    s = scenario_file(tmp_path, "200ms")
    out = tmp_path / "sw"
    grid = {"traffic.overload": [0.5, 0.9, 1.2], "queues.count": [8, 32]}
    first = npqos.sweep(s, grid, jobs=2, out=out)
    assert first.attrs["ran"] == list(range(6)) and first.attrs["reused"] == []
    csv = (out / "sweep.csv").read_bytes()
    stamp = {p: (out / p / "summary.json").stat().st_mtime_ns for p in points_in(out)}
    # Interrupted states: two points missing, one unfinished, a temporary directory left over.
    for p in ["point-0001", "point-0004"]:
        import shutil

        shutil.rmtree(out / p)
    summary = (out / "point-0002" / "summary.json").read_text()
    (out / "point-0002" / "summary.json").write_text(summary.replace('"complete": true', '"complete": false', 1))
    (out / ".point-0003.tmp-1-0").mkdir()
    again = npqos.sweep(s, grid, jobs=2, out=out)
    assert again.attrs["ran"] == [1, 2, 4] and again.attrs["reused"] == [0, 3, 5]
    for p in ["point-0000", "point-0003", "point-0005"]:
        assert (out / p / "summary.json").stat().st_mtime_ns == stamp[p], p
    assert (out / "sweep.csv").read_bytes() == csv
    assert not (out / ".point-0003.tmp-1-0").exists()
    pd.testing.assert_frame_equal(first, again, check_exact=True)
    # A different grid in the same directory reuses nothing that does not match.
    other = npqos.sweep(s, grid, jobs=2, out=out, seed=5)
    assert other.attrs["reused"] == []


def test_an_interrupted_sweep_resumes(tmp_path):
    """Ctrl-C (SIGINT) to `python -m npqos sweep`; the same command then runs only the rest."""
    s = scenario_file(tmp_path, "1s")
    out = tmp_path / "sw"
    cmd = [sys.executable, "-m", "npqos", "sweep", str(s), "--set", "traffic.overload=0.5,0.7,0.9,1.1",
           "--set", "queues.count=8,32", "--out", str(out), "--quiet"]
    # SIGINT at its default in the child. A shell without job control starts a background job
    # (`.ci/run &`) with SIGINT ignored; pytest and this child inherit that, Python keeps an
    # inherited SIG_IGN, and the sweep then ran to its end (exit 0).
    child = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out.exists() and points_in(out)):
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    done = points_in(out)
    assert 1 <= len(done) < 8, done
    o = subprocess.run(cmd[:-1], capture_output=True, text=True)
    assert o.returncode == 0, o.stderr
    assert f"{len(done)} of 8 points already finished" in o.stderr
    assert points_in(out) == [f"point-{i:04d}" for i in range(8)]


def test_bad_sweep_input_raises_and_writes_nothing(tmp_path):
    s = scenario_file(tmp_path, "200ms")
    out = tmp_path / "never"
    with pytest.raises(npqos.BadInput) as e:
        npqos.sweep(s, {"queues.cuont": [8, 16]}, out=out)
    assert "queues.cuont" in str(e.value) and "unknown key" in str(e.value)
    with pytest.raises(npqos.BadInput) as e:
        npqos.sweep(s, {"link.rate": ["10Gbps", "40"]}, out=out)
    assert "missing unit" in str(e.value) and "link.rate=\"40\"" in str(e.value)
    with pytest.raises(npqos.BadInput, match="queues.count=0"):
        npqos.sweep(s, {"queues.count": [4, 0]}, out=out)
    with pytest.raises(npqos.BadInput, match="expected a list"):
        npqos.sweep(s, {"queues.count": 8}, out=out)
    with pytest.raises(npqos.BadInput, match="non-empty dict"):
        npqos.sweep(s, {}, out=out)
    assert not out.exists()


def test_cli_sweep_with_dask(cluster, npqos_bin, tmp_path):
    c, _ = cluster
    s = scenario_file(tmp_path, "200ms")
    env = dict(os.environ, NPQOS_PYTHON=sys.executable)
    args = ["sweep", s, "--set", "traffic.overload=0.5,1.2", "--set", "link.rate=10Gbps,40Gbps", "--quiet"]
    a = subprocess.run([str(npqos_bin), *map(str, args), "--out", str(tmp_path / "local")], capture_output=True, text=True)
    b = subprocess.run([str(npqos_bin), *map(str, args), "--out", str(tmp_path / "dask"), "--dask", c.scheduler_address],
                       capture_output=True, text=True, env=env)
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    for f in ["sweep.csv", "summary.json", "point-0003/summary.json"]:
        assert (tmp_path / "local" / f).read_bytes() == (tmp_path / "dask" / f).read_bytes(), f
    env["NPQOS_DASK_TIMEOUT"] = "2s"
    bad = subprocess.run([str(npqos_bin), *map(str, args[:-1]), "--out", str(tmp_path / "x"), "--dask", "tcp://127.0.0.1:1"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "cannot reach the Dask scheduler" in bad.stderr, bad.stderr
