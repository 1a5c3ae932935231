//! The simulator checked against the wire (docs/live.md, "The simulator against the wire"): a
//! live configuration as the router scenario that runs the same pipeline
//! ([`LiveSpec::router_params`]) over a capture as tcpreplay sends it through `npqos live`.
//!
//! The router's trace path is made the replay's: one file, one copy (`flow_multiply = 1`), the
//! capture's own timing (`time_scale = 1`, no gap capped: `max_gap` above the capture's span),
//! its first packet at time 0 (tcpreplay starts there too), its non-IP frames left out (they
//! are counted in the trace's `non_ip_packets`; npqos live passes them unshaped). The run lasts
//! the capture, and `router.drain` lets the shaper send what it holds, as npqos live does after
//! the replay ends. The capture must be Ethernet (what tcpreplay puts on a veth): others are
//! refused with the `npqos trace ethernet` command that makes them so.

use super::LiveSpec;
use crate::models::router::scenario::{RouterSpec, TrafficSpec};
use crate::scenario::flows::FlowTraffic;
use crate::trace::reader::TraceReader;
use npqos_core::Duration;
use std::path::Path;

/// Link type of Ethernet captures.
const ETHERNET: u16 = 1;

/// The capture's span (first to last record) and record count, or why it cannot be replayed.
pub fn capture_span(capture: &Path) -> Result<(Duration, u64), String> {
    let mut r = TraceReader::open(capture, true).map_err(|e| e.to_string())?;
    let (mut first, mut last, mut n) = (None::<u64>, 0u64, 0u64);
    while let Some(rec) = r.next().map_err(|e| e.to_string())? {
        if rec.link != ETHERNET {
            return Err(format!(
                "{}: link type {} is not Ethernet, which tcpreplay cannot put on an Ethernet \
                 interface: write it as Ethernet first (npqos trace ethernet {} <out.pcap> \
                 --dst-mac <the receiver's MAC>)",
                capture.display(),
                rec.link,
                capture.display()
            ));
        }
        first.get_or_insert(rec.ts_ns);
        last = last.max(rec.ts_ns);
        n += 1;
    }
    let first = first.ok_or_else(|| format!("{}: no packets", capture.display()))?;
    Ok((Duration::from_nanos(last - first), n))
}

