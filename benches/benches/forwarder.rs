//! npqos live's forwarder without its rings (docs/PERFORMANCE.md): what one frame costs its
//! thread from the ring block to the transmit ring, in user space, with 1e3 and 1e5 flows of
//! 106 B UDP frames, throttled (20 kbps a flow: most frames dropped at their full 4 KiB
//! queue) and not (10 Gbps a flow), the live benchmark's rows on a simulated clock.
//!
//! Frames come in blocks of 256 laid out one after another as in a TPACKET_V3 block, flows in
//! a seeded random order, 200,000 frames/s of simulated time. Between blocks 8 MiB are written
//! (not timed), as the kernel's copies into the rings and its skbs do between two turns of the
//! forwarding thread on the namespace bed, so that the flows' state is not all in cache.
//! `plain` gives each frame to `receive`; `look_ahead` first hints the next two frames
//! (`Forwarder::look_ahead`, what `npqos live`'s worker does).
//!
//! Run: `cargo bench -p npqos-benches --bench forwarder`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use npqos_core::Instant;
use npqos_sim::live::{spec, Forwarder};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::time::{Duration, Instant as Wall};

const BLOCK: usize = 256;
/// Bytes from one frame's start to the next in a block (TPACKET_V3 header, frame, padding).
const STRIDE: usize = 192;
/// Simulated time between frames: 200,000 frames/s.
const GAP_NS: u64 = 5_000;

fn forwarder(rate: &str) -> Forwarder {
    let text = format!(
        "[live]\ninput = \"in0\"\noutput = \"out0\"\n[shaper]\nflow_rate = \"{rate}\"\n\
         [table]\nqueues = 131072\nblocks = 1048576\nqueue_limit = \"4KiB\"\n"
    );
    let root: toml::Table = toml::from_str(&text).unwrap();
    let sp = spec::read(&root, "bench.toml").unwrap_or_else(|p| panic!("{p}"));
    Forwarder::new(&sp, 2048).unwrap()
}

/// `blocks` blocks of frames of `flows` flows, each flow's frames spread over them.
fn blocks(flows: u32, blocks: usize) -> Vec<Vec<u8>> {
    let mut order: Vec<u32> = (0..(BLOCK * blocks) as u32).map(|i| i % flows).collect();
    order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(7));
    order
        .chunks(BLOCK)
        .map(|c| {
            let mut b = vec![0u8; BLOCK * STRIDE];
            for (i, &f) in c.iter().enumerate() {
                let mut v = Vec::new();
                etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
                    .ipv4([198, 18, (f >> 16) as u8, 1], [198, 19, (f >> 8) as u8, f as u8], 64)
                    .udp(5000, 6000)
                    .write(&mut v, &[7u8; 64])
                    .unwrap();
                b[i * STRIDE..i * STRIDE + v.len()].copy_from_slice(&v);
            }
            b
        })
        .collect()
}

/// One block through `fw` at `now`, then the transmit ring's worth out; returns the time after.
fn turn(fw: &mut Forwarder, block: &[u8], mut now: u64, ahead: bool, len: usize) -> u64 {
    let frame = |i: usize| if i < BLOCK { &block[i * STRIDE..i * STRIDE + len] } else { &[][..] };
    let mut carry = [None, None];
    for i in 0..BLOCK {
        let t = Instant::from_nanos(now);
        if ahead {
            let mine = carry[0];
            carry = fw.look_ahead(frame(i + 1), frame(i + 2), carry[1]);
            fw.receive_ahead(frame(i), t, mine);
        } else {
            fw.receive(frame(i), t);
        }
        now += GAP_NS;
    }
    let t = Instant::from_nanos(now);
    if fw.next_wakeup().is_some_and(|w| w <= t) {
        fw.wake(t).unwrap();
    }
    fw.transmit(t, BLOCK, |f| {
        std::hint::black_box(f);
    })
    .unwrap();
    now
}

fn bench(c: &mut Criterion) {
    // Ethernet, IPv4, UDP and 64 B of payload.
    let len = 106;
    let mut dirt = vec![0u8; 8 << 20];
    let mut g = c.benchmark_group("forwarder");
    g.throughput(Throughput::Elements(BLOCK as u64));
    g.sample_size(20).measurement_time(Duration::from_secs(6));
    for flows in [1_000u32, 100_000] {
        let frames = blocks(flows, 400);
        for (rate, how) in [("20kbps", "throttled"), ("10Gbps", "not_throttled")] {
            for ahead in [false, true] {
                let name = format!(
                    "{}_{how}_{}",
                    if flows == 1000 { "1e3" } else { "1e5" },
                    if ahead { "look_ahead" } else { "plain" }
                );
                let mut fw = forwarder(rate);
                let mut now = 1_000_000u64;
                // Every flow seen before timing starts.
                for b in &frames {
                    now = turn(&mut fw, b, now, ahead, len);
                }
                let mut k = 0;
                g.bench_function(name, |bn| {
                    bn.iter_custom(|iters| {
                        let mut spent = Duration::ZERO;
                        for _ in 0..iters {
                            for (j, d) in dirt.iter_mut().enumerate().step_by(64) {
                                *d = d.wrapping_add(j as u8);
                            }
                            let w = Wall::now();
                            now = turn(&mut fw, &frames[k % frames.len()], now, ahead, len);
                            spent += w.elapsed();
                            k += 1;
                        }
                        spent
                    })
                });
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
