//! The pipeline without the engine: driven by a test's own loop, as a data plane would drive
//! it, and with processing none checked against `npqos live`'s forwarder on the same frames.

use super::pipeline::{Arrival, Effects, Ev, Pipeline, Trace, C_ARRIVAL, NO_HINT, NO_SLOT};
use super::*;
use crate::live::{spec as live_spec, Forwarder};
use crate::models::router::tests::{synthetic, transparent};
use npqos_core::flow::FlowKey;
use npqos_core::Instant;
use npqos_core::Rate;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Drives `pipe` on `arrivals` (in time order) with a loop of its own: the timed effects in a
/// heap by (time, class, order given), the pipeline's deadline, the next arrival (class
/// [`C_ARRIVAL`]); the lowest (time, class) first. Returns the pipeline's trace.
fn drive(mut pipe: Pipeline, arrivals: &[Arrival]) -> Vec<Trace> {
    let mut fx = Effects::default();
    let mut timed: BinaryHeap<Reverse<(u64, u8, u64)>> = BinaryHeap::new();
    let mut evs: Vec<Ev> = Vec::new();
    let mut next = 0;
    let mut now = 0;
    loop {
        for t in fx.0.drain(..) {
            timed.push(Reverse((t.at.as_nanos(), t.class, evs.len() as u64)));
            evs.push(t.ev);
        }
        assert!(pipe.error().is_none(), "{:?}", pipe.error());
        let effect = timed.peek().map(|Reverse((t, c, _))| (*t, *c));
        let wake = pipe.next_wakeup().map(|(t, c)| (t.as_nanos(), c));
        let arrival = arrivals.get(next).map(|a| (a.t, C_ARRIVAL));
        let Some(first) = [effect, wake, arrival].into_iter().flatten().min() else { break };
        assert!(first.0 >= now, "time goes forward");
        now = first.0;
        let at = Instant::from_nanos(now);
        if Some(first) == effect {
            let Reverse((_, _, i)) = timed.pop().expect("peeked");
            pipe.handle(at, evs[i as usize], &mut fx);
        } else if Some(first) == wake {
            pipe.wake(at, &mut fx);
        } else {
            pipe.receive(std::slice::from_ref(&arrivals[next]), &mut fx);
            next += 1;
        }
    }
    pipe.take_trace().expect("traced")
}

/// A UDP frame of flow `f`, `payload` bytes of payload.
fn frame(f: u16, payload: usize) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(5000 + f, 6000);
    let mut out = Vec::with_capacity(b.size(payload));
    b.write(&mut out, &vec![0u8; payload]).expect("a frame");
    out
}

fn flow_of(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[34], frame[35]]) - 5000
}

/// `flows` UDP flows, flow f offering `rates[f % rates.len()]` bits/s of `payload`-byte
/// datagrams from a start staggered by f us, for `secs`: (time ns, flow) in time order.
fn offered(flows: u16, rates: &[f64], payload: usize, secs: f64) -> Vec<(u64, u16)> {
    let len = frame(0, payload).len() as f64;
    let mut out = Vec::new();
    for f in 0..flows {
        let gap = (len * 8e9 / rates[f as usize % rates.len()]) as u64;
        let mut t = 1_000 + f as u64 * 1_000;
        while t <= (secs * 1e9) as u64 {
            out.push((t, f));
            t += gap;
        }
    }
    out.sort();
    out
}

/// The same dqs table, buckets, rate and conformance as a live file, as router parameters
/// with processing none, one per-flow-shaped service and a link fast enough that a packet
/// picked starts at once; `link_ahead` large, so every packet the shaper lets go at an
/// instant is picked at that instant, as live's transmit with room for all.
fn router_of(live: &crate::live::LiveSpec) -> RouterParams {
    let mut p = transparent(1, 0.0, Rate::from_bits_per_sec(1 << 50));
    p.processing.policy = Allocation::None;
    p.ingress = npqos_core::pipeline::IngressKind::Dqs;
    p.table = live.table;
    p.quantum = live.table.quantum;
    p.link_ahead = 1 << 20;
    p.services[0].rate = Some(live.flow_rate);
    p.services[0].per_flow = true;
    p.shaping.kind = ShaperKind::Event {
        alpha_bytes: live.bucket.alpha,
        locked_bytes: 0,
        tick_shift: 6,
        adaptive: None,
        timer: npqos_core::shaper::Timer::Heap,
    };
    p.shaping.cap_bytes = live.bucket.cap;
    p.shaping.conformance = live.bucket.conformance;
    // Live's pool: two buckets per physical queue.
    p.shaping.flow_queues = 2 * live.table.queues;
    p.sample_every = Duration::ZERO;
    p
}