/// The router scenario (`model = "router"`, every key resolved) that runs `spec`'s pipeline over
/// `capture` at its own timing, `drain` after its last packet; `seed` for `[run]` (the
/// pipeline draws nothing at random with processing none, so any seed gives the same result).
pub fn router_scenario(spec: &LiveSpec, capture: &Path, drain: Duration, seed: u64) -> Result<toml::Table, String> {
    let (span, _) = capture_span(capture)?;
    let mut params = spec.router_params();
    params.drain = drain;
    let traffic = TrafficSpec {
        source: FlowTraffic::Trace {
            files: vec![std::path::absolute(capture).map_err(|e| format!("{}: {e}", capture.display()))?],
            flow_multiply: 1,
            time_scale: 1.0,
            // No gap within the file is longer than its span: none is capped.
            max_gap: span + Duration::from_secs(1),
            lenient: true,
        },
        mix: Vec::new(),
    };
    let router = RouterSpec { params, traffic, bucket: spec.bucket.clone(), output: spec.capture.clone() };
    let mut root = toml::Table::new();
    root.insert("model".into(), "router".into());
    let mut run = toml::Table::new();
    run.insert("seed".into(), (seed as i64).into());
    // The corpus lasts to 1 ns after its last packet.
    run.insert("duration".into(), (span + Duration::from_nanos(1)).to_string().into());
    run.insert("replications".into(), 1.into());
    // The live run's time series, at its interval.
    run.insert("sample_interval".into(), spec.sample_every.to_string().into());
    root.insert("run".into(), run.into());
    router.to_toml(&mut root);
    // Read back and written again: every default filled in as `npqos run` resolves it.
    let sc = crate::scenario::Scenario::from_table(&root, "live --as-scenario", Path::new("."))
        .map_err(|p| format!("the router scenario of this configuration is refused (a defect): {p}"))?;
    Ok(sc.to_toml())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::writer::{udp4_frame, PcapWriter};

    /// A capture of `n` UDP frames of two flows, 1 ms apart, Ethernet.
    fn capture(dir: &Path, n: u64) -> std::path::PathBuf {
        let p = dir.join("two.pcap");
        let mut w = PcapWriter::new(std::fs::File::create(&p).unwrap(), ETHERNET, 65535, true, false).unwrap();
        for i in 0..n {
            let f = udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 5000 + (i % 2) as u16, 10000, 500);
            w.write(1_600_000_000_000_000_000 + i * 1_000_000, &f, f.len() as u32).unwrap();
        }
        p
    }

    fn live(text: &str) -> LiveSpec {
        super::super::spec::read(&toml::from_str(text).unwrap(), "test.toml").unwrap_or_else(|p| panic!("{p}"))
    }

    /// The scenario is the live configuration's router: read back by the router's reader, its
    /// pipeline is `router_params` but for what only a simulation has (the run's length, the
    /// drain); the capture is played once, at its own timing, with no gap capped.
    #[test]
    fn the_scenario_is_the_live_configurations_router() {
        let d = tempfile::tempdir().unwrap();
        let cap = capture(d.path(), 100);
        for text in [
            "[live]\ninput = \"a\"\noutput = \"b\"\n[shaper]\nflow_rate = \"1Mbps\"\n[table]\nqueue_limit = \"8KiB\"\n",
            "[live]\ninput = \"a\"\noutput = \"b\"\n[[services]]\nname = \"v\"\ndst_ports = [10000]\nrate = \"2Mbps\"\n[[services]]\nname = \"rest\"\nrate = \"1Mbps\"\nrate_per = \"class\"\n",
        ] {
            let spec = live(text);
            // A live run's resolved file (with the [meta] npqos adds) reads back as the same
            // configuration: the wire's side of the comparison can be written again.
            let mut resolved = spec.to_toml();
            resolved.insert("meta".into(), toml::toml! { npqos_version = "0" }.into());
            let again = super::super::spec::read(&resolved, "resolved.toml").unwrap_or_else(|p| panic!("{p}"));
            assert_eq!(again.router_params(), spec.router_params());
            let table = router_scenario(&spec, &cap, Duration::from_secs(2), 1).unwrap();
            let sc = crate::scenario::Scenario::from_table(&table, "t", Path::new(".")).unwrap();
            assert_eq!(sc.duration, Duration::from_nanos(99_000_001));
            let r = sc.spec_as::<RouterSpec>().unwrap();
            let mut expected = spec.router_params();
            expected.drain = Duration::from_secs(2);
            // What the simulator does not keep (the frames' bytes), and a flag the ingress
            // sets itself whatever the table says (`Ingress::new`): neither changes a result.
            expected.table.store_payload = false;
            expected.table.caller_schedules = false;
            assert_eq!(r.params, expected);
            let FlowTraffic::Trace { files, flow_multiply, time_scale, max_gap, .. } = &r.traffic.source else {
                panic!("not a trace")
            };
            assert_eq!((files.len(), *flow_multiply, *time_scale), (1, 1, 1.0));
            assert!(*max_gap > Duration::from_millis(99));
        }
    }

    #[test]
    fn a_capture_that_is_not_ethernet_is_refused_with_the_command_that_rewrites_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("raw.pcap");
        let mut w = PcapWriter::new(std::fs::File::create(&p).unwrap(), 101, 65535, true, false).unwrap();
        let f = udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 5000, 10000, 100);
        w.write(1, &f[14..], f.len() as u32 - 14).unwrap();
        drop(w);
        let spec = live("[live]\ninput = \"a\"\noutput = \"b\"\n[shaper]\nflow_rate = \"1Mbps\"\n");
        let e = router_scenario(&spec, &p, Duration::ZERO, 1).unwrap_err();
        assert!(e.contains("npqos trace ethernet"), "{e}");
    }
}
