"""The package's API: runs, DataFrames, results directories, errors, sizing models."""

import json
import pathlib
import re
import struct
import threading
import time

import pandas as pd
import pytest

import npqos
from conftest import run_cli, scenario_file


def test_run_returns_tidy_frames(root):
    r = npqos.run(root / "scenarios" / "demo.toml")
    assert r.complete and r.id == "demo"
    s = r.scalars
    assert list(s.columns) == ["run", "replication", "seed", "name", "value", "unit"]
    reps = r.summary["runs"]
    assert len(reps) == 4 and s["run"].nunique() == 4
    # One row per run and scalar, the values summary.json holds.
    per_run = len(r.aggregate)
    assert len(s) == 4 * per_run
    got = s[(s.run == "rep2") & (s.name == "delivered_packets")]["value"].item()
    assert got == reps[2]["scalars"]["delivered_packets"]
    assert list(r.series.columns) == ["run", "replication", "seed", "name", "x", "y", "x_unit", "unit"]
    assert len(r.series) > 0 and len(r.histograms) > 0
    agg = r.aggregate.set_index("name")
    assert agg.loc["throughput", "mean"] == pytest.approx(r.summary["scalars"]["throughput"]["value"])
    assert r.comparisons.empty


def test_write_is_the_directory_npqos_run_writes(root, npqos_bin, tmp_path):
    r = npqos.run(root / "scenarios" / "demo.toml", seed=7)
    r.write(tmp_path / "py")
    cli = run_cli(npqos_bin, "run", root / "scenarios" / "demo.toml", "--seed", 7, "--quiet", "--out", tmp_path / "cli")
    assert cli.returncode == 0, cli.stderr
    cli_files = sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert sorted(p.name for p in (tmp_path / "py").iterdir()) == cli_files
    # Every deterministic file is the same, byte for byte (run.json holds the wall clock and
    # the command line; the sqlite file's pages are not compared; the resolved scenario and the
    # report name the commit each build came from).
    def body(p):
        text = b"".join(line for line in p.read_bytes().splitlines(True) if not line.startswith(b"git_commit"))
        return re.sub(rb"\(commit [0-9a-f]+(-dirty)?\)", b"(commit)", text)

    for f in cli_files:
        if f.endswith((".json", ".csv", ".svg", ".md", ".html", ".toml")) and f != "run.json":
            assert body(tmp_path / "py" / f) == body(tmp_path / "cli" / f), f


def test_text_dict_and_overrides_give_the_same_run(tmp_path):
    text = scenario_file(tmp_path, "200ms").read_text()
    a = npqos.run(text, overrides={"queues.count": 8, "link.rate": "40Gbps"})
    b = npqos.run({"model": "link", "run": {"duration": "200ms"}, "link": {"rate": "40Gbps"},
                   "queues": {"count": 8}, "traffic": {"overload": 0.9, "sizes": "imix", "arrivals": "exponential"}})
    c = npqos.run(tmp_path / "point.toml", overrides={"queues.count": 8, "link.rate": "40Gbps"})
    assert a.summary["scalars"] == b.summary["scalars"] == c.summary["scalars"]
    d = npqos.run(text, overrides={"queues.count": 8, "link.rate": "40Gbps"}, seed=2)
    assert d.summary["scalars"] != a.summary["scalars"]


def test_bad_input_raises_the_cli_message(root, npqos_bin, tmp_path):
    demo = root / "scenarios" / "demo.toml"
    with pytest.raises(npqos.BadInput) as e:
        npqos.run(demo, overrides={"link.rte": "10Gbps"})
    assert "link.rte" in str(e.value) and "unknown key" in str(e.value)
    assert isinstance(e.value, ValueError)
    # Missing unit: the message the CLI prints for the same file.
    bad = tmp_path / "bad.toml"
    bad.write_text(demo.read_text().replace('rate = "10Gbps"', 'rate = "10"'))
    with pytest.raises(npqos.BadInput) as e:
        npqos.run(bad)
    cli = run_cli(npqos_bin, "run", bad, "--quiet")
    assert cli.returncode == 2
    assert str(e.value) in cli.stderr
    assert "missing unit" in str(e.value) and "link.rate" in str(e.value)
    with pytest.raises(npqos.BadInput, match="cannot read scenario"):
        npqos.run(tmp_path / "absent.toml")
    with pytest.raises(npqos.BadInput, match="never None"):
        npqos.run({"run": {"duration": None}})
    with pytest.raises(npqos.BadInput, match="unknown experiment"):
        npqos.reproduce("kim-table99")


def test_reproduce_has_comparisons():
    r = npqos.reproduce("kim-table1", quick=True, seed=1)
    c = r.comparisons
    assert {"metric", "ours", "paper", "unit", "source"} <= set(c.columns)
    assert len(c) > 0 and c["paper"].notna().any()
    assert r.summary["kind"] == "reproduce"


