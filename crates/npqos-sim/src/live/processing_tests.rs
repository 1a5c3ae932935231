//! Processors on real frames, on a simulated clock: the forwarder with `[processing]` runs the
//! services' packet functions on its virtual processors, forwards every frame in order, and
//! gives what the simulator's router gives on the same frames at the same times.

use super::*;
use crate::trace::writer::{tcp4_frame, PcapWriter};
use npqos_core::Duration;
use std::path::Path;

/// Two services as Everest's prototype's, four processors, 100 us per packet.
const CONFIG: &str = r#"[live]
input = "in0"
output = "out0"
sample_every = "10ms"
[processing]
processors = 4
policy = "everest"
t_sw = "2ms"
scheduler = "fcfs"
[[services]]
name = "scan"
dst_prefixes = ["198.18.2.0/24"]
cost_alpha = "100us"
cost_beta = "0ns"
tolerance = "2ms"
[services.function]
kind = "port-scan"
[[services]]
name = "syn"
cost_alpha = "100us"
cost_beta = "0ns"
tolerance = "2ms"
[services.function]
kind = "syn-flood"
"#;

/// 300 SYNs of a scan of 198.18.2.2 from 198.18.1.1 (one port each) and 400 SYNs of a flood
/// of 198.18.5.5 from 200 sources, 1 ms apart, interleaved: (time ns, frame).
fn frames() -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for i in 0..400u16 {
        let t = 1_000_000 + i as u64 * 1_000_000;
        if i < 300 {
            out.push((t, tcp4_frame([198, 18, 1, 1], [198, 18, 2, 2], 40000, 1 + i, true, false, 0)));
        }
        out.push((
            t + 400_000,
            tcp4_frame([198, 18, 6, (i % 200) as u8], [198, 18, 5, 5], 10000 + i, 80, true, false, 0),
        ));
    }
    out
}

/// Drives a forwarder of `CONFIG` with `frames` at their times, waking it at exactly its
/// `next_wakeup()` and taking every frame it gives: the forwarder and the frames out, in order.
fn drive(frames: &[(u64, Vec<u8>)]) -> (Forwarder, Vec<Vec<u8>>) {
    let spec = spec::read(&toml::from_str(CONFIG).unwrap(), "t.toml").unwrap_or_else(|p| panic!("{p}"));
    let mut fw = Forwarder::new(&spec, 2048).unwrap();
    let mut out = Vec::new();
    let mut next = 0;
    let mut last = 0;
    loop {
        let ta = frames.get(next).map_or(u64::MAX, |f| f.0);
        let tw = fw.next_wakeup().map_or(u64::MAX, Instant::as_nanos);
        if ta == u64::MAX && tw == u64::MAX {
            break;
        }
        let now = Instant::from_nanos(ta.min(tw));
        assert!(now.as_nanos() >= last, "time goes forward");
        last = now.as_nanos();
        if tw < ta {
            fw.wake(now).unwrap();
        } else {
            fw.receive(&frames[next].1, now);
            next += 1;
        }
        if last >= 1_000_000 && (last / 10_000_000) != ((last - 1) / 10_000_000) {
            fw.sample(now);
        }
        fw.transmit(now, usize::MAX, |f| out.push(f.to_vec())).unwrap();
    }
    fw.sample(Instant::from_nanos(last));
    (fw, out)
}

/// Every frame goes through its service's processors and out, in order; each function finds
/// what its service's frames hold (the scan at its 101st port, the flood at its 101st half-open
/// connection, 100 ms after the first frame plus the time on a processor); the processors
/// follow the load (the flood has more frames, so it holds more processors at the end).
#[test]
fn the_forwarder_runs_the_detectors_on_its_processors() {
    let input = frames();
    let (fw, out) = drive(&input);
    assert_eq!(out.len(), input.len(), "every frame forwarded");
    let mut sorted: Vec<&Vec<u8>> = input.iter().map(|f| &f.1).collect();
    // Within a flow (a service's frames here are one flow each way), the order is kept.
    let key = |f: &[u8]| (f[26..30].to_vec(), f[30..34].to_vec());
    for k in [key(&input[0].1), key(&input[1].1)] {
        let a: Vec<_> = sorted.iter().filter(|f| key(f) == k).collect();
        let b: Vec<_> = out.iter().filter(|f| key(f) == k).collect();
        assert_eq!(a.len(), b.len());
        assert!(a.iter().zip(&b).all(|(x, y)| **x == *y), "the flow's order is kept");
    }
    sorted.clear();
    fw.check().unwrap();
    let r = fw.result(500_000_000, true, "end", &[]);
    let got: Vec<_> =
        r.detections.iter().map(|d| (d.class.as_str(), d.what.as_str(), d.who.as_str(), d.count)).collect();
    assert_eq!(got, [("scan", "port_scan", "198.18.1.1", 101), ("syn", "syn_flood", "198.18.5.5", 101)]);
    // From the first frame: the scan's 101st SYN arrived 100 ms later, the flood's 100.4 ms
    // later; a processor finished each 100 us after.
    assert_eq!(r.detections[0].at_ns, 100_100_000);
    assert_eq!(r.detections[1].at_ns, 100_500_000);
    assert_eq!(r.get("detections.scan"), Some(1.0));
    assert_eq!(r.get("late_packets"), Some(0.0));
    assert_eq!((r.get("dropped_late"), r.get("dropped_egress_buffer_full")), (Some(0.0), Some(0.0)));
    assert_eq!(r.get("frames_out"), Some(input.len() as f64));
    let procs = r.series.iter().find(|s| s.name == "processors.syn").expect("processors.syn");
    assert!(procs.points.iter().all(|p| p.1 >= 1.0), "each service holds a processor: {:?}", procs.points);
    assert!(r.series.iter().any(|s| s.name == "offered_rate.scan"));
}

