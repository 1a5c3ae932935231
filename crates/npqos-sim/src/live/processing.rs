//! Processors on real frames (docs/live.md, "Processors on real frames"; docs/everest.md,
//! "The prototype on real frames"): with `[processing]`, the pipeline's processing element runs
//! between the ingress and the egress of the way in, and what it gives the caller to do later
//! (a processor's completion, a context switch's end, a packet visible in its queue) waits
//! here, on the real clock, until it is due.
//!
//! The processors are virtual: a processor that takes a packet is busy until a real-clock time
//! (now plus its service's cost), and its completion runs on the forwarding thread when that
//! time has come, with the packet's service's packet function (the detectors) then. Every
//! effect is handled at its own time in the order the simulator's engine would (time, then
//! class, then the order given), before anything later (an arrival, a transmission), so the
//! pipeline sees one time order as in the simulator; a frame's real lateness shows in its
//! delay, not in the processors' schedule.

use super::Forwarder;
use crate::results::{DetectionRecord, RunResult, Series};
use npqos_core::pipeline::router::{per_interval, Ev, Timed};
use npqos_core::Instant;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A waiting effect: (time ns, class, order given, the effect's kind, its argument).
type Waiting = (u64, u8, u64, u8, u32);

/// Timed effects waiting for their time: a heap by (time, class, order given), the effect
/// packed beside them.
#[derive(Default)]
pub(super) struct Pending {
    heap: BinaryHeap<Reverse<Waiting>>,
    seq: u64,
}

impl Pending {
    pub(super) fn push(&mut self, t: Timed) {
        let (tag, arg) = match t.ev {
            Ev::ProcDone(p) => (0, p),
            Ev::SwitchDone(p) => (1, p),
            Ev::Visible(id) => (2, id),
            Ev::EgressVisible(id) => (3, id),
            Ev::Reenable(b) => (4, b),
            Ev::Sample => (5, 0),
        };
        self.seq += 1;
        self.heap.push(Reverse((t.at.as_nanos(), t.class, self.seq, tag, arg)));
    }
    /// The earliest: its time and class.
    pub(super) fn peek(&self) -> Option<(u64, u8)> {
        self.heap.peek().map(|Reverse(x)| (x.0, x.1))
    }
    fn pop(&mut self) -> Option<(Instant, Ev)> {
        let Reverse((at, _, _, tag, arg)) = self.heap.pop()?;
        let ev = match tag {
            0 => Ev::ProcDone(arg),
            1 => Ev::SwitchDone(arg),
            2 => Ev::Visible(arg),
            3 => Ev::EgressVisible(arg),
            4 => Ev::Reenable(arg),
            _ => Ev::Sample,
        };
        Some((Instant::from_nanos(at), ev))
    }
}

/// Per service the time series of a run with processors.
#[derive(Clone, Debug, Default)]
pub(super) struct ServiceSeries {
    pub t: Vec<f64>,
    /// Per service: offered and late packets so far, processors held, at each sample.
    pub offered: Vec<Vec<f64>>,
    pub late: Vec<Vec<f64>>,
    pub processors: Vec<Vec<f64>>,
}

impl Forwarder {
    /// Taps the pipeline's `ports` (packet captures: [`super::reload::Reloading::capture_to`]).
    pub fn set_taps(&mut self, ports: &[npqos_core::pipeline::router::Port]) {
        self.pipe.set_taps(ports);
    }
    /// The tapped ports' records since they were last taken ([`Self::set_taps`]).
    pub fn tapped(&mut self) -> Option<&mut Vec<npqos_core::pipeline::router::Tapped>> {
        self.pipe.tapped()
    }

    /// The effects the last call gave, to the waiting ones.
    #[inline]
    pub(super) fn absorb(&mut self) {
        for t in self.fx.0.drain(..) {
            self.pending.push(t);
        }
    }

    /// Runs, in time order, every effect and pipeline deadline due at `now` (with processors;
    /// without, only the shaper's deadlines, at `now` as before).
    pub(super) fn run_due(&mut self, now: Instant) {
        let processors = self.pipe.has_processors();
        while self.pipe.error().is_none() {
            let wake = self.pipe.next_wakeup().map(|(t, c)| (t.as_nanos(), c)).filter(|w| w.0 <= now.as_nanos());
            let effect = self.pending.peek().filter(|e| e.0 <= now.as_nanos());
            match (wake, effect) {
                (None, None) => break,
                (w, Some(e)) if w.is_none_or(|w| e < w) => {
                    let (at, ev) = self.pending.pop().expect("peeked");
                    self.pipe.handle(at, ev, &mut self.fx);
                }
                // The pipeline's own deadline first: at its time with processors (the order
                // the engine keeps), at `now` without (the shaper's timer call, as always).
                (Some(w), _) => self.pipe.wake(if processors { Instant::from_nanos(w.0) } else { now }, &mut self.fx),
                (None, Some(_)) => unreachable!("matched above"),
            }
            self.absorb();
        }
    }

    /// One point of the per-service series at `now` (`t` s since the first frame).
    pub(super) fn sample_services(&mut self, t: f64) {
        if !self.pipe.has_processors() {
            return;
        }
        let n = self.rates.len();
        let s = &mut self.svc;
        if s.offered.is_empty() {
            (s.offered, s.late, s.processors) = (vec![Vec::new(); n], vec![Vec::new(); n], vec![Vec::new(); n]);
        }
        s.t.push(t);
        for i in 0..n {
            let (offered, late, procs) = self.pipe.service_now(i);
            s.offered[i].push(offered as f64);
            s.late[i].push(late as f64);
            s.processors[i].push(procs as f64);
        }
    }

    /// With processors: per service its late packets and its packet function's reports, the
    /// time series of the simulator's router (`processors.<service>`, `offered_rate.<service>`,
    /// `late_packets.<service>`), and the reports (detections.csv), their times from the
    /// first frame.
    pub(super) fn processing_result(&self, r: &mut RunResult) {
        if !self.pipe.has_processors() {
            return;
        }
        let names: Vec<String> = (0..self.rates.len()).map(|s| self.pipe.service_name(s).to_string()).collect();
        let (found, counts) = self.pipe.detections();
        let mut late_all = 0;
        for (s, name) in names.iter().enumerate() {
            let (_, late, _) = self.pipe.service_now(s);
            late_all += late;
            r.scalar(&format!("late_packets.{name}"), late as f64, "packets");
            if let Some(u) = self.pipe.function_untracked(s) {
                r.scalar(&format!("detections.{name}"), counts[s] as f64, "detections");
                r.scalar(&format!("function_untracked.{name}"), u as f64, "packets");
            }
        }
        r.scalar("late_packets", late_all as f64, "packets");
        // The drops only processors give (live's own reasons are written with the totals).
        let d = self.pipe.drops();
        for (i, name) in npqos_core::pipeline::router::DROPS.iter().enumerate() {
            if matches!(*name, "late" | "egress_buffer_full") {
                r.scalar(&format!("dropped_{name}"), d[i] as f64, "frames");
            }
        }
        let start = self.start.map_or(0, Instant::as_nanos);
        r.detections = DetectionRecord::from_found(found, &names);
        for d in &mut r.detections {
            d.at_ns = d.at_ns.saturating_sub(start);
            d.window_start_ns = d.window_start_ns.saturating_sub(start);
        }
        let sv = &self.svc;
        let line = |name: String, unit: &str, v: &[f64]| Series {
            name,
            x_unit: "s".into(),
            unit: unit.into(),
            points: sv.t.iter().copied().zip(v.iter().copied()).collect(),
        };
        for (s, name) in names.iter().enumerate().filter(|_| !sv.offered.is_empty()) {
            r.series.push(line(format!("processors.{name}"), "processors", &sv.processors[s]));
            r.series.push(line(
                format!("offered_rate.{name}"),
                "packets/s",
                &per_interval(&sv.t, &sv.offered[s], true),
            ));
            r.series.push(line(format!("late_packets.{name}"), "packets", &per_interval(&sv.t, &sv.late[s], false)));
        }
    }
}