def test_listings():
    e = npqos.experiments()
    # (Experiments over the trace corpus have no points without it: no `> 0` for all.)
    kim = e.set_index("id").loc["kim-table2"]
    # Four queue counts, and as many again for the implied-alpha variant (issue #21).
    assert kim["quick_points"] == 4 and kim["points"] == 8 and kim["paper_values"] > 0
    assert npqos.experiment("kim-table2")["paper"]
    m = npqos.models()
    assert {"link", "kim", "router"} <= set(m["name"])


def test_sizing_models_return_dicts(root):
    k = npqos.model.kim(queues=1e6, link="100Gbps", overload=1.29)
    assert k["queues"] == 1_000_000 and k["results"]["reschedules_per_s"]["value"] > 0
    d = npqos.model.dqs(slots=[64, 256], active_flows=256)
    assert len(d["points"]) == 2
    ev = npqos.model.everest(scenario=root / "scenarios" / "everest-small.toml")
    assert ev["model"] == "everest"
    with pytest.raises(npqos.BadInput, match="--queuez"):
        npqos.model.kim(queuez=5)


def _pcap(path: pathlib.Path, n: int) -> None:
    """n UDP/IPv4 Ethernet frames of 100 bytes, 1 ms apart."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for i in range(n):
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 86, i, 0, 64, 17, 0, bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
        udp = struct.pack("!HHHH", 1000 + i % 3, 53, 66, 0) + bytes(58)
        frame = bytes(12) + b"\x08\x00" + ip + udp
        out.append(struct.pack("<IIII", 1, i * 1000, len(frame), len(frame)) + frame)
    path.write_bytes(b"".join(out))


def test_trace_stats_frame(tmp_path):
    _pcap(tmp_path / "a.pcap", 5)
    _pcap(tmp_path / "b.pcap", 3)
    df = npqos.trace_stats([tmp_path / "a.pcap", tmp_path / "b.pcap"])
    assert len(df) == 3
    assert list(df["packets"]) == [5, 3, 8]
    with pytest.raises(npqos.BadInput):
        npqos.trace_stats(tmp_path / "absent.pcap")


def test_runs_release_the_gil(tmp_path):
    """A pure-Python thread keeps running while a simulation runs."""
    text = scenario_file(tmp_path, "2s").read_text()
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    t = threading.Thread(target=ticker)
    t.start()
    t0 = time.monotonic()
    npqos.run(text, threads=1)
    one = time.monotonic() - t0
    stop.set()
    t.join()
    # The ticker ran all along (it would stall for the whole run if the GIL were held).
    assert len(ticks) > one / 0.01 * 0.5, (len(ticks), one)
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) < 0.25, max(gaps)


def test_router_flows_and_classes_frames(root):
    text = (root / "scenarios" / "router-synthetic.toml").read_text().replace('duration = "500ms"', 'duration = "20ms"')
    r = npqos.run(text + "\n[stats]\nflows = 30\nheavy_flows = 4\n")
    f, c = r.flows, r.classes
    assert list(f.columns[:5]) == ["run", "replication", "seed", "flow", "class"]
    for k in ["kind", "sent_packets", "dropped_ingress_buffer_full", "overlimits", "backlog_packets", "offered_bytes_error"]:
        assert k in f.columns, k
    assert (f.kind == "exact").sum() == 30 and (f.kind == "heavy").sum() == 4 and (f.kind == "other").sum() == 1
    offered = r.scalars.set_index("name").loc["offered_packets", "value"]
    assert f[f.kind != "heavy"].offered_packets.sum() == offered
    assert sorted(c["class"]) == ["dns", "other", "web"] and c.offered_packets.sum() == offered
    assert (c.delay_p99_ns >= c.delay_p50_ns).all()
    # A model without counters gives empty frames with the columns named.
    d = npqos.run(root / "scenarios" / "demo.toml")
    assert d.flows.empty and "flow" in d.flows.columns


def _udp_capture(path, src, dst, ports):
    """A pcap of one UDP datagram from ``src`` to each of ``ports`` of ``dst``, 1 ms apart."""
    import struct

    def csum(b):
        s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
        s = (s >> 16) + (s & 0xFFFF)
        return ~(s + (s >> 16)) & 0xFFFF

    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for i, port in enumerate(ports):
        udp = struct.pack("!HHHH", 40000, port, 8, 0)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 0, 0, 64, 17, 0, bytes(src), bytes(dst))
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        frame = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + udp
        out.append(struct.pack("<IIII", 1_700_000_000, i * 1000, len(frame), len(frame)) + frame)
    path.write_bytes(b"".join(out))


def test_router_detections_frame(tmp_path):
    cap = tmp_path / "scan.pcap"
    _udp_capture(cap, [198, 18, 1, 1], [198, 18, 2, 2], range(1, 6))
    text = f"""model = "router"
[run]
duration = "1s"
[traffic]
source = "trace"
files = ["{cap}"]
[[services]]
name = "scan"
[services.function]
kind = "port-scan"
threshold = 2
"""
    r = npqos.run(text)
    d = r.detections
    assert list(d.columns[:6]) == ["run", "replication", "seed", "class", "what", "who"]
    assert len(d) == 1 and d.iloc[0].who == "198.18.1.1" and d.iloc[0]["count"] == 3
    assert r.scalars.set_index("name").loc["detections.scan", "value"] == 1