fn capture(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut w = PcapWriter::new(std::fs::File::create(path).unwrap(), 1, 65535, true, false).unwrap();
    for (t, f) in frames {
        w.write(1_700_000_000_000_000_000 + t, f, f.len() as u32).unwrap();
    }
}

/// The simulator's router on the same frames (`npqos live --as-scenario`'s scenario) gives the
/// same reports at the same times and the same late packets: one pipeline, two drivers.
#[test]
fn the_simulator_gives_what_the_forwarder_gives() {
    let input = frames();
    let (fw, _) = drive(&input);
    let live = fw.result(500_000_000, true, "end", &[]);
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("c.pcap");
    capture(&cap, &input);
    let spec = spec::read(&toml::from_str(CONFIG).unwrap(), "t.toml").unwrap();
    let table = simulate::router_scenario(&spec, &cap, Duration::from_millis(50), 1).unwrap();
    let sc = crate::scenario::Scenario::from_table(&table, "t", Path::new(".")).unwrap();
    let sim = crate::models::router::scenario::run_scenario(&sc, 1, 1, None, &mut |_| {}).unwrap();
    // Both count time from the first frame.
    let key = |d: &crate::results::DetectionRecord| (d.class.clone(), d.who.clone(), d.count, d.at_ns);
    let a: Vec<_> = live.detections.iter().map(key).collect();
    let b: Vec<_> = sim.detections.iter().map(key).collect();
    assert_eq!(a, b);
    assert_eq!(sim.get("late_packets"), live.get("late_packets"));
    assert_eq!(sim.get("delivered_packets"), Some(input.len() as f64));
}

/// A live file's `[processing]` and `[output]`: a packet function without processors, a
/// processing time that varies, an unknown port and a zero limit are refused with their keys;
/// the keys are written back.
#[test]
fn live_processing_and_output_keys_are_checked() {
    let read = |t: &str| spec::read(&toml::from_str(t).unwrap(), "t.toml");
    let base = "[live]\ninput = \"a\"\noutput = \"b\"\n[[services]]\nname = \"s\"\n[services.function]\nkind = \"syn-flood\"\n";
    let e = read(base).unwrap_err().to_string();
    assert!(e.contains("services[0].function") && e.contains("[processing]"), "{e}");
    // With processors it is a live file like any other.
    read(&format!("{base}[processing]\npolicy = \"static\"\n")).unwrap_or_else(|e| panic!("{e}"));
    let varied =
        base.replace("name = \"s\"\n", "name = \"s\"\nvariation = 0.2\n") + "[processing]\npolicy = \"everest\"\n";
    let e = read(&varied).unwrap_err().to_string();
    assert!(e.contains("services[0].variation"), "{e}");
    let e = read(&format!("{base}[processing]\npolicy = \"everest\"\n[output]\npcap = [\"wire\"]\npcap_limit = 0\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("output.pcap") && e.contains("output.pcap_limit"), "{e}");
    let good =
        read(&format!("{base}[processing]\npolicy = \"everest\"\nprocessors = 4\n[output]\npcap = [\"drops\"]\n"))
            .unwrap();
    let again = spec::read(&good.to_toml(), "resolved.toml").unwrap();
    assert_eq!(again, good);
    assert_eq!(good.processing.as_ref().unwrap().processors, 4);
    assert_eq!(good.capture.pcap, [npqos_core::pipeline::router::Port::Drops]);
}
