//! Real trace input: streaming pcap / pcapng reading ([`reader`]), link-layer decoding
//! ([`decode`]), a time-ordered merge of several files on one time axis ([`Alignment`]: by
//! absolute timestamp, or each file from time zero with long gaps capped), and the
//! transformations used to turn small captures into router-scale workloads ([`TraceSource`]):
//! rebasing to time zero, speeding up by a factor, and flow multiplication. [`stats`] summarises traces for `npqos trace stats`;
//! [`writer`] writes pcap files (test corpora, generated workloads).

pub mod capture;
pub mod corpus;
pub mod decode;
pub mod reader;
pub mod stats;
pub mod writer;

use crate::merge::{KMerge, Source};
use decode::{decode, NonIp, PacketMeta};
use npqos_core::flow::FlowKey;
use npqos_core::{Duration, Instant};
use rand::Rng;
pub use reader::{Format, ReaderCounters, TraceError, TraceReader};
use std::path::PathBuf;
use std::sync::Arc;

/// One record of a (merged) trace, decoded.
#[derive(Clone, Copy, Debug)]
pub struct TracePacket {
    /// Timestamp (absolute in a [`Merge`], rebased and scaled in a [`TraceSource`]).
    pub ts: Instant,
    pub wire_len: u32,
    pub link: u16,
    /// The 5-tuple, or why the record is not an IP packet.
    pub flow: Result<FlowKey, NonIp>,
    /// Index of the file it came from.
    pub file: usize,
}

/// How the files of a multi-file trace share one time axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alignment {
    /// Every record keeps its absolute timestamp: for captures taken at one vantage point at
    /// the same time. Files recorded years apart then lie years apart in the merged stream.
    Absolute,
    /// Every file starts at time 0, and each gap between consecutive records of a file is
    /// capped at `max_gap` (idle periods shrink; bursts and order within a file are kept; a
    /// record that goes back in time gets a zero gap). For collections of unrelated captures
    /// (such as the nDPI test corpus): every file contributes from the start of the run.
    Start { max_gap: Duration },
}

/// Maps one file's timestamps onto the [`Alignment::Start`] axis: 0 for the first record,
/// then the running sum of capped gaps.
#[derive(Clone, Copy, Debug)]
pub struct Aligner {
    max_gap: u64,
    last_in: Option<u64>,
    out: u64,
}

impl Aligner {
    pub fn new(max_gap: Duration) -> Self {
        Aligner { max_gap: max_gap.as_nanos(), last_in: None, out: 0 }
    }
    /// The aligned time of the next record, whose own timestamp is `ts` ns.
    pub fn map(&mut self, ts: u64) -> u64 {
        if let Some(last) = self.last_in {
            self.out += ts.saturating_sub(last).min(self.max_gap);
        }
        self.last_in = Some(ts);
        self.out
    }
}

/// Several trace files merged into one stream in timestamp order, on the time axis of an
/// [`Alignment`]. Equal timestamps are taken from the lower file index first, and within one
/// file in file order, so the merge is deterministic. Under [`Alignment::Absolute`], records
/// within one file that go back in time are passed on as they are (captures are not always
/// sorted); the merge only orders across files.
pub struct Merge {
    files: KMerge<FileSource>,
}

/// One file of a [`Merge`]: its reader and, on a start-aligned axis, its aligner.
struct FileSource {
    reader: TraceReader,
    aligner: Option<Aligner>,
    file: usize,
}

impl Source for FileSource {
    type Item = TracePacket;
    type Error = TraceError;
    fn next(&mut self) -> Result<Option<(u64, TracePacket)>, TraceError> {
        let aligner = &mut self.aligner;
        Ok(self.reader.next()?.map(|rec| {
            let ts = match aligner {
                Some(a) => a.map(rec.ts_ns),
                None => rec.ts_ns,
            };
            let p = TracePacket {
                ts: Instant::from_nanos(ts),
                wire_len: rec.orig_len,
                link: rec.link,
                flow: decode(&rec).map(|m: PacketMeta| m.flow),
                file: self.file,
            };
            (ts, p)
        }))
    }
}

impl Merge {
    /// The files merged by absolute timestamp.
    pub fn open(paths: &[PathBuf], lenient: bool) -> Result<Self, TraceError> {
        Self::open_aligned(paths, lenient, Alignment::Absolute)
    }

    /// The files merged on the time axis of `align`.
    pub fn open_aligned(paths: &[PathBuf], lenient: bool, align: Alignment) -> Result<Self, TraceError> {
        let mut sources = Vec::with_capacity(paths.len());
        for (file, p) in paths.iter().enumerate() {
            let aligner = match align {
                Alignment::Absolute => None,
                Alignment::Start { max_gap } => Some(Aligner::new(max_gap)),
            };
            sources.push(FileSource { reader: TraceReader::open(p, lenient)?, aligner, file });
        }
        Ok(Merge { files: KMerge::new(sources)? })
    }

    /// The next record in time order.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<TracePacket>, TraceError> {
        Ok(self.files.next_from()?.map(|(_, _, p)| p))
    }

    /// Sum of the readers' lenient-mode counters.
    pub fn counters(&self) -> ReaderCounters {
        let mut c = ReaderCounters::default();
        for f in self.files.sources() {
            let rc = f.reader.counters();
            c.corrupt_skipped += rc.corrupt_skipped;
            c.abandoned_tail |= rc.abandoned_tail;
        }
        c
    }
}

