#!/usr/bin/env python3
"""CoDel and FQ-CoDel in npqos against ns-3's CoDelQueueDisc and FqCoDelQueueDisc on the same
arrivals (docs/codel.md, "Against ns-3").

One UDP flow of IMIX frames (64, 594 and 1,500 B in 7:4:1) with Poisson arrivals at a given
multiple of a 10 Mbps link, written as a pcap; npqos runs it as a router trace scenario
(processing none, an ideal queue memory, no shaper, CoDel on the flow's queue, the 10 Mbps
link), and ns-3 sends the same packets at the same times from a UDP socket over a 10 Mbps
point-to-point link with CoDelQueueDisc as its root queue disc (the device's own queue one
packet deep, so that the queue disc holds the backlog, as npqos's link picks one packet ahead).
Each packet's wire bytes are the same on both sides (ns-3's UDP payload is the frame's length
less 30 B: PPP 2, IPv4 20, UDP 8). Printed: the packets dropped or marked, and the end-to-end
delay percentiles (arrival to the last bit delivered), side by side.

    python3 -m venv /tmp/ns3venv && /tmp/ns3venv/bin/pip install ns3==3.44.post0
    /tmp/ns3venv/bin/python scripts/ns3_codel.py --npqos target/release/npqos

With --qdisc fq_codel: eight UDP flows (source ports 5000-5007) share the load, one heavy
(47% of it), three medium (15.6% each), four light (1.6% each); npqos runs them through its
fq-codel ingress (1,024 queues, quantum 1,502 B: ns-3's 1,500 B of IP packet plus the 2 B
that npqos counts more per packet) into one processor whose time per byte is the 10 Mbps
link's (so the processor is the bottleneck the queue disc feeds), out over a 100 Gbps link;
ns-3 runs FqCoDelQueueDisc as the root queue disc of the 10 Mbps link. Printed per flow: sent,
dropped, the mean and largest delay, and the totals and percentiles.

    /tmp/ns3venv/bin/python scripts/ns3_codel.py --qdisc fq_codel --load 1.28

Options: --qdisc (codel, fq_codel), --load (1.2), --seconds (10), --ecn (ECT(0) packets,
CoDel marking), --target, --interval, --seed, --runs-dir.
"""

import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

RATE_BPS = 10_000_000
# Frame bytes, weights: IMIX. The largest is 1,500 B so that ns-3's IP packet (the frame less
# PPP's 2 B) fits its point-to-point MTU unfragmented.
SIZES = [(64, 7), (594, 4), (1500, 1)]
# FQ-CoDel's flows: (share of the load, name), source ports 5000 + index.
FQ_FLOWS = [(0.47, "heavy")] + [(0.156, "medium")] * 3 + [(0.0165, "light")] * 4


def arrivals(load, seconds, seed, flow=0):
    """(time ns, frame bytes, flow) of a Poisson process carrying `load` x the link in IMIX
    frames."""
    rng = random.Random(seed if flow == 0 else seed * 1000 + flow)
    mean = sum(s * w for s, w in SIZES) / sum(w for _, w in SIZES)
    rate_pps = load * RATE_BPS / (mean * 8)
    pool = [s for s, w in SIZES for _ in range(w)]
    t, out = 0.0, []
    while True:
        t += rng.expovariate(rate_pps)
        if t >= seconds:
            return out
        out.append((int(t * 1e9), rng.choice(pool), flow))


def fq_arrivals(load, seconds, seed):
    """FQ_FLOWS' packets, merged in time order (ties by flow)."""
    pkts = [p for i, (share, _) in enumerate(FQ_FLOWS) for p in arrivals(load * share, seconds, seed, i)]
    return sorted(pkts)


