//! Trace input: every container variant and link type we claim, written by our writer (or by
//! hand where the writer cannot express it) and read back through the streaming reader.

use npqos_core::flow::{FlowKey, PROTO_TCP, PROTO_UDP};
use npqos_sim::trace::decode::{decode, NonIp};
use npqos_sim::trace::reader::linktype;
use npqos_sim::trace::writer::{tcp6_packet, udp4_frame, PcapNgWriter, PcapWriter};
use npqos_sim::trace::{Alignment, Merge, TraceOptions, TraceReader, TraceSource};
use rand::SeedableRng;
use std::path::{Path, PathBuf};

/// Reads `bytes` as a trace and returns (ts_ns, wire_len, decoded flow) per record.
fn read_all(bytes: &[u8]) -> Vec<(u64, u32, Result<FlowKey, NonIp>)> {
    let mut r = TraceReader::new(bytes, Path::new("mem"), false).expect("header");
    let mut out = vec![];
    while let Some(rec) = r.next().expect("record") {
        out.push((rec.ts_ns, rec.orig_len, decode(&rec).map(|m| m.flow)));
    }
    out
}

fn v4(a: &str, b: &str, proto: u8, sp: u16, dp: u16) -> FlowKey {
    FlowKey::new(a.parse().unwrap(), b.parse().unwrap(), proto, sp, dp)
}

#[test]
fn classic_pcap_micro_and_nano_both_byte_orders() {
    for (nanos, be) in [(false, false), (false, true), (true, false), (true, true)] {
        let mut w = PcapWriter::new(Vec::new(), linktype::ETHERNET, 65535, nanos, be).unwrap();
        let f = udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1234, 53, 100);
        w.write(1_600_000_000_123_456_789, &f, f.len() as u32).unwrap();
        // Truncated capture: 60 bytes captured of a 1514-byte packet.
        let big = udp4_frame([10, 0, 0, 3], [10, 0, 0, 4], 5, 6, 1472);
        w.write(1_600_000_001_000_000_000, &big[..60], 1514).unwrap();
        let got = read_all(&w.into_inner());
        let ts0 = if nanos { 1_600_000_000_123_456_789 } else { 1_600_000_000_123_456_000 };
        assert_eq!(
            got[0],
            (ts0, f.len() as u32, Ok(v4("10.0.0.1", "10.0.0.2", PROTO_UDP, 1234, 53))),
            "nanos={nanos} be={be}"
        );
        assert_eq!(got[1], (1_600_000_001_000_000_000, 1514, Ok(v4("10.0.0.3", "10.0.0.4", PROTO_UDP, 5, 6))));
    }
}

/// Inserts VLAN tags (TPID, TCI) after the MAC addresses of an Ethernet frame.
fn with_tags(frame: &[u8], tags: &[u16]) -> Vec<u8> {
    let mut out = frame[..12].to_vec();
    for &tpid in tags {
        out.extend_from_slice(&tpid.to_be_bytes());
        out.extend_from_slice(&100u16.to_be_bytes());
    }
    out.extend_from_slice(&frame[12..]);
    out
}

#[test]
fn vlan_and_qinq_tags_are_skipped() {
    let f = udp4_frame([192, 168, 1, 1], [192, 168, 1, 2], 4000, 4001, 10);
    let mut w = PcapWriter::new(Vec::new(), linktype::ETHERNET, 0, false, false).unwrap();
    for tags in [&[0x8100u16][..], &[0x88a8, 0x8100][..], &[0x8100, 0x8100][..]] {
        let t = with_tags(&f, tags);
        w.write(0, &t, t.len() as u32).unwrap();
    }
    for (_, _, flow) in read_all(&w.into_inner()) {
        assert_eq!(flow, Ok(v4("192.168.1.1", "192.168.1.2", PROTO_UDP, 4000, 4001)));
    }
}

