//! A corpus of small captures held in memory and replayed as one router-scale workload.
//!
//! Collections such as the nDPI test captures are hundreds of short files recorded years apart
//! with long idle gaps. Merging them by absolute timestamp gives a stream that is idle for years
//! between files, and overlaying `k` copies through [`super::TraceSource`] would hold
//! `k x files` readers open. A [`Corpus`] instead:
//!
//! 1. reads each file on its own (one reader at a time), keeping the IP packets as
//!    (time, wire length, 5-tuple) records (non-IP records are counted and dropped);
//! 2. **aligns** every file to start at time 0 and **caps** every gap between consecutive
//!    records of a file at `max_gap` ([`super::Alignment::Start`]: idle periods shrink; bursts
//!    and packet order are kept; the same axis `npqos run` gives a multi-file trace scenario
//!    by default);
//! 3. merges the files in time order (ties: lower file index, then file order).
//!
//! [`Corpus::overlay`] then replays `k` copies, copy `j > 0` rotated by an offset drawn
//! uniformly from `[0, D)` and given `zone = j` (the flow multiplication of
//! [`super::TraceSource`]), optionally sped up. 41,000 packets take about 3 MB.

use super::decode::decode;
use super::{Aligner, ReaderCounters, TraceError, TraceReader};
use crate::merge::{KMerge, Source};
use npqos_core::flow::FlowKey;
use npqos_core::Duration;
use rand::Rng;
use std::convert::Infallible;
use std::path::PathBuf;

/// One packet of a corpus.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CorpusPacket {
    /// Nanoseconds from the corpus start.
    pub ts: u64,
    pub len: u32,
    pub flow: FlowKey,
    /// Its IP header's DSCP (0-63).
    pub dscp: u8,
    /// Its TCP flags (`None`: not TCP, or the header not captured).
    pub tcp_flags: Option<u8>,
}

/// An aligned, gap-capped, merged set of captures in memory.
#[derive(Clone, Debug)]
pub struct Corpus {
    pub packets: Vec<CorpusPacket>,
    /// Last timestamp + 1 ns.
    pub duration_ns: u64,
    pub files: usize,
    pub non_ip_skipped: u64,
    pub counters: ReaderCounters,
    pub max_gap: Duration,
}

impl Corpus {
    /// Loads `files` (see the module documentation). `lenient` skips corrupt records.
    pub fn load(files: &[PathBuf], lenient: bool, max_gap: Duration) -> Result<Self, TraceError> {
        let mut packets = Vec::new();
        let mut order = Vec::new(); // (ts, file, index in file)
        let mut non_ip = 0u64;
        let mut counters = ReaderCounters::default();
        for (fi, path) in files.iter().enumerate() {
            let mut r = TraceReader::open(path, lenient)?;
            let mut align = Aligner::new(max_gap);
            let mut idx = 0u32;
            while let Some(rec) = r.next()? {
                // Out-of-order records keep their place with a zero gap.
                let out = align.map(rec.ts_ns);
                match decode(&rec) {
                    Ok(m) => {
                        order.push((out, fi as u32, idx));
                        packets.push(CorpusPacket {
                            ts: out,
                            len: rec.orig_len,
                            flow: m.flow,
                            dscp: m.dscp,
                            tcp_flags: m.tcp_flags,
                        });
                        idx += 1;
                    }
                    Err(_) => non_ip += 1,
                }
            }
            let c = r.counters();
            counters.corrupt_skipped += c.corrupt_skipped;
            counters.abandoned_tail |= c.abandoned_tail;
        }
        // Merge: sort a permutation by (ts, file, index).
        let mut perm: Vec<usize> = (0..packets.len()).collect();
        perm.sort_by_key(|&i| order[i]);
        let packets: Vec<CorpusPacket> = perm.into_iter().map(|i| packets[i]).collect();
        let duration_ns = packets.last().map_or(0, |p| p.ts + 1);
        Ok(Corpus { packets, duration_ns, files: files.len(), non_ip_skipped: non_ip, counters, max_gap })
    }

    pub fn bytes(&self) -> u64 {
        self.packets.iter().map(|p| p.len as u64).sum()
    }

    /// Distinct flows.
    pub fn flows(&self) -> usize {
        let mut keys: Vec<FlowKey> = self.packets.iter().map(|p| p.flow).collect();
        keys.sort_unstable();
        keys.dedup();
        keys.len()
    }