/// How a trace is turned into a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceOptions {
    pub files: Vec<PathBuf>,
    pub lenient: bool,
    /// Speed-up factor (> 0): inter-packet times are divided by it. 1 keeps the original pace.
    pub time_scale: f64,
    /// Number of copies of the trace overlaid (>= 1); see [`TraceSource`].
    pub flow_multiply: u32,
    /// The time axis the files are merged on.
    pub align: Alignment,
}

/// A trace as a workload: the files merged (on the axis of [`TraceOptions::align`]), rebased
/// so the first packet is at time zero,
/// sped up by `time_scale`, and overlaid `flow_multiply` times.
///
/// Flow multiplication follows the everest paper's trace scaling ("we scale the number of flows
/// observed in unit time, and retain the flow level properties", everest section 5): copy `j`
/// of the trace is rotated in time by an offset `o_j` drawn uniformly from `[0, D)` (`D` the
/// trace duration; copy 0 is not rotated) — packets after `D - o_j` wrap to the start — and its
/// flows get distinct keys (the copy index becomes the key's `zone`). The result has
/// the same duration, `k` times the flows and packets per unit time, and every flow keeps its
/// packet sizes and inter-packet gaps. Rotation needs the duration first, so `k > 1` reads the
/// files once more up front; each copy streams its two segments one after the other, so memory
/// stays constant and `k x files` readers are open at once.
pub struct TraceSource {
    copies: KMerge<Overlay>,
}

/// One overlaid copy of the trace (flow multiplication), a source of the copies' merge.
struct Overlay {
    index: u32,
    /// Offset o_j in original (unscaled) nanoseconds.
    offset: u64,
    /// 0: emitting the wrapped tail segment, 1: the head segment, 2: done.
    phase: u8,
    merge: Option<Merge>,
    opts: Arc<TraceOptions>,
    first_ts: u64,
    duration: u64,
    /// Counters of this copy's readers already closed.
    retired: ReaderCounters,
}

impl TraceSource {
    /// Opens the trace. `rng` draws the flow-multiplication offsets (unused when `k == 1`).
    pub fn open<R: Rng + ?Sized>(opts: TraceOptions, rng: &mut R) -> Result<Self, TraceError> {
        let k = opts.flow_multiply.max(1);
        let mut probe = Merge::open_aligned(&opts.files, opts.lenient, opts.align)?;
        let first_ts = probe.next()?.map(|p| p.ts.as_nanos()).unwrap_or(0);
        let mut duration = 1u64;
        if k > 1 {
            let mut last = first_ts;
            while let Some(p) = probe.next()? {
                last = last.max(p.ts.as_nanos());
            }
            duration = last.saturating_sub(first_ts) + 1;
        }
        drop(probe);
        let opts = Arc::new(opts);
        let copies: Vec<Overlay> = (0..k)
            .map(|j| {
                let offset = if j == 0 { 0 } else { rng.random_range(0..duration) };
                Overlay {
                    index: j,
                    offset,
                    phase: if offset == 0 { 1 } else { 0 },
                    merge: None,
                    opts: opts.clone(),
                    first_ts,
                    duration,
                    retired: ReaderCounters::default(),
                }
            })
            .collect();
        Ok(TraceSource { copies: KMerge::new(copies)? })
    }

    /// Lenient-mode counters of every reader opened so far (each copy counts its own reads).
    pub fn counters(&self) -> ReaderCounters {
        let mut c = ReaderCounters::default();
        for cp in self.copies.sources() {
            let open = cp.merge.as_ref().map(|m| m.counters()).unwrap_or_default();
            for mc in [cp.retired, open] {
                c.corrupt_skipped += mc.corrupt_skipped;
                c.abandoned_tail |= mc.abandoned_tail;
            }
        }
        c
    }

    /// The next packet of the workload, in time order.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<TracePacket>, TraceError> {
        Ok(self.copies.next_from()?.map(|(_, _, p)| p))
    }
}

impl Overlay {
    fn retire(&mut self) {
        if let Some(m) = self.merge.take() {
            let mc = m.counters();
            self.retired.corrupt_skipped += mc.corrupt_skipped;
            self.retired.abandoned_tail |= mc.abandoned_tail;
        }
    }
}

impl Source for Overlay {
    type Item = TracePacket;
    type Error = TraceError;

    /// The copy's next packet: rotated by its offset, rebased, scaled, its flows in the copy's
    /// zone.
    fn next(&mut self) -> Result<Option<(u64, TracePacket)>, TraceError> {
        loop {
            if self.phase >= 2 {
                return Ok(None);
            }
            if self.merge.is_none() {
                self.merge = Some(Merge::open_aligned(&self.opts.files, self.opts.lenient, self.opts.align)?);
            }
            let cut = self.duration - self.offset; // phase 0 keeps rel >= cut, phase 1 rel < cut
            let next = self.merge.as_mut().expect("opened").next()?;
            let Some(mut p) = next else {
                self.phase += 1;
                self.retire();
                continue;
            };
            let rel = p.ts.as_nanos().saturating_sub(self.first_ts);
            let shifted = match self.phase {
                0 if rel >= cut => rel - cut,
                0 => continue,
                _ if self.offset == 0 => rel,
                _ if rel < cut => rel + self.offset,
                _ => {
                    self.phase = 2;
                    self.retire();
                    continue;
                }
            };
            let scaled = if self.opts.time_scale == 1.0 {
                shifted
            } else {
                (shifted as f64 / self.opts.time_scale).round() as u64
            };
            p.ts = Instant::from_nanos(scaled);
            if let Ok(f) = &mut p.flow {
                // Each copy is its own address space: distinct keys by construction.
                f.zone = self.index as u16;
            }
            return Ok(Some((scaled, p)));
        }
    }
}