#[test]
fn ipv6_extension_headers_are_skipped_to_find_tcp() {
    let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let plain = tcp6_packet(src, dst, 443, 50000, 0);
    // Insert an 8-byte hop-by-hop header: next header TCP (6), length 0, PadN option.
    let mut p = plain[..40].to_vec();
    p[6] = 0; // next header: hop-by-hop
    let payload_len = u16::from_be_bytes([p[4], p[5]]) + 8;
    p[4..6].copy_from_slice(&payload_len.to_be_bytes());
    p.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
    p.extend_from_slice(&plain[40..]);
    let mut w = PcapWriter::new(Vec::new(), linktype::RAW, 0, false, false).unwrap();
    w.write(5, &p, p.len() as u32).unwrap();
    let got = read_all(&w.into_inner());
    let want =
        FlowKey::new(std::net::Ipv6Addr::from(src).into(), std::net::Ipv6Addr::from(dst).into(), PROTO_TCP, 443, 50000);
    assert_eq!(got[0].2, Ok(want));
    assert!(want.is_v6);
}

#[test]
fn null_loopback_and_linux_sll_links() {
    let eth = udp4_frame([1, 1, 1, 1], [2, 2, 2, 2], 7, 8, 4);
    let ip = &eth[14..];
    let want = Ok(v4("1.1.1.1", "2.2.2.2", PROTO_UDP, 7, 8));
    // BSD null: AF_INET = 2 in host order.
    let mut null = 2u32.to_le_bytes().to_vec();
    null.extend_from_slice(ip);
    let mut w = PcapWriter::new(Vec::new(), linktype::NULL, 0, false, false).unwrap();
    w.write(0, &null, null.len() as u32).unwrap();
    assert_eq!(read_all(&w.into_inner())[0].2, want);
    // Linux SLL: 16-byte header, protocol 0x0800 at bytes 14-15.
    let mut sll = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(ip);
    let mut w = PcapWriter::new(Vec::new(), linktype::LINUX_SLL, 0, false, false).unwrap();
    w.write(0, &sll, sll.len() as u32).unwrap();
    assert_eq!(read_all(&w.into_inner())[0].2, want);
    // SLL with a non-IP protocol (ARP) is counted, not an error.
    let mut arp = sll.clone();
    arp[14..16].copy_from_slice(&0x0806u16.to_be_bytes());
    let mut w = PcapWriter::new(Vec::new(), linktype::LINUX_SLL, 0, false, false).unwrap();
    w.write(0, &arp, arp.len() as u32).unwrap();
    assert_eq!(read_all(&w.into_inner())[0].2, Err(NonIp::NotIp));
    // An undecoded link type.
    let mut w = PcapWriter::new(Vec::new(), 147, 0, false, false).unwrap();
    w.write(0, ip, ip.len() as u32).unwrap();
    assert_eq!(read_all(&w.into_inner())[0].2, Err(NonIp::UnsupportedLink));
}

#[test]
fn pcapng_interfaces_have_their_own_link_type_and_resolution() {
    let eth = udp4_frame([10, 1, 1, 1], [10, 1, 1, 2], 1, 2, 20);
    let raw = eth[14..].to_vec();
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.interface(linktype::ETHERNET, 0, 6).unwrap(); // microseconds
    w.interface(linktype::RAW, 0, 9).unwrap(); // nanoseconds
    w.interface(linktype::RAW, 0, 0x80 | 10).unwrap(); // 2^-10 s
    w.packet(0, 1_000_000, &eth, eth.len() as u32).unwrap(); // 1 s
    w.packet(1, 1_500_000_000, &raw, raw.len() as u32).unwrap(); // 1.5 s
    w.packet(2, 2048 + 512, &raw, 999).unwrap(); // 2.5 s
    let got = read_all(&w.into_inner());
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![1_000_000_000, 1_500_000_000, 2_500_000_000]);
    assert_eq!(got[2].1, 999, "wire length is the original length");
    assert!(got.iter().all(|g| g.2 == Ok(v4("10.1.1.1", "10.1.1.2", PROTO_UDP, 1, 2))));
}

fn write_file(dir: &Path, name: &str, packets: &[(u64, [u8; 4])]) -> PathBuf {
    let p = dir.join(name);
    let mut w = PcapWriter::new(std::fs::File::create(&p).unwrap(), linktype::ETHERNET, 0, true, false).unwrap();
    for (ts, src) in packets {
        let f = udp4_frame(*src, [9, 9, 9, 9], 1, 2, 50);
        w.write(*ts, &f, f.len() as u32).unwrap();
    }
    p
}

