//! Writes a synthetic Ethernet/IPv4/UDP pcap of a target size: IMIX packet sizes (kim Table I),
//! a weighted population of flows, Poisson arrivals at a given rate. Used to measure the trace
//! reader on large files (docs/PERFORMANCE.md).
//!
//! `cargo run --release -p npqos-sim --example gen_pcap -- OUT.pcap SIZE [FLOWS] [SEED]`
//! e.g. `... -- /tmp/big.pcap 1GB 10000`

use npqos_sim::rng::RngStreams;
use npqos_sim::trace::writer::{udp4_frame, PcapWriter};
use npqos_sim::units::parse_size;
use npqos_sim::workload::{FlowPopulation, FlowWeights, SizeDist};
use rand::Rng;
use std::io::BufWriter;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: gen_pcap OUT.pcap SIZE [FLOWS] [SEED]   (SIZE such as 1GB)");
        std::process::exit(2);
    }
    let target = parse_size(&args[2]).unwrap_or_else(|e| {
        eprintln!("SIZE {:?}: {e}", args[2]);
        std::process::exit(2)
    });
    let flows: usize = args.get(3).map(|s| s.parse().expect("FLOWS is a count")).unwrap_or(10_000);
    let seed: u64 = args.get(4).map(|s| s.parse().expect("SEED is an integer")).unwrap_or(1);
    let streams = RngStreams::new(seed);
    let (mut rs, mut rf, mut rt) =
        (streams.stream("gen.sizes", 0), streams.stream("gen.flows", 0), streams.stream("gen.gaps", 0));
    let sizes = SizeDist::kim_imix();
    let mut pop = FlowPopulation::new(flows, &FlowWeights::ExpDecay { ratio: 0.9995 }, None).expect("valid population");
    let f = std::fs::File::create(&args[1]).expect("create output");
    let mut w = PcapWriter::new(BufWriter::with_capacity(1 << 20, f), 1, 65535, true, false).expect("write header");
    let (mut written, mut ts, mut n) = (24u64, 1_700_000_000_000_000_000u64, 0u64);
    // Pre-built frames per size (payload zeros), patched per flow: addresses and ports.
    while written < target {
        let size = sizes.sample(&mut rs).max(64) as usize; // Ethernet minimum frame
        let flow = pop.next_flow(&mut rf) as u32;
        let mut frame = udp4_frame(
            [10, (flow >> 16) as u8, (flow >> 8) as u8, flow as u8],
            [192, 168, 0, 1],
            1024 + (flow % 50000) as u16,
            80,
            size - 42,
        );
        frame.truncate(size);
        ts += rt.random_range(0..200u64);
        w.write(ts, &frame, size as u32).expect("write record");
        written += 16 + size as u64;
        n += 1;
    }
    eprintln!("{}: {n} packets, {written} bytes", args[1]);
}
