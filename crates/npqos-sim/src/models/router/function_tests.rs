//! The services' packet functions on the processing element (docs/everest.md, "The
//! prototype's services"): Everest's prototype's two detectors run by the processors that
//! finish each packet, their keys in `[services.function]`, what they find in the results.

use super::scenario::run_scenario;
use crate::results::RunResult;
use crate::scenario::testing::{assert_round_trips, parse};
use std::path::Path;

/// Two services as the prototype's, over the detectors' crafted capture
/// (`trace::writer::attacks_capture`): "scan" (the port-scan detector) takes the traffic to the
/// scan's victim and the benign server, "syn" (the SYN-flood detector) the rest; four
/// processors under `policy`.
fn scenario(capture: &Path, policy: &str, threshold: u32) -> String {
    format!(
        r#"model = "router"
[run]
duration = "1s"
[traffic]
source = "trace"
files = ["{}"]
[processing]
processors = 4
policy = "{policy}"
scheduler = "fcfs"
[queue_memory]
subsystem = "ideal"
[shaping]
shaper = "none"
[[services]]
name = "scan"
dst_prefixes = ["198.18.2.0/24", "198.18.4.0/24"]
cost_alpha = "2us"
cost_beta = "0ns"
[services.function]
kind = "port-scan"
window = "1s"
threshold = {threshold}
[[services]]
name = "syn"
cost_alpha = "2us"
cost_beta = "0ns"
[services.function]
kind = "syn-flood"
threshold = {threshold}
"#,
        capture.display()
    )
}

fn run(text: &str) -> RunResult {
    let sc = parse(text).unwrap();
    run_scenario(&sc, 1, 1, None, &mut |_| {}).unwrap()
}

/// Each service's function finds what its traffic holds and nothing in the benign traffic: the
/// scan reported once by "scan" at its 101st port (100 ms into the capture, plus the
/// packet's 2 us on a processor), the flood once by "syn" at its 101st half-open connection;
/// the scan's victim gets no flood report, as its SYNs go to "scan", which does not look for
/// floods. The same under Static and Everest (the capture does not load four processors).
#[test]
fn the_processors_detectors_find_the_scan_and_the_flood() {
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("attacks.pcap");
    crate::trace::writer::attacks_capture(&cap).unwrap();
    for policy in ["static", "everest"] {
        let r = run(&scenario(&cap, policy, 100));
        let got: Vec<_> =
            r.detections.iter().map(|x| (x.class.as_str(), x.what.as_str(), x.who.as_str(), x.count)).collect();
        assert_eq!(
            got,
            [("scan", "port_scan", "198.18.1.1", 101), ("syn", "syn_flood", "198.18.5.5", 101)],
            "{policy}"
        );
        let scan = &r.detections[0];
        assert!((100_000_000..100_100_000).contains(&scan.at_ns), "{policy}: the 101st port at 100 ms: {}", scan.at_ns);
        assert_eq!(r.get("detections.scan"), Some(1.0));
        assert_eq!(r.get("detections.syn"), Some(1.0));
        assert_eq!(r.get("function_untracked.syn"), Some(0.0));
        assert_eq!(r.get("late_packets"), Some(0.0), "{policy}");
    }
    // Thresholds above what the capture holds: nothing.
    let r = run(&scenario(&cap, "everest", 400));
    assert!(r.detections.is_empty(), "{:?}", r.detections);
    assert_eq!(r.get("detections.scan"), Some(0.0));
}

/// The keys: read, defaulted, written back; refused with processing none (no processors to
/// run them) and with an unknown kind or a zero window.
#[test]
fn function_keys_round_trip_and_are_checked() {
    let text = "model = \"router\"\n[[services]]\nname = \"a\"\nprotocols = [\"tcp\"]\n[services.function]\nkind = \"syn-flood\"\n[[services]]\nname = \"b\"\n";
    let sc = parse(text).unwrap();
    let r = sc.spec_as::<super::scenario::RouterSpec>().unwrap();
    let f = r.params.services[0].function.unwrap();
    assert_eq!((f.window_ns, f.threshold, f.max_tracked), (1_000_000_000, 100, 65_536));
    assert_eq!(r.params.services[1].function, None);
    assert_round_trips([text.to_string()]);
    let none = text.replace("model = \"router\"\n", "model = \"router\"\n[processing]\npolicy = \"none\"\n");
    let e = parse(&none).unwrap_err();
    assert!(e.contains("services[0].function") && e.contains("processing.policy = \"none\""), "{e}");
    let bad = text.replace("kind = \"syn-flood\"", "kind = \"dpi\"\nwindow = \"0s\"");
    let e = parse(&bad).unwrap_err();
    assert!(e.contains("services[0].function.kind") && e.contains("syn-flood"), "{e}");
    assert!(e.contains("services[0].function.window"), "{e}");
}