#[test]
fn merge_orders_across_files_and_transformations_keep_flows() {
    let d = tempfile::tempdir().unwrap();
    let a = write_file(d.path(), "a.pcap", &[(1_000, [1, 0, 0, 1]), (5_000, [1, 0, 0, 2]), (9_000, [1, 0, 0, 1])]);
    let b = write_file(d.path(), "b.pcap", &[(2_000, [2, 0, 0, 1]), (5_000, [2, 0, 0, 2])]);
    let mut m = Merge::open(&[a.clone(), b.clone()], false).unwrap();
    let mut order = vec![];
    while let Some(p) = m.next().unwrap() {
        order.push((p.ts.as_nanos(), p.file));
    }
    assert_eq!(
        order,
        vec![(1_000, 0), (2_000, 1), (5_000, 0), (5_000, 1), (9_000, 0)],
        "equal times: lower file first"
    );

    // Time scale 2: rebased to zero and halved.
    let opts = TraceOptions {
        files: vec![a.clone(), b.clone()],
        lenient: false,
        time_scale: 2.0,
        flow_multiply: 1,
        align: Alignment::Absolute,
    };
    let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(1);
    let mut s = TraceSource::open(opts, &mut rng).unwrap();
    let mut ts = vec![];
    while let Some(p) = s.next().unwrap() {
        ts.push(p.ts.as_nanos());
    }
    assert_eq!(ts, vec![0, 500, 2_000, 2_000, 4_000]);

    // Flow multiplication x3: same duration, 3x packets, 3x flows, in time order.
    let opts = TraceOptions {
        files: vec![a, b],
        lenient: false,
        time_scale: 1.0,
        flow_multiply: 3,
        align: Alignment::Absolute,
    };
    let mut s = TraceSource::open(opts, &mut rng).unwrap();
    let mut pk = vec![];
    while let Some(p) = s.next().unwrap() {
        pk.push(p);
    }
    assert_eq!(pk.len(), 15);
    assert!(pk.windows(2).all(|w| w[0].ts <= w[1].ts));
    assert!(pk.iter().all(|p| p.ts.as_nanos() <= 8_000), "duration is kept");
    let flows: std::collections::HashSet<_> = pk.iter().map(|p| p.flow.unwrap()).collect();
    assert_eq!(flows.len(), 4 * 3);
}

/// Files recorded years apart: under `Alignment::Start` each starts at 0, gaps within a file are
/// capped, and the merged stream equals the in-memory corpus of the reproductions (same axis,
/// same tie order); under `Absolute` the second file lies years after the first.
#[test]
fn aligned_merge_starts_every_file_at_zero_and_caps_gaps() {
    use npqos_core::Duration;
    use npqos_sim::trace::corpus::Corpus;
    const YEAR: u64 = 365 * 86_400 * 1_000_000_000;
    let d = tempfile::tempdir().unwrap();
    let a = write_file(
        d.path(),
        "a.pcap",
        &[(1_000, [1, 0, 0, 1]), (3_000_000_000, [1, 0, 0, 2]), (3_000_000_500, [1, 0, 0, 1])],
    );
    let b = write_file(
        d.path(),
        "b.pcap",
        &[(3 * YEAR, [2, 0, 0, 1]), (3 * YEAR + 700, [2, 0, 0, 2]), (3 * YEAR + 200, [2, 0, 0, 3])],
    );
    let files = vec![a, b];
    let gap = Duration::from_millis(1000);
    let mut m = Merge::open_aligned(&files, false, Alignment::Start { max_gap: gap }).unwrap();
    let mut got = vec![];
    while let Some(p) = m.next().unwrap() {
        got.push((p.ts.as_nanos(), p.file));
    }
    // a: 0, then a 3 s gap capped to 1 s, then +500 ns; b: 0, +700, then back in time (gap 0).
    assert_eq!(got, vec![(0, 0), (0, 1), (700, 1), (700, 1), (1_000_000_000, 0), (1_000_000_500, 0)]);
    let corpus = Corpus::load(&files, false, gap).unwrap();
    assert_eq!(corpus.packets.iter().map(|p| p.ts).collect::<Vec<_>>(), got.iter().map(|g| g.0).collect::<Vec<_>>());

    let mut m = Merge::open(&files, false).unwrap();
    let mut last = 0;
    while let Some(p) = m.next().unwrap() {
        last = p.ts.as_nanos();
    }
    assert!(last > 3 * YEAR, "absolute merge keeps the years between the files");

    // Flow multiplication on the aligned axis: every packet of both files, k times.
    let opts = TraceOptions {
        files,
        lenient: false,
        time_scale: 1.0,
        flow_multiply: 4,
        align: Alignment::Start { max_gap: gap },
    };
    let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(7);
    let mut s = TraceSource::open(opts, &mut rng).unwrap();
    let mut n = 0;
    while let Some(p) = s.next().unwrap() {
        assert!(p.ts.as_nanos() <= 1_000_000_500);
        n += 1;
    }
    assert_eq!(n, 6 * 4);
}

