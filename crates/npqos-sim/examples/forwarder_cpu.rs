//! npqos live's forwarder (the router's pipeline on a clock) without the rings and without the
//! namespace bed's noise: `FLOWS` UDP flows of 106 B frames offered at 260,000 frames/s in
//! total for 3 simulated seconds, each flow shaped to `RATE`, the live bench's table
//! (131,072 queues, 1,048,576 blocks, `queue_limit` 4 KiB), a transmit ring taking up to 256
//! frames every fourth frame. Prints the wall time of the loop per offered and per forwarded
//! frame (docs/PERFORMANCE.md).
//!
//! `cargo run --release -p npqos-sim --example forwarder_cpu -- FLOWS RATE [SHAPER_KEYS]`, e.g.
//! `-- 1000 20kbps` or `-- 100000 500bps 'cap = "128B"'`.
use npqos_core::Instant;
use npqos_sim::live::{spec, Forwarder};

fn frame(f: u32) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, (f >> 8) as u8, f as u8], [198, 18, 0, 2], 64)
        .udp(5000 + (f % 1000) as u16, 6000);
    let mut out = Vec::new();
    b.write(&mut out, &[0u8; 64]).unwrap();
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: forwarder_cpu FLOWS RATE [SHAPER_KEYS]   (e.g. 1000 20kbps)");
        std::process::exit(2);
    }
    let flows: u32 = args[1].parse().expect("FLOWS: a number of flows");
    let rate = &args[2];
    let extra = args.get(3).cloned().unwrap_or_default();
    let text = format!("[live]\ninput = \"in0\"\noutput = \"out0\"\n[shaper]\nflow_rate = \"{rate}\"\n{extra}\n[table]\nqueues = 131072\nblocks = 1048576\nqueue_limit = \"4KiB\"\n");
    let root: toml::Table = toml::from_str(&text).unwrap();
    let sp = spec::read(&root, "t.toml").unwrap_or_else(|p| panic!("{p}"));
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    let frames: Vec<Vec<u8>> = (0..flows).map(frame).collect();
    let offered = 260_000u64;
    let gap = 1_000_000_000 / offered;
    let n = offered * 3;
    let mut out = 0u64;
    let t0 = std::time::Instant::now();
    for i in 0..n {
        let now = Instant::from_nanos(1_000 + i * gap);
        fw.receive(&frames[(i % flows as u64) as usize], now);
        if fw.next_wakeup().is_some_and(|w| w <= now) {
            fw.wake(now).unwrap();
        }
        if i % 4 == 0 {
            out += fw.transmit(now, 256, |_| {}).unwrap() as u64;
        }
    }
    let el = t0.elapsed().as_nanos() as f64;
    println!(
        "flows {flows} rate {rate}: {:.0} ns per offered frame, {:.0} ns per forwarded frame ({} out of {n})",
        el / n as f64,
        el / out.max(1) as f64,
        out
    );
}
