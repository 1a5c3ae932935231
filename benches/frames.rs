//! npqos live's forwarder fed from memory: ring blocks of UDP frames laid out as in a TPACKET_V3
//! block, and one turn of the forwarding thread over a block (the `forwarder` and
//! `forwarder_threads` benchmarks).

use npqos_core::Instant;
use npqos_sim::live::{spec, Forwarder};
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// Frames per block.
pub const BLOCK: usize = 256;
/// Bytes from one frame's start to the next in a block (TPACKET_V3 header, frame, padding).
pub const STRIDE: usize = 192;
/// Ethernet, IPv4, UDP and 64 B of payload.
pub const FRAME_LEN: usize = 106;

/// npqos live's forwarder with the live benchmark's table (131,072 queues when `queues` is
/// `None`, 1,048,576 blocks, dqs's AFM slots `slots` or its default), a queue limit of 4 KiB
/// and `flow_rate` (a TOML string's contents, further `[shaper]` keys after it allowed:
/// `500bps"\ncap = "128B`).
pub fn forwarder(flow_rate: &str, queues: Option<u32>, slots: Option<u32>) -> Forwarder {
    let text = format!(
        "[live]\ninput = \"in0\"\noutput = \"out0\"\n[shaper]\nflow_rate = \"{flow_rate}\"\n\
         [table]\nqueues = {}\nblocks = 1048576\nqueue_limit = \"4KiB\"\n{}",
        queues.unwrap_or(131_072),
        slots.map(|s| format!("slots = {s}\n")).unwrap_or_default()
    );
    let root: toml::Table = toml::from_str(&text).unwrap();
    let sp = spec::read(&root, "bench.toml").unwrap_or_else(|p| panic!("{p}"));
    Forwarder::new(&sp, 2048).unwrap()
}

/// Blocks of a frame of each flow in `order` (flow `f` is 198.18.f/16.1 to 198.19.f/8.f, UDP
/// 5000 to 6000), shuffled by a generator seeded with `seed`.
pub fn blocks(mut order: Vec<u32>, seed: u64) -> Vec<Vec<u8>> {
    order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    order
        .chunks(BLOCK)
        .map(|c| {
            let mut b = vec![0u8; BLOCK * STRIDE];
            for (i, &f) in c.iter().enumerate() {
                let mut v = Vec::with_capacity(FRAME_LEN);
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

/// One block through `fw` from `now`, a frame every `gap_ns`, then up to a block's worth
/// transmitted; returns the time after. With `ahead`, each frame's next two are hinted first
/// (`Forwarder::look_ahead`, as npqos live's worker does). A block's empty tail (zeroed
/// frames) is given as frames too, as the short frames a ring can hold; every block of
/// [`blocks`] but the last is full.
pub fn turn(fw: &mut Forwarder, block: &[u8], mut now: u64, gap_ns: u64, ahead: bool) -> u64 {
    let frame = |i: usize| if i < BLOCK { &block[i * STRIDE..i * STRIDE + FRAME_LEN] } else { &[][..] };
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
        now += gap_ns;
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
