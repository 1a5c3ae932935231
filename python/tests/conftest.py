"""Shared fixtures of the Python tests: the repository, the npqos binary, a LocalCluster."""

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# A link scenario whose runs take about half a second per simulated second on one core.
POINT_SCENARIO = """
model = "link"
[run]
duration = "{duration}"
replications = {replications}
[link]
rate = "10Gbps"
[queues]
count = 16
[traffic]
overload = 0.9
sizes = "imix"
arrivals = "exponential"
"""


@pytest.fixture(scope="session")
def root() -> pathlib.Path:
    return ROOT


@pytest.fixture(scope="session")
def npqos_bin() -> pathlib.Path:
    """The `npqos` binary of this checkout (`cargo build --release` or `cargo test --release`)."""
    p = pathlib.Path(os.environ.get("NPQOS_BIN", ROOT / "target" / "release" / "npqos"))
    if not p.is_file():
        pytest.skip(f"SKIPPED: no npqos binary at {p} (run `cargo build --release` first)")
    return p


def scenario_file(dir: pathlib.Path, duration: str = "1s", replications: int = 1) -> pathlib.Path:
    p = dir / "point.toml"
    p.write_text(POINT_SCENARIO.format(duration=duration, replications=replications))
    return p


def run_cli(npqos_bin, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(npqos_bin), *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def cluster():
    """A real Dask cluster: 2 worker processes of one thread each."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=40) as c:
        with distributed.Client(c) as client:
            yield c, client