def write_pcap(path, pkts, ecn):
    """A nanosecond pcap of Ethernet/IPv4/UDP frames of one flow (TOS ECT(0) with `ecn`)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for t, n, flow in pkts:
            ip_len = n - 14
            ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0x02 if ecn else 0, ip_len, 0, 0x4000, 64, 17, 0,
                                       bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2])))
            s = sum(struct.unpack("!10H", ip))
            s = (s & 0xFFFF) + (s >> 16)
            ip[10:12] = struct.pack("!H", ~((s & 0xFFFF) + (s >> 16)) & 0xFFFF)
            udp = struct.pack("!HHHH", 5000 + flow, 6000, ip_len - 20, 0)
            frame = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + bytes(ip) + udp
            frame += bytes(n - len(frame))
            f.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, n, n))
            f.write(frame)


def percentiles(v, qs=(0.5, 0.9, 0.99, 0.999)):
    v = sorted(v)
    return [v[min(len(v) - 1, int(math.ceil(q * len(v))) - 1)] if v else float("nan") for q in qs]


def head_toml(pcap, seconds):
    """The scenario's start: the router on the pcap's arrivals, run until every packet left."""
    return f"""model = "router"
[run]
seed = 1
duration = "{seconds}s"
[router]
drain = "10s"
[traffic]
source = "trace"
files = ["{pcap}"]
"""


def fq_toml(pcap, seconds, args):
    """The router as FQ-CoDel on a 10 Mbps bottleneck: the fq-codel ingress served by one
    processor taking 800 ns per byte."""
    return head_toml(pcap, seconds) + f"""[ingress]
kind = "fq-codel"
codel_target = "{args.target}ms"
codel_interval = "{args.interval}ms"
ecn = {"true" if args.ecn else "false"}
quantum = "1502B"
[processing]
processors = 1
policy = "static"
[queue_memory]
subsystem = "ideal"
[shaping]
shaper = "none"
[link]
rate = "100Gbps"
[[services]]
name = "all"
cost_alpha = "0ns"
cost_beta = "800ns"
tolerance = "100s"
{"ecn = true" if args.ecn else ""}
"""


def run_npqos(npqos, pcap, seconds, args, out):
    aqm = "aqm = \"codel\"\ncodel_target = \"{}ms\"\ncodel_interval = \"{}ms\"\necn = {}".format(
        args.target, args.interval, "true" if args.ecn else "false")
    toml = fq_toml(pcap, seconds, args) if args.qdisc == "fq_codel" else head_toml(pcap, seconds) + f"""[processing]
