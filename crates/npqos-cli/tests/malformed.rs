//! The corpus of malformed traces and scenarios. The test writes every file itself and checks
//! the committed copy is identical (set NPQOS_BLESS=1 to rewrite the corpus), then runs the CLI
//! on each: exit code 2, a message naming the file and saying what is wrong, never a panic.

mod common;
use common::*;
use npqos_sim::trace::writer::{udp4_frame, PcapNgWriter, PcapWriter};

fn pcap_header(snaplen: u32) -> Vec<u8> {
    PcapWriter::new(Vec::new(), 1, snaplen, false, false).unwrap().into_inner()
}

fn record(caplen: u32, origlen: u32, data: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    for v in [1_600_000_000u32, 0, caplen, origlen] {
        r.extend_from_slice(&v.to_le_bytes());
    }
    r.extend_from_slice(data);
    r
}

/// (file name, bytes, expected message fragment)
fn traces() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let frame = udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 30);
    let good = {
        let mut w = PcapWriter::new(Vec::new(), 1, 65535, false, false).unwrap();
        w.write(1, &frame, frame.len() as u32).unwrap();
        w.into_inner()
    };
    let ng = {
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.interface(1, 0, 6).unwrap();
        w.packet(0, 5, &frame, frame.len() as u32).unwrap();
        w.into_inner()
    };
    let mut ng_mismatch = ng.clone();
    let n = ng_mismatch.len();
    ng_mismatch[n - 4..].copy_from_slice(&999u32.to_le_bytes()); // trailer of the last block
    let mut ng_badlen = ng.clone();
    let epb = ng.len() - (12 + 20 + frame.len().div_ceil(4) * 4);
    ng_badlen[epb + 4..epb + 8].copy_from_slice(&7u32.to_le_bytes());
    let mut wrong_magic = good.clone();
    wrong_magic[..4].copy_from_slice(b"GIF8");
    let mut with_tail = pcap_header(65535);
    with_tail.extend(record(100, 100, &frame[..20]));
    let mut above_snap = pcap_header(64);
    above_snap.extend(record(frame.len() as u32, frame.len() as u32, &frame));
    let mut huge = pcap_header(0);
    huge.extend(record(0xFFFF_FFFF, 0xFFFF_FFFF, &frame));
    vec![
        ("empty.pcap", vec![], "empty file"),
        ("truncated_global_header.pcap", good[..10].to_vec(), "byte 10: truncated pcap global header: 10 of 24 bytes"),
        ("truncated_record.pcap", with_tail, "byte 24: truncated record: 20 of 100 captured bytes present"),
        ("caplen_above_snaplen.pcap", above_snap, "byte 24: captured length 72 exceeds the snap length 64"),
        ("caplen_ffffffff.pcap", huge, "byte 24: captured length 4294967295 exceeds the maximum record size"),
        ("wrong_magic.pcap", wrong_magic, "unknown magic number 0x47494638"),
        (
            "pcapng_block_length_mismatch.pcapng",
            ng_mismatch,
            "pcapng block length mismatch: header says 104, trailer says 999",
        ),
        ("pcapng_bad_block_length.pcapng", ng_badlen, "bad pcapng block length 7"),
        ("pcapng_truncated_section_header.pcapng", ng[..10].to_vec(), "byte 0: truncated pcapng section header block"),
    ]
}

/// (file name, text, expected fragments)
fn scenarios() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        ("unknown_key.toml", "[link]\nrate = \"10Gbps\"\nspeed = \"fast\"\n", vec!["key `link.speed` = \"fast\": unknown key"]),
        ("missing_unit.toml", "[link]\nrate = \"10\"\n", vec!["key `link.rate` = \"10\": missing unit: expected a rate with a unit"]),
        ("zero_rate.toml", "[link]\nrate = \"0Gbps\"\n", vec!["key `link.rate`", "expected a positive rate"]),
        ("negative_rate.toml", "[link]\nrate = \"-5Gbps\"\n", vec!["key `link.rate` = \"-5Gbps\": negative rate"]),
        ("zero_queues.toml", "[queues]\ncount = 0\n", vec!["key `queues.count` = 0: expected an integer from 1 to"]),
        ("beyond_memory_budget.toml", "[queues]\ncount = 200000000\nbuffer = \"64KiB\"\n", vec!["key `queues.count` = 200000000", "above run.memory_budget = 4.0 GiB"]),
        ("syntax_error.toml", "[link\nrate = 1\n", vec!["TOML syntax error", "line 1"]),
        ("wrong_type.toml", "[run]\nduration = 5\n", vec!["key `run.duration` = 5: expected a duration such as \"2ms\" as a quoted string"]),
        (
            "several_problems.toml",
            "model = \"nope\"\n[run]\nduration = \"10\"\n[link]\nrate = \"1Gbps\"\nquantum = \"0B\"\n[queues]\ncount = -3\n[traffic]\noverload = 0\nsizes = \"big\"\n[extra]\n",
            vec!["7 problems", "`model`", "`run.duration`", "`link.quantum`", "`queues.count`", "`traffic.overload`", "`traffic.sizes`", "`extra`"],
        ),
    ]
}

fn check_committed(sub: &str, name: &str, bytes: &[u8]) {
    let p = corpus_dir().join(sub).join(name);
    if std::env::var_os("NPQOS_BLESS").is_some() {
        std::fs::write(&p, bytes).unwrap();
    }
    let committed = std::fs::read(&p).unwrap_or_else(|_| panic!("{} is missing: run with NPQOS_BLESS=1", p.display()));
    assert_eq!(committed, bytes, "{} differs from what the test writes: run with NPQOS_BLESS=1", p.display());
}

#[test]
fn malformed_traces_exit_2_with_file_and_offset() {
    for (name, bytes, want) in traces() {
        check_committed("traces", name, &bytes);
        let path = corpus_dir().join("traces").join(name);
        let o = run(&["trace", "stats", path.to_str().unwrap()]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(&format!("{}: ", path.display())), "{name}: message must name the file: {err}");
        assert!(err.contains(want), "{name}: expected {want:?} in {err:?}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        // Lenient mode never panics either; structural errors stay errors.
        let o = run(&["trace", "stats", "--lenient", "--json", path.to_str().unwrap()]);
        assert!(matches!(o.status.code(), Some(0) | Some(2)), "{name}: lenient: {}", stderr(&o));
    }
}

#[test]
fn malformed_scenarios_exit_2_naming_key_value_and_expectation() {
    for (name, text, wants) in scenarios() {
        check_committed("scenarios", name, text.as_bytes());
        let path = corpus_dir().join("scenarios").join(name);
        let o =
            run(&["run", path.to_str().unwrap(), "--out", std::env::temp_dir().join("npqos-never").to_str().unwrap()]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(path.to_str().unwrap()), "{name}: message must name the file: {err}");
        for w in wants {
            assert!(err.contains(w), "{name}: expected {w:?} in:\n{err}");
        }
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

#[test]
fn missing_files_and_bad_arguments_are_bad_input() {
    let o = run(&["trace", "stats", "/nonexistent/x.pcap"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("/nonexistent/x.pcap"));
    let o = run(&["run", "/nonexistent/s.toml"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["reproduce", "kim-nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("kim-table1"), "lists known ids: {}", stderr(&o));
    let o = run(&["model", "kim", "--link", "fast"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["sweep", "../../scenarios/demo.toml", "--set", "nokey"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["bogus-command"]);
    assert_eq!(o.status.code(), Some(2));
}