/// Processing none is live's pipeline: on the same frames (12 flows, 8 of them above the
/// 10 Mbps flow rate, for 0.3 s), the router's pipeline with processing none sends each
/// flow's packets at the same instants as live's forwarder driven on a simulated clock, and
/// drops the same ones, under send-then-pay and wait-for-tokens, and with a buffer too small
/// for the backlog (dqs's drops). (The forwarder is driven as
/// live's own tests drive it: wake, receive, transmit with room for every frame.)
#[test]
fn processing_none_sends_what_live_sends() {
    for (conformance, blocks) in [("send-then-pay", 65_536), ("wait-for-tokens", 65_536), ("send-then-pay", 4_096)] {
        let text = format!(
            "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"1s\"\n[shaper]\nflow_rate = \"10Mbps\"\n\
             conformance = \"{conformance}\"\n[table]\nqueues = 64\nblocks = {blocks}\n"
        );
        let root: toml::Table = toml::from_str(&text).expect("toml");
        let spec = live_spec::read(&root, "t.toml").unwrap_or_else(|p| panic!("{p}"));
        assert_eq!(spec.bucket.timer, npqos_core::shaper::Timer::Heap, "the router's shaper files in heaps");
        let arrivals = offered(12, &[15e6, 15e6, 5e6], 1_000, 0.3);

        // Live, on a simulated clock.
        let mut fw = Forwarder::new(&spec, 9_000).expect("a forwarder");
        let mut live_sent: Vec<Vec<u64>> = vec![Vec::new(); 12];
        let mut live_dropped = vec![0u32; 12];
        let emit = |now: Instant, fw: &mut Forwarder, sent: &mut Vec<Vec<u64>>| {
            fw.transmit(now, usize::MAX, |fr| sent[flow_of(fr) as usize].push(now.as_nanos())).expect("transmit");
        };
        let mut i = 0;
        loop {
            let ta = arrivals.get(i).map_or(u64::MAX, |a| a.0);
            let tw = fw.next_wakeup().map_or(u64::MAX, |w| w.as_nanos());
            if ta == u64::MAX && tw == u64::MAX {
                break;
            }
            let now = Instant::from_nanos(ta.min(tw));
            fw.wake(now).expect("wake");
            if ta <= tw {
                let f = arrivals[i].1;
                if let crate::live::Arrival::Dropped(_) = fw.receive(&frame(f, 1_000), now) {
                    live_dropped[f as usize] += 1;
                }
                i += 1;
            }
            emit(now, &mut fw, &mut live_sent);
        }

        // The router's pipeline, processing none, on the same frames.
        let p = router_of(&spec);
        let traffic = synthetic(1, 1_000);
        let pipe = Pipeline::new(Arc::new(p.clone()), traffic.mean_len(), 1, true).expect("a valid router");
        let rs: Vec<Arrival> = arrivals
            .iter()
            .map(|&(t, f)| {
                let fr = frame(f, 1_000);
                let m = crate::trace::decode::decode(&crate::trace::reader::Record {
                    ts_ns: t,
                    orig_len: fr.len() as u32,
                    link: crate::trace::reader::linktype::ETHERNET,
                    data: &fr,
                    offset: 0,
                })
                .expect("an IP frame");
                let key: FlowKey = m.flow;
                Arrival {
                    t,
                    len: fr.len() as u32,
                    service: 0,
                    eq: 1,
                    hint: NO_HINT,
                    actual: 0.0,
                    key,
                    row: f as u32,
                    tcp_flags: None,
                    slot: NO_SLOT,
                }
            })
            .collect();
        let trace = drive(pipe, &rs);
        let mut router_sent: Vec<Vec<u64>> = vec![Vec::new(); 12];
        let mut router_dropped = vec![0u32; 12];
        for (x, &(_, f)) in trace.iter().zip(&arrivals) {
            match (x.delivered, x.drop) {
                (Some(_), _) => router_sent[f as usize].push(x.dispatch),
                (None, Some(_)) => router_dropped[f as usize] += 1,
                (None, None) => panic!("a packet neither sent nor dropped"),
            }
        }
        for f in 0..12 {
            router_sent[f].sort_unstable();
            live_sent[f].sort_unstable();
        }
        assert_eq!(router_dropped, live_dropped, "{conformance}: drops per flow");
        for f in 0..12 {
            assert_eq!(router_sent[f], live_sent[f], "{conformance}: flow {f}'s send times");
        }
        let drops: u32 = live_dropped.iter().sum();
        if blocks < 65_536 {
            assert!(drops > 0, "the small buffer drops");
            continue;
        }
        assert_eq!(drops, 0, "{conformance}: the large buffer holds every backlog");
        // A flow above the rate was held to it (within 2%, from its first send to its last);
        // one below it was not.
        let len = frame(0, 1_000).len() as f64;
        let rate = |f: usize| {
            let t = &router_sent[f];
            (t.len() - 1) as f64 * len * 8e9 / (t[t.len() - 1] - t[0]) as f64
        };
        assert!((rate(0) / 10e6 - 1.0).abs() < 0.02, "{conformance}: flow 0 at {} bps", rate(0));
        assert!((rate(2) / 5e6 - 1.0).abs() < 0.02, "{conformance}: flow 2 at {} bps", rate(2));
    }
}

