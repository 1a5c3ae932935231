"""The analytical sizing models of ``npqos model``, returning the dict ``--json`` prints.

Keyword arguments are the command's options with underscores (``npqos model kim --fill-period
10us`` is ``kim(fill_period="10us")``); numbers may be ints or floats (``queues=1e6``), lists
are comma-joined (``dqs(slots=[64, 256])``). Unknown options and bad values raise
:class:`npqos.BadInput` with the command's message.
"""

from __future__ import annotations

import json
import os
from typing import Any

from . import _native

__all__ = ["dqs", "everest", "kim", "predictive", "qcache"]


def _arg(value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError("boolean options are not used by the sizing models")
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return ",".join(_arg(v) for v in value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def _call(short: str, kwargs: dict) -> dict:
    argv = [short]
    for k, v in kwargs.items():
        if v is None:
            continue
        argv += ["--" + k.replace("_", "-"), _arg(v)]
    return json.loads(_native.sizing_model(argv))


def kim(**kwargs) -> dict:
    """Heap size per core, reschedules and off-chip accesses per second (kim eqs 8-16), e.g.
    ``kim(queues=1e6, link="100Gbps", overload=1.29, arrivals="exponential")``."""
    return _call("kim", kwargs)


def dqs(**kwargs) -> dict:
    """AFM search costs and memory (dqs eq 5, Theorems 1-2), e.g.
    ``dqs(slots=[64, 256, 1024], active_flows=256, in_progress=1e6)``."""
    return _call("dqs", kwargs)


def qcache(**kwargs) -> dict:
    """Queue-operation latencies and throughput bounds per subsystem (qcache Table 5, section
    3.6), e.g. ``qcache(threads=32, hit_rate=0.9)`` or ``qcache(scenario="s.toml")``."""
    return _call("qcache", kwargs)


def predictive(**kwargs) -> dict:
    """Eq 1 estimates, eq 4 reservations and eq 13 / 18 bounds of an fq or efq-lap scenario,
    e.g. ``predictive(scenario="scenarios/fq-small.toml")``."""
    return _call("predictive", kwargs)


def everest(**kwargs) -> dict:
    """N_max and eq 7 guarantees of an everest scenario's services, e.g.
    ``everest(scenario="scenarios/everest-small.toml")``."""
    return _call("everest", kwargs)
