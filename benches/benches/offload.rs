//! What undoing a sender's offloads costs npqos live per frame (docs/live.md, "Offloads"):
//!
//! * completing a partial UDP checksum of a 106 B and a 1,042 B frame and a TCP one of a 1,514 B frame
//!   (`live::csum::complete_checksum`), beside copying the same frame (what the forwarder does
//!   with every frame anyway, into dqs's buffer);
//! * cutting a 64 KB TCP super-frame into 1,500 B-MTU segments (`live::gso::segment_tcp`,
//!   per segment), beside copying the same bytes out in segment-sized pieces.
//!
//! Run: `cargo bench -p npqos-benches --bench offload`. Results: docs/PERFORMANCE.md.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use etherparse::PacketBuilder;
use npqos_sim::live::csum::complete_checksum;
use npqos_sim::live::gso::segment_tcp;

fn eth() -> etherparse::PacketBuilderStep<etherparse::Ethernet2Header> {
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
}

fn checksums(c: &mut Criterion) {
    let mut udp = Vec::new();
    eth().ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64).udp(5000, 6000).write(&mut udp, &[7u8; 1000]).unwrap();
    let mut small = Vec::new();
    eth().ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64).udp(5000, 6000).write(&mut small, &[7u8; 64]).unwrap();
    let mut tcp = Vec::new();
    eth()
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .tcp(5000, 80, 1, 64_000)
        .ack(1)
        .write(&mut tcp, &[7u8; 1460])
        .unwrap();
    let mut g = c.benchmark_group("offload_checksum");
    g.throughput(Throughput::Elements(1));
    for (name, f) in [("udp_106B", small), ("udp_1042B", udp), ("tcp_1514B", tcp)] {
        let mut frame = f.clone();
        g.bench_function(name, |b| b.iter(|| complete_checksum(black_box(&mut frame))));
        let mut copy = Vec::with_capacity(f.len());
        g.bench_function(format!("{name}_copy_baseline"), |b| {
            b.iter(|| {
                copy.clear();
                copy.extend_from_slice(black_box(&f));
                black_box(&copy);
            })
        });
    }
    g.finish();
}

fn segmentation(c: &mut Criterion) {
    let mut big = Vec::new();
    let data: Vec<u8> = (0..65_000u32).map(|i| i as u8).collect();
    eth().ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64).tcp(5000, 80, 1, 64_000).ack(1).write(&mut big, &data).unwrap();
    let segments = data.len().div_ceil(1460) as u64;
    let mut g = c.benchmark_group("offload_segment_64KB_mtu1500");
    g.throughput(Throughput::Elements(segments));
    let mut scratch = Vec::with_capacity(2048);
    g.bench_function("segment_tcp", |b| {
        b.iter(|| {
            let mut n = 0u64;
            segment_tcp(black_box(&big), 1500, &mut scratch, |s| n += s.len() as u64);
            n
        })
    });
    g.bench_function("copy_baseline", |b| {
        b.iter(|| {
            let mut n = 0u64;
            for chunk in black_box(&big[54..]).chunks(1460) {
                scratch.clear();
                scratch.extend_from_slice(&big[..54]);
                scratch.extend_from_slice(chunk);
                n += black_box(&scratch).len() as u64;
            }
            n
        })
    });
    g.finish();
}

criterion_group!(benches, checksums, segmentation);
criterion_main!(benches);