    /// Mean bit rate of `copies` overlaid copies sped up `time_scale` times, in bits/s.
    pub fn mean_rate_bps(&self, copies: u32, time_scale: f64) -> f64 {
        self.bytes() as f64 * 8.0 * copies as f64 / (self.duration_ns as f64 / time_scale * 1e-9)
    }

    /// `copies` overlaid copies (copy 0 unrotated), sped up `time_scale` times. `rng` draws the
    /// rotations.
    pub fn overlay<R: Rng + ?Sized>(&self, copies: u32, time_scale: f64, rng: &mut R) -> Overlay<'_> {
        let d = self.duration_ns.max(1);
        let n = self.packets.len();
        let cursors: Vec<Cursor> = (0..copies.max(1))
            .map(|j| {
                let offset = if j == 0 { 0 } else { rng.random_range(0..d) };
                // The first packet at or after the cut d - offset leads the rotated copy.
                let start = if offset == 0 { 0 } else { self.packets.partition_point(|p| p.ts < d - offset) };
                Cursor { offset, start, done: 0 }
            })
            .collect();
        let copies = cursors.into_iter().map(|c| RotatedCopy { corpus: self, cursor: c, time_scale, n }).collect();
        Overlay { copies: KMerge::new(copies).unwrap_or_else(|e: Infallible| match e {}) }
    }
}

struct Cursor {
    offset: u64,
    start: usize,
    done: usize,
}

/// One rotated copy of the corpus: its packets from the cut, wrapped, on the copy's time axis.
struct RotatedCopy<'a> {
    corpus: &'a Corpus,
    cursor: Cursor,
    time_scale: f64,
    n: usize,
}

impl Source for RotatedCopy<'_> {
    type Item = CorpusPacket;
    type Error = Infallible;
    #[inline]
    fn next(&mut self) -> Result<Option<(u64, CorpusPacket)>, Infallible> {
        let c = &mut self.cursor;
        if c.done >= self.n {
            return Ok(None);
        }
        let d = self.corpus.duration_ns.max(1);
        let p = self.corpus.packets[(c.start + c.done) % self.n];
        c.done += 1;
        let t = (p.ts + c.offset) % d;
        let t = if self.time_scale == 1.0 { t } else { (t as f64 / self.time_scale).round() as u64 };
        Ok(Some((t, p)))
    }
}

/// Iterator over an overlay of a corpus, in time order (ties: lower copy first).
pub struct Overlay<'a> {
    copies: KMerge<RotatedCopy<'a>>,
}

impl Iterator for Overlay<'_> {
    type Item = CorpusPacket;
    #[inline]
    fn next(&mut self) -> Option<CorpusPacket> {
        let (t, j, mut p) = self.copies.next()?;
        p.ts = t;
        p.flow.zone = j as u16;
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn corpus(ts: &[u64]) -> Corpus {
        let packets = ts
            .iter()
            .enumerate()
            .map(|(i, &t)| CorpusPacket {
                ts: t,
                len: 100,
                flow: FlowKey { src_port: i as u16, ..Default::default() },
                dscp: 0,
                tcp_flags: None,
            })
            .collect::<Vec<_>>();
        Corpus {
            duration_ns: ts.last().unwrap() + 1,
            packets,
            files: 1,
            non_ip_skipped: 0,
            counters: Default::default(),
            max_gap: Duration::from_secs(1),
        }
    }

    #[test]
    fn overlay_rotates_copies_and_keeps_time_order() {
        let c = corpus(&[0, 10, 20, 30, 40, 50, 60, 70, 80, 90]);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let out: Vec<CorpusPacket> = c.overlay(4, 1.0, &mut rng).collect();
        assert_eq!(out.len(), 40);
        assert!(out.windows(2).all(|w| w[0].ts <= w[1].ts));
        for z in 0..4u16 {
            let copy: Vec<&CorpusPacket> = out.iter().filter(|p| p.flow.zone == z).collect();
            assert_eq!(copy.len(), 10);
            assert!(copy.iter().all(|p| p.ts < c.duration_ns));
            // Every original packet appears once per copy.
            let mut ports: Vec<u16> = copy.iter().map(|p| p.flow.src_port).collect();
            ports.sort();
            assert_eq!(ports, (0..10).collect::<Vec<u16>>());
        }
        // Copy 0 is the corpus itself.
        let c0: Vec<u64> = out.iter().filter(|p| p.flow.zone == 0).map(|p| p.ts).collect();
        assert_eq!(c0, (0..10).map(|i| i * 10).collect::<Vec<u64>>());
        assert!((c.mean_rate_bps(4, 2.0) - 8.0 * 4000.0 * 2.0 / 91e-9).abs() < 1.0);
    }
}