#[test]
fn lenient_mode_counts_and_skips_corrupt_records() {
    let mut w = PcapWriter::new(Vec::new(), linktype::ETHERNET, 100, false, false).unwrap();
    let f = udp4_frame([1, 2, 3, 4], [5, 6, 7, 8], 1, 1, 10);
    w.write(0, &f, f.len() as u32).unwrap();
    let big = vec![0u8; 150]; // above the snap length of 100: corrupt but skippable
    w.write(1, &big, 150).unwrap();
    w.write(2, &f, f.len() as u32).unwrap();
    let mut bytes = w.into_inner();
    bytes.extend_from_slice(&[1, 2, 3]); // a truncated record header at the end
    let mut r = TraceReader::new(&bytes[..], Path::new("x.pcap"), true).unwrap();
    let mut n = 0;
    while r.next().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 2);
    assert_eq!(r.counters().corrupt_skipped, 2);
    assert!(r.counters().abandoned_tail);
    let mut strict = TraceReader::new(&bytes[..], Path::new("x.pcap"), false).unwrap();
    assert!(strict.next().unwrap().is_some());
    let e = strict.next().unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "x.pcap: byte {}: captured length 150 exceeds the snap length 100 of the file header",
            24 + 16 + f.len()
        )
    );
}

#[test]
fn empirical_sizes_from_a_trace_drive_a_synthetic_scenario() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("sizes.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&p).unwrap(), linktype::ETHERNET, 0, false, false).unwrap();
    for i in 0..1000u64 {
        let f = udp4_frame([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, if i % 4 == 0 { 958 } else { 58 }); // 1000 B or 100 B
        w.write(i, &f, f.len() as u32).unwrap();
    }
    drop(w);
    let text = "[run]\nduration = \"50ms\"\n[link]\nrate = \"1Gbps\"\n[queues]\ncount = 4\nbuffer = \"1MiB\"\n[traffic]\noverload = 0.5\nsizes = \"trace\"\nsize_files = [\"sizes.pcap\"]\n";
    let sc = npqos_sim::scenario::Scenario::parse(text, "t.toml", d.path()).unwrap();
    let r = npqos_sim::models::link::run(&sc, 1, 1, None, &mut |_| {}).unwrap();
    let mean = r.get("offered_bytes").unwrap() / r.get("offered_packets").unwrap();
    assert!((mean - 325.0).abs() < 10.0, "mean size {mean}, trace mean 325");
    assert!((r.get("offered_load").unwrap() - 0.5).abs() < 0.03);
    // The resolved scenario names the files and parses back.
    let again = npqos_sim::scenario::Scenario::from_table(&sc.to_toml(), "r.toml", std::path::Path::new("/")).unwrap();
    assert_eq!(again, sc);
    // A file that does not exist is a validation problem naming the key.
    let e =
        npqos_sim::scenario::Scenario::parse(&text.replace("sizes.pcap", "nope.pcap"), "t.toml", d.path()).unwrap_err();
    assert!(e.to_string().contains("traffic.size_files[0]"), "{e}");
}