policy = "none"
[queue_memory]
subsystem = "ideal"
[shaping]
shaper = "none"
{aqm}
[link]
rate = "10Mbps"
[output]
pcap = ["egress"]
pcap_snaplen = "64B"
[[services]]
name = "all"
{"ecn = true" if args.ecn else ""}
"""
    path = os.path.join(out, "codel.toml")
    with open(path, "w") as f:
        f.write(toml)
    subprocess.run([npqos, "run", path, "--out", os.path.join(out, "npqos"), "--quiet"], check=True)
    s = json.load(open(os.path.join(out, "npqos", "summary.json")))["runs"][0]["scalars"]
    flows = {}
    with open(os.path.join(out, "npqos", "flows.csv")) as f:
        head = f.readline().strip().split(",")
        for line in f:
            r = dict(zip(head, line.strip().split(",")))
            port = r.get("flow", "").split(" -> ")[0].rsplit(":", 1)[-1]
            if port.isdigit():
                flows[int(port) - 5000] = r
    return s, flows


def run_ns3(pkts, seconds, args):
    from ns import ns  # noqa: E402 (the ns3 package is only needed here)
    import cppyy

    cppyy.cppdef(r"""
    #include <vector>
    #include <map>
    namespace npqos_v {
      using namespace ns3;
      std::map<uint64_t, std::pair<int64_t, int>> sent;
      std::vector<int64_t> delays;
      std::vector<int> flows;
      void Send(Ptr<Socket> s, uint32_t payload, int flow) {
        Ptr<Packet> p = Create<Packet>(payload);
        sent[p->GetUid()] = {Simulator::Now().GetNanoSeconds(), flow};
        s->Send(p);
      }
      void Schedule(std::vector<Ptr<Socket>> s, std::vector<int64_t> t, std::vector<uint32_t> payload,
                    std::vector<int> flow) {
        for (size_t i = 0; i < t.size(); i++)
          Simulator::Schedule(NanoSeconds(t[i]), &Send, s[flow[i]], payload[i], flow[i]);
      }
      void Rx(Ptr<const Packet> p, const Address &) {
        auto it = sent.find(p->GetUid());
        if (it != sent.end()) {
          delays.push_back(Simulator::Now().GetNanoSeconds() - it->second.first);
          flows.push_back(it->second.second);
        }
      }
      void Connect(Ptr<Application> sink) {
        sink->TraceConnectWithoutContext("Rx", MakeCallback(&Rx));
      }
    }
    """)
    v = cppyy.gbl.npqos_v
    nodes = ns.NodeContainer()
    nodes.Create(2)
    p2p = ns.PointToPointHelper()
    p2p.SetDeviceAttribute("DataRate", ns.StringValue("10Mbps"))
    p2p.SetChannelAttribute("Delay", ns.StringValue("0ms"))
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue("1p"))
    devs = p2p.Install(nodes)
    stack = ns.InternetStackHelper()
    stack.Install(nodes)
    tch = ns.TrafficControlHelper()
    if args.qdisc == "fq_codel":
        # Quantum: the device's MTU (1,500 B of IP packet); 1,024 flows, drop batch 64.
        tch.SetRootQueueDisc("ns3::FqCoDelQueueDisc",
                             "MaxSize", ns.StringValue("1000000p"),
                             "Target", ns.StringValue(f"{args.target}ms"),
                             "Interval", ns.StringValue(f"{args.interval}ms"),
                             "UseEcn", ns.BooleanValue(bool(args.ecn)))
    else:
        tch.SetRootQueueDisc("ns3::CoDelQueueDisc",
                             "MaxSize", ns.StringValue("1000000p"),
                             "Target", ns.StringValue(f"{args.target}ms"),
                             "Interval", ns.StringValue(f"{args.interval}ms"),
                             "MinBytes", ns.UintegerValue(1514),
                             "UseEcn", ns.BooleanValue(bool(args.ecn)))
    qdiscs = tch.Install(devs)
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("198.18.0.0"), ns.Ipv4Mask("255.255.255.0"))
    ifs = addr.Assign(devs)
    sink_helper = ns.PacketSinkHelper("ns3::UdpSocketFactory",
                                      ns.InetSocketAddress(ns.Ipv4Address.GetAny(), 6000).ConvertTo())
    sinks = sink_helper.Install(nodes.Get(1))
    sinks.Start(ns.Seconds(0))
    v.Connect(sinks.Get(0))
    socks = cppyy.gbl.std.vector["ns3::Ptr<ns3::Socket>"]()
    for i in range(max(f for _, _, f in pkts) + 1):
        sock = ns.Socket.CreateSocket(nodes.Get(0), ns.TypeId.LookupByName("ns3::UdpSocketFactory"))
        sock.Bind(ns.InetSocketAddress(ns.Ipv4Address.GetAny(), 5000 + i).ConvertTo())
        if args.ecn:
            sock.SetIpTos(0x02)
        sock.Connect(ns.InetSocketAddress(ifs.GetAddress(1), 6000).ConvertTo())
        socks.push_back(sock)
    ts = cppyy.gbl.std.vector["int64_t"]([t for t, _, _ in pkts])
    pl = cppyy.gbl.std.vector["uint32_t"]([n - 30 for _, n, _ in pkts])
    fl = cppyy.gbl.std.vector["int"]([f for _, _, f in pkts])
    v.Schedule(socks, ts, pl, fl)
    ns.Simulator.Stop(ns.Seconds(seconds + 10))
    ns.Simulator.Run()
    q = qdiscs.Get(0)
    st = q.GetStats()
    # FqCoDelQueueDisc counts its flows' CoDel drops and marks under their own reasons;
    # everything its queues dropped after a dequeue is CoDel's, before an enqueue its overflow.
    dropped = sum(v for _, v in st.nDroppedPacketsAfterDequeue)
    marked = sum(v for _, v in st.nMarkedPackets)
    overlimit = sum(v for _, v in st.nDroppedPacketsBeforeEnqueue)
    delays = list(v.delays)
    flows = list(v.flows)
    ns.Simulator.Destroy()
    return dropped, marked, delays, flows, overlimit


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--npqos", default="target/release/npqos")
    ap.add_argument("--qdisc", choices=["codel", "fq_codel"], default="codel")
    ap.add_argument("--load", type=float, default=1.2)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--ecn", action="store_true")
    ap.add_argument("--target", type=float, default=5)
    ap.add_argument("--interval", type=float, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs-dir", default=None)
    args = ap.parse_args()
    out = args.runs_dir or tempfile.mkdtemp(prefix="npqos-ns3-")
    os.makedirs(out, exist_ok=True)
    pkts = (fq_arrivals if args.qdisc == "fq_codel" else arrivals)(args.load, args.seconds, args.seed)
    pcap = os.path.join(out, "arrivals.pcap")
    write_pcap(pcap, pkts, args.ecn)
    s, our_flows = run_npqos(os.path.abspath(args.npqos), pcap, args.seconds, args, out)
    dropped, marked, delays, delay_flows, overlimit = run_ns3(pkts, args.seconds, args)
    ours = [s.get(k, float("nan")) for k in ("e2e_p50", "e2e_p99", "e2e_p999")]
    theirs = [d / 1e3 for d in percentiles(delays, (0.5, 0.99, 0.999))]
    qdisc = "FqCoDelQueueDisc" if args.qdisc == "fq_codel" else "CoDelQueueDisc"
    print(f"{len(pkts)} packets, load {args.load} x 10 Mbps, {args.seconds} s, {args.qdisc}, target {args.target} ms, "
          f"interval {args.interval} ms, ECN {'on' if args.ecn else 'off'}, seed {args.seed}")
    print(f"| | npqos | ns-3 {qdisc} | difference |")
    print("|---|---|---|---|")
    rows = [
        ("dropped by CoDel", s.get("dropped_codel", 0), dropped),
        ("marked CE", s.get("ecn_marked", 0), marked),
        ("dropped, buffer full", s.get("dropped_ingress_buffer_full", 0), overlimit),
        ("delivered", s.get("delivered_packets", 0), len(delays)),
        ("e2e p50 (us)", ours[0], theirs[0]),
        ("e2e p99 (us)", ours[1], theirs[1]),
        ("e2e p99.9 (us)", ours[2], theirs[2]),
    ]
    for name, a, b in rows:
        diff = (a - b) / b * 100 if b else float("nan")
        print(f"| {name} | {a:.0f} | {b:.0f} | {diff:+.2f}% |")
    if args.qdisc == "fq_codel":
        print()
        print("| flow | offered | delivered npqos | ns-3 | mean delay (ms) npqos | ns-3 | largest (ms) npqos | ns-3 |")
        print("|---|---|---|---|---|---|---|---|")
        for i, (_, name) in enumerate(FQ_FLOWS):
            mine = [d for d, f in zip(delays, delay_flows) if f == i]
            r = our_flows.get(i, {})
            sent = int(r.get("sent_packets", 0))
            mean = float(r.get("delay_mean_ns", "nan")) / 1e6
            big = float(r.get("delay_max_ns", "nan")) / 1e6
            offered = sum(1 for p in pkts if p[2] == i)
            ns_mean = sum(mine) / len(mine) / 1e6 if mine else float("nan")
            ns_max = max(mine) / 1e6 if mine else float("nan")
            print(f"| {i} {name} | {offered} | {sent} | {len(mine)} | {mean:.2f} | {ns_mean:.2f} | {big:.1f} | {ns_max:.1f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
