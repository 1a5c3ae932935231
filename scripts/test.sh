#!/usr/bin/env bash
# Every test of npqos: the Rust workspace's (`cargo test --workspace --release`), then the Python
# package's: `pip install .` of this checkout into a virtual environment (target/python-venv,
# or $NPQOS_VENV; the test requirements first, the wheel beside the Rust tests) and pytest over
# python/tests, which start a real Dask LocalCluster. The wheel reuses the release build the
# Rust tests made. This is the README's test command; .ci/run runs it.
# `scripts/test.sh --python-deps` only makes the virtual environment and installs the test
# requirements (CI does that while clippy runs).
set -euo pipefail
cd "$(dirname "$0")/.."

deps_only=false
[ "${1:-}" = "--python-deps" ] && deps_only=true

py=${PYTHON:-python3}
venv=${NPQOS_VENV:-target/python-venv}
skip=""
if ! command -v "$py" >/dev/null 2>&1; then
  skip="no $py on PATH (set PYTHON to a Python 3.9 or later)"
elif [ ! -x "$venv/bin/python" ] && ! "$py" -m venv "$venv"; then
  skip="$py cannot create a virtual environment (on Debian: apt-get install python3-venv)"
fi
if [ -n "$skip" ]; then
  $deps_only || cargo test --workspace --release
  echo "SKIPPED: the Python tests: $skip"
  exit 0
fi
venv="$(cd "$venv" && pwd)"
# maturin's build hook runs `maturin` from PATH.
export PATH="$venv/bin:$PATH"
if $deps_only; then
  echo "python: installing the test requirements into $venv"
else
  echo "python: installing the test requirements and this checkout into $venv"
fi
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" "pandas>=1.5" "dask[distributed]>=2023.1" "pytest>=7"; then
  # (No package index, say: the Rust tests still run and report.)
  $deps_only || cargo test --workspace --release
  echo "python: the test requirements could not be installed into $venv"
  exit 1
fi
$deps_only && exit 0

# The Rust tests, and the wheel built beside them: the namespace tests (tests/live*.rs) wait on
# their senders and leave the cores idle for minutes, and the wheel's build (maturin compiles
# pyo3 and the extension again, about 20 s of both cores) takes that time at the lowest
# priority. It starts once cargo runs a test binary, when cargo no longer holds the build
# directory's lock (cargo test would otherwise wait for the wheel's build to finish).
cargo test --workspace --release --no-run
cargo test --workspace --release &
tests=$!
# (Without pgrep the wheel is built after the tests.)
running() { if command -v pgrep >/dev/null; then pgrep -P "$tests" >/dev/null; else ! kill -0 "$tests" 2>/dev/null; fi; }
while kill -0 "$tests" 2>/dev/null && ! running; do sleep 0.2; done
mkdir -p target
nice -n 19 "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --force-reinstall . > target/python-wheel.log 2>&1 &
wheel=$!
status=0
wait "$tests" || status=$?
if ! wait "$wheel"; then
  cat target/python-wheel.log
  echo "python: the wheel could not be built"
  exit 1
fi
[ "$status" = 0 ] || exit "$status"
echo "python: pytest"
cd python/tests
NPQOS_BIN="$PWD/../../target/release/npqos" "$venv/bin/python" -m pytest -q -rs --durations=8
