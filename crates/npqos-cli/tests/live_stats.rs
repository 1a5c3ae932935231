//! `npqos live`'s statistics endpoint against hostile clients (no root needed: the server and
//! a forwarder on a simulated clock in this process, on a UNIX socket in a temporary
//! directory).

#![cfg(target_os = "linux")]

use npqos_cli::live::stats;
use npqos_core::Instant;
use npqos_sim::live::spec::{self, StatsListen};
use npqos_sim::live::Forwarder;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// An Ethernet + IPv4 + UDP frame of flow `i` (its own source address), `payload` bytes.
fn udp(i: u32, payload: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (20 + 8 + payload) as u16;
    let src = [10, (i >> 16) as u8, (i >> 8) as u8, i as u8];
    f.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[
        198,
        18,
        0,
        2,
        0x13,
        0x88,
        0x27,
        0x10,
        ((8 + payload) >> 8) as u8,
        (8 + payload) as u8,
        0,
        0,
    ]);
    f.resize(14 + total as usize, 0);
    f
}

/// Resident memory of this process, bytes.
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 =
        s.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok()).unwrap();
    kb * 1024
}

/// A thousand connections that close at once, 300 that send garbage (some far past the
/// request bound), two that never send, one that asks and never reads a 4,097-row answer:
/// the server's memory does not grow from one such round to the next (a bound, not a leak),
/// and it still answers the right counters after.
#[test]
fn hostile_clients_do_not_grow_the_statistics_server() {
    let dir = tempfile::tempdir().unwrap();
    let at = StatsListen::Unix(dir.path().join("npqos.sock"));
    let StatsListen::Unix(path) = &at else { unreachable!() };
    let text = "[live]\ninput = \"in0\"\noutput = \"out0\"\n[shaper]\nflow_rate = \"1Mbps\"\n";
    let sp = spec::read(&toml::from_str(text).unwrap(), "t.toml").unwrap();
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    const FLOWS: u32 = 5000;
    for i in 0..FLOWS {
        fw.receive(&udp(i, 100), Instant::from_nanos(1_000 + i as u64));
    }
    let (mut publishers, server) = stats::start(&at, sp.service_info(), None, 1).unwrap();
    let publisher = &mut publishers[0];
    publisher.publish(&fw, None, Instant::from_nanos(10_000_000));
    let body = stats::fetch(&at, "/metrics").unwrap();
    let rows = body.lines().filter(|l| l.starts_with("npqos_flow_sent_packets_total{")).count();
    assert!(body.contains(&format!("npqos_frames_in_total{{direction=\"in\"}} {FLOWS}")), "{}", &body[..2000]);
    assert_eq!(rows, 4097, "the table's 4,096 flows and the row past it");
    let round = || {
        for _ in 0..1000 {
            drop(UnixStream::connect(path).unwrap());
        }
        for k in 0..300usize {
            if let Ok(mut s) = UnixStream::connect(path) {
                s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
                let junk: Vec<u8> = (0..(k % 7) * 20_000 + 17).map(|j| (j * 31 + k) as u8).collect();
                let _ = s.write_all(&junk);
                let _ = s.write_all(b"\r\n\r\n");
                let mut sink = Vec::new();
                s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
                let _ = s.read_to_end(&mut sink);
            }
        }
        let idle: Vec<UnixStream> = (0..2).map(|_| UnixStream::connect(path).unwrap()).collect();
        let mut greedy = UnixStream::connect(path).unwrap();
        greedy.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(3500));
        drop((idle, greedy));
    };
    round();
    let before = rss();
    round();
    round();
    let after = rss();
    let again = stats::fetch(&at, "/metrics").unwrap();
    println!(
        "statistics server: answer {} B ({rows} flow rows); resident {:.1} MiB after one hostile round, {:.1} MiB after two more",
        body.len(),
        before as f64 / 1048576.0,
        after as f64 / 1048576.0
    );
    assert!(after < before + (2 << 20), "grew from {before} to {after} bytes over two more rounds");
    assert_eq!(again, body, "the same answer after");
    drop(server);
    assert!(!path.exists(), "the socket removed");
}