/// What processing none asks of the rest is refused with the key to change.
#[test]
fn processing_none_refuses_what_it_cannot_shape() {
    let base = || {
        let mut p = transparent(1, 0.0, Rate::gbps(1));
        p.processing.policy = Allocation::None;
        p.ingress = npqos_core::pipeline::IngressKind::Dqs;
        p.table.queues = 64;
        p.services[0].rate = Some(Rate::from_bits_per_sec(10_000_000));
        p.services[0].per_flow = true;
        p.shaping.kind = ShaperKind::Event {
            alpha_bytes: 1_500,
            locked_bytes: 0,
            tick_shift: 6,
            adaptive: None,
            timer: npqos_core::shaper::Timer::Heap,
        };
        p.shaping.flow_queues = 128;
        p
    };
    let traffic = synthetic(1, 1_000);
    assert!(Pipeline::new(Arc::new(base()), traffic.mean_len(), 1, false).is_ok());
    type Change = fn(&mut RouterParams);
    let cases: [(&str, Change); 4] = [
        ("ingress.kind", |p| p.ingress = npqos_core::pipeline::IngressKind::Hashed),
        ("queue_memory.subsystem", |p| p.qmem.subsystem = Some(npqos_core::queues::timing::Subsystem::Qc)),
        ("shaping.shaper = \"event\"", |p| {
            p.services[0].per_flow = false;
            p.shaping.kind = ShaperKind::Periodic { period: Duration::from_micros(100) };
        }),
        ("shaping.flow_queues", |p| p.shaping.flow_queues = 63),
    ];
    for (key, change) in cases {
        let mut p = base();
        change(&mut p);
        match Pipeline::new(Arc::new(p.clone()), traffic.mean_len(), 1, false) {
            Err(PipelineError::Config(msg)) => assert!(msg.contains(key), "{key}: {msg}"),
            Err(e) => panic!("{key}: {e}"),
            Ok(_) => panic!("{key}: accepted"),
        }
    }
}

/// `policy = "none"` from a scenario file: the synthetic example without its processors (an
/// ideal queue memory, its class rate taken out, a bucket per ingress queue and more) runs
/// and delivers every packet, each flow below its per-flow rate; with the class rate left in
/// it runs too, the class's flows' queues sharing one bucket.
#[test]
fn processing_none_from_a_scenario_file() {
    let example = include_str!("../../../../../scenarios/router-synthetic.toml");
    let none = example
        .replace("policy = \"everest\"", "policy = \"none\"")
        .replace("subsystem = \"qc\"", "subsystem = \"ideal\"");
    let run = |text: &str| {
        let sc = crate::scenario::Scenario::parse(text, "none.toml", std::path::Path::new(".")).expect("parses");
        let r = sc.spec_as::<crate::models::router::scenario::RouterSpec>().expect("a router scenario");
        let d = Duration::from_millis(50);
        let traffic = r.traffic(d).expect("traffic");
        let mut p = r.params.clone();
        p.duration = d;
        crate::models::router::run(&p, &traffic, 1, 1, None, &mut |_| {})
    };
    // The class rate: one bucket over the class's flows' queues (shared buckets).
    let r = run(&none).expect("a class rate under processing none runs");
    assert!(r.get("offered_packets.other").unwrap() > 1_000.0);
    let class_rate = "rate = \"1500Mbps\"             # the class together\nrate_per = \"class\"";
    assert!(none.contains(class_rate), "the example's class rate");
    let ok = none.replace(class_rate, "").replace("alpha = \"1500B\"", "alpha = \"1500B\"\nflow_queues = 8192");
    let r = run(&ok).expect("runs");
    let g = |k: &str| r.get(k).unwrap_or_else(|| panic!("{k}"));
    assert!(g("offered_packets.web") > 10_000.0);
    assert_eq!(g("dropped_packets"), 0.0);
    assert_eq!(
        g("delivered_packets"),
        g("offered_packets.web") + g("offered_packets.dns") + g("offered_packets.other")
    );
    assert_eq!(g("context_switches"), 0.0);
    assert!(r.series.iter().all(|s| !s.name.starts_with("processors.")), "no processor series");
}
