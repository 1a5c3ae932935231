//! Synthetic heavy-tailed flows (dqs section 6's workload, also the router's): a closed
//! population of flows in progress, each a Pareto number of packets with exponential gaps, and
//! the packets they offer ([`Arrival`]: time, wire length, 5-tuple) in time order.

use crate::rng::StreamRng;
use crate::workload::SizeDist;
use npqos_core::flow::{FlowKey, PROTO_TCP};
use npqos_core::Duration;
use radix_heap::RadixHeapMap;
use rand::Rng;
use std::cmp::Reverse;

/// One packet offered to the flow table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arrival {
    pub ts: u64,
    pub len: u32,
    pub flow: FlowKey,
}

/// A synthetic heavy-tailed flow workload (closed population): `in_progress` flows exist at
/// every moment; each sends a Pareto number of packets (shape `pareto_shape`, mean
/// `mean_packets` before rounding up to whole packets) with exponential gaps of mean
/// `mean_gap` and sizes from `sizes`; when a flow has sent its last packet a new flow (new
/// 5-tuple) takes its place. Offered rate: `in_progress / mean_gap` packets per second.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticFlows {
    pub in_progress: u32,
    pub mean_packets: f64,
    pub pareto_shape: f64,
    pub mean_gap: Duration,
    pub sizes: SizeDist,
    pub duration: Duration,
}

impl SyntheticFlows {
    /// Offered bit rate.
    pub fn mean_rate_bps(&self) -> f64 {
        self.in_progress as f64 / self.mean_gap.as_secs_f64() * self.sizes.mean() * 8.0
    }
    /// Expected packets over the duration.
    pub fn expected_packets(&self) -> u64 {
        (self.in_progress as f64 * self.duration.as_secs_f64() / self.mean_gap.as_secs_f64()) as u64
    }
    pub fn generator(&self, rng: StreamRng) -> FlowGen {
        FlowGen::new(self.clone(), rng)
    }
}

/// The packet stream of a [`SyntheticFlows`] workload, in time order.
pub struct FlowGen {
    p: SyntheticFlows,
    rng: StreamRng,
    /// (next packet time, flow slot), earliest first. A radix heap: a flow's next time is
    /// always later than the time just taken, so the queue is monotone, and a pop costs a few
    /// sequential bucket moves instead of a binary heap's chain of cache misses over 1e6
    /// flows. Slots are unique, so the order is the binary heap's exactly.
    heap: RadixHeapMap<Reverse<(u64, u32)>, ()>,
    remaining: Vec<u32>,
    ids: Vec<u64>,
    next_id: u64,
    x_m: f64,
}

/// A 5-tuple from a flow id: (source address, source port) is a bijection of the low 48 bits
/// of the id, so distinct ids give distinct keys.
pub fn synthetic_key(id: u64) -> FlowKey {
    const MASK: u64 = (1 << 48) - 1;
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4B) & MASK;
    x ^= x >> 24;
    x = x.wrapping_mul(0xD6E8_FEB8_6659) & MASK;
    let src = std::net::Ipv4Addr::from((x >> 16) as u32);
    let dst = std::net::Ipv4Addr::from(0xC000_0200 | (id.wrapping_mul(0x2545_F491) >> 40) as u32 & 0xFF);
    FlowKey::new(src.into(), dst.into(), PROTO_TCP, x as u16, 443)
}

impl FlowGen {
    fn new(p: SyntheticFlows, rng: StreamRng) -> Self {
        let a = p.pareto_shape;
        let x_m = p.mean_packets * (a - 1.0) / a;
        let mut g = FlowGen {
            heap: RadixHeapMap::new(),
            remaining: vec![0; p.in_progress as usize],
            ids: vec![0; p.in_progress as usize],
            next_id: 0,
            x_m,
            p,
            rng,
        };
        for s in 0..g.p.in_progress {
            g.start_flow(s);
            // Stationary start: gaps are exponential (memoryless), so the time to each flow's
            // first packet is one more gap. (A uniform point of a gap front-loads arrivals.)
            let t = g.gap() as u64;
            g.heap.push(Reverse((t, s)), ());
        }
        g
    }

    fn gap(&mut self) -> f64 {
        let u: f64 = self.rng.random();
        -(1.0 - u).ln() * self.p.mean_gap.as_nanos() as f64
    }

    fn start_flow(&mut self, s: u32) {
        let u: f64 = self.rng.random();
        let x = self.x_m / (1.0 - u).powf(1.0 / self.p.pareto_shape);
        self.remaining[s as usize] = x.ceil().clamp(1.0, u32::MAX as f64) as u32;
        self.ids[s as usize] = self.next_id;
        self.next_id += 1;
    }

    /// Flows started so far.
    pub fn flows_started(&self) -> u64 {
        self.next_id
    }
}

impl Iterator for FlowGen {
    type Item = Arrival;
    fn next(&mut self) -> Option<Arrival> {
        let (Reverse((t, s)), ()) = self.heap.pop()?;
        if t >= self.p.duration.as_nanos() {
            return None;
        }
        let flow = synthetic_key(self.ids[s as usize]);
        let len = self.p.sizes.sample(&mut self.rng);
        self.remaining[s as usize] -= 1;
        if self.remaining[s as usize] == 0 {
            self.start_flow(s);
        }
        let next = t + self.gap().max(1.0) as u64;
        self.heap.push(Reverse((next, s)), ());
        Some(Arrival { ts: t, len, flow })
    }
}
