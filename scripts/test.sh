#!/usr/bin/env bash
# Every test of npqos: the Rust workspace's (`cargo test --workspace --release`), then the Python
# package's: `pip install .` of this checkout into a virtual environment (target/python-venv,
# or $NPQOS_VENV) and pytest over python/tests, which start a real Dask LocalCluster. The wheel
# reuses the release build the Rust tests made. This is the README's test command; .ci/run runs it.
# `scripts/test.sh --python-deps` only makes the virtual environment and installs the test
# requirements (CI does that while clippy runs).
set -euo pipefail
cd "$(dirname "$0")/.."

deps_only=false
[ "${1:-}" = "--python-deps" ] && deps_only=true
$deps_only || cargo test --workspace --release

py=${PYTHON:-python3}
venv=${NPQOS_VENV:-target/python-venv}
if ! command -v "$py" >/dev/null 2>&1; then
  echo "SKIPPED: the Python tests: no $py on PATH (set PYTHON to a Python 3.9 or later)"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  if ! "$py" -m venv "$venv"; then
    echo "SKIPPED: the Python tests: $py cannot create a virtual environment (on Debian: apt-get install python3-venv)"
    exit 0
  fi
fi
venv="$(cd "$venv" && pwd)"
# maturin's build hook runs `maturin` from PATH.
export PATH="$venv/bin:$PATH"
if $deps_only; then
  echo "python: installing the test requirements into $venv"
else
  echo "python: installing the test requirements and this checkout into $venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" "pandas>=1.5" "dask[distributed]>=2023.1" "pytest>=7"
$deps_only && exit 0
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall .
echo "python: pytest"
cd python/tests
NPQOS_BIN="$PWD/../../target/release/npqos" "$venv/bin/python" -m pytest -q -rs --durations=8
