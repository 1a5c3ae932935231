//! Stages 1 and 2 and the per-flow bucket hint: the packet stream, classified, with its
//! processing cost drawn and its flow's first-seen index among the per-flow-shaped flows. None of this depends on the state of
//! the pipeline behind it, only on the stream, so it can run ahead on a second thread
//! ([`crate::engine::feed`]): the pipeline sees the same arrivals, in the same order, with the
//! same draws, whether they were made inline or on the helper thread, so results are
//! byte-identical for any `--threads`.

use super::{MixEntry, RouterParams, RouterTraffic};
use crate::rng::{RngStreams, StreamRng};
use crate::trace::corpus::Overlay;
use npqos_core::classify::Classifier;
use npqos_core::flow::FlowKey;
use npqos_core::pipeline::router::bucket_key;
use npqos_core::pipeline::FlowIndex;
use rand::Rng;

pub(crate) use npqos_core::pipeline::router::{Arrival, NO_HINT, NO_SLOT, UNCLASSIFIED};

/// The packet stream: (time ns, length, flow key).
enum Stream<'a> {
    Synthetic(Box<crate::workload::flows::FlowGen>, &'a [MixEntry]),
    Corpus(Overlay<'a>),
}

impl Iterator for Stream<'_> {
    /// Time, length, flow, DSCP (synthetic packets: 0), TCP flags (synthetic packets: none).
    type Item = (u64, u32, FlowKey, u8, Option<u8>);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Stream::Synthetic(g, mix) => {
                let a = g.next()?;
                let mut k = a.flow;
                if let Some(m) = pick(mix, &k) {
                    k.proto = m.protocol;
                    k.dst_port = m.port;
                }
                Some((a.ts, a.len, k, 0, None))
            }
            Stream::Corpus(o) => o.next().map(|c| (c.ts, c.len, c.flow, c.dscp, c.tcp_flags)),
        }
    }
}

/// The mix entry of a synthetic flow: a hash of its source (unique per flow) against the
/// cumulative shares, so every packet of the flow gets the same one.
fn pick<'m>(mix: &'m [MixEntry], k: &FlowKey) -> Option<&'m MixEntry> {
    let mut x = u64::from_le_bytes(k.src[8..16].try_into().expect("8 bytes")) ^ ((k.src_port as u64) << 48);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let total: f64 = mix.iter().map(|m| m.share).sum();
    let u = (x >> 11) as f64 / (1u64 << 53) as f64 * total;
    let mut acc = 0.0;
    mix.iter()
        .find(|m| {
            acc += m.share;
            u < acc
        })
        .or(mix.last())
}

/// Makes [`Arrival`]s from the stream until the end of the offered traffic.
pub(super) struct Prep<'a> {
    p: &'a RouterParams,
    stream: Stream<'a>,
    end: u64,
    classifier: Classifier,
    cost_rng: StreamRng,
    /// First output queue of each service's per-flow buckets (0: one queue for the service).
    eq_base: Vec<u32>,
    /// Per-flow buckets' hints: each flow's first-seen index while there are at most
    /// `shaping.flow_queues` flows; later flows have none.
    flows: std::collections::HashMap<FlowKey, u32, foldhash::fast::FixedState>,
    /// The flow counters' rows: made here, from the stream alone, so that the pipeline's
    /// thread only adds to a row.
    pub index: FlowIndex,
    /// The hash of the pipeline's ingress slots (dqs's): each arrival's slot is worked out
    /// here, off the pipeline's thread ([`Arrival::slot`]).
    slots: Option<npqos_core::flowmap::SlotHash>,
    /// The stream has ended (or reached `end`): later calls make nothing.
    done: bool,
}

impl<'a> Prep<'a> {
    pub fn new(
        p: &'a RouterParams,
        traffic: &'a RouterTraffic,
        streams: &RngStreams,
        classifier: Classifier,
        eq_base: Vec<u32>,
        slots: Option<npqos_core::flowmap::SlotHash>,
    ) -> Self {
        let stream = match traffic {
            RouterTraffic::Synthetic { flows, mix } => {
                Stream::Synthetic(Box::new(flows.generator(streams.stream("router.flows", 0))), mix.as_slice())
            }
            RouterTraffic::Corpus { corpus, copies, time_scale } => {
                let mut rng = streams.stream("router.overlay", 0);
                Stream::Corpus(corpus.overlay(*copies, *time_scale, &mut rng))
            }
        };
        Prep {
            p,
            stream,
            end: p.duration.as_nanos(),
            classifier,
            cost_rng: streams.stream("router.cost", 0),
            eq_base,
            // The map's hasher only places entries; results do not depend on it.
            flows: std::collections::HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0)),
            index: FlowIndex::new(p.stats.flows as usize, p.stats.heavy_flows as usize),
            slots,
            done: false,
        }
    }
}

impl Iterator for Prep<'_> {
    type Item = Arrival;
    fn next(&mut self) -> Option<Arrival> {
        if self.done {
            return None;
        }
        let Some((t, len, key, dscp, tcp_flags)) = self.stream.next().filter(|a| a.0 < self.end) else {
            self.done = true;
            return None;
        };
        let Some(s) = self.classifier.classify_packet(&key, dscp).map(|s| s.index()) else {
            let row = self.index.row(&key, UNCLASSIFIED, len);
            return Some(Arrival {
                t,
                len,
                service: UNCLASSIFIED,
                eq: 0,
                hint: NO_HINT,
                actual: 0.0,
                key,
                row,
                tcp_flags,
                slot: NO_SLOT,
            });
        };
        let svc = &self.p.services[s];
        let est = svc.est_ns(len);
        let u: f64 = self.cost_rng.random();
        let actual = (est * (1.0 + svc.variation * (2.0 * u - 1.0))).max(0.0);
        let mut hint = NO_HINT;
        let eq = if self.eq_base[s] != 0 {
            let n = self.flows.len() as u32;
            // Per flow, or per host: every flow of one subscriber the same hint.
            let bk = bucket_key(&key, svc.host);
            hint = match self.flows.get(&bk) {
                Some(&f) => f,
                None if n < self.p.shaping.flow_queues => *self.flows.entry(bk).or_insert(n),
                None => NO_HINT,
            };
            self.eq_base[s] + if hint == NO_HINT { 0 } else { hint }
        } else {
            s as u32
        };
        let row = self.index.row(&key, s as u32, len);
        let slot = self.slots.as_ref().map_or(NO_SLOT, |h| h.slot(&key));
        Some(Arrival { t, len, service: s as u32, eq, hint, actual, key, row, tcp_flags, slot })
    }
}
