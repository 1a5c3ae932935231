//! The router in simulated time: the engine drives the pipeline ([`super::pipeline`]). It owns
//! the clock and the stream of classified arrivals (stages 1 and 2, made inline or on a helper
//! thread), hands the pipeline each arrival at its time, wakes it at the deadlines it gives,
//! schedules the timed effects it asks for and hands them back when they come. Nothing here
//! decides anything about a packet.

use super::arrivals::{Arrival, Prep};
use super::pipeline::{self, Effects, Ev, Pipeline, C_ARRIVAL, C_SAMPLE};
use super::{RouterError, RouterParams, RouterTraffic};
use crate::engine::feed::Feed;
use crate::engine::{Engine, Model, RunLimits, StopReason};
use crate::results::RunResult;
use crate::rng::RngStreams;
use npqos_core::pipeline::FlowIndex;
use npqos_core::Instant;
use rand::Rng;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Arrivals ahead of the current one whose per-flow bucket record is prefetched.
const BUCKET_AHEAD: usize = 4;

/// Where a run's packet captures go (`[output] pcap`; docs/router.md, "Packet captures"): the
/// directory, the files' prefix, the ports, the packets per file and the snap length.
#[derive(Clone, Debug)]
pub struct CaptureTo {
    pub dir: std::path::PathBuf,
    pub prefix: String,
    pub ports: Vec<pipeline::Port>,
    pub limit: u64,
    pub snaplen: u32,
}

struct Driver<'a> {
    pipe: Pipeline,
    /// The captures of the tapped ports, written after each call to the pipeline.
    capture: Option<crate::trace::capture::PortCaptures>,
    capture_error: Option<String>,
    /// Stages 1 and 2: the classified arrivals, made inline or on a helper thread.
    feed: Feed<Prep<'a>, Arrival>,
    fx: Effects,
    /// What `next_source` announced last: `source` runs it (the engine calls `source` right
    /// after the `next_source` that chose it).
    next: (Instant, u8),
    /// The end of arrivals, ns (progress is the share of it done).
    end: u64,
    arrivals: u64,
    progress_every: u64,
    progress: &'a mut dyn FnMut(f64),
}

impl<'a> Driver<'a> {
    fn new(
        p: &'a RouterParams,
        traffic: &'a RouterTraffic,
        seed: u64,
        trace: bool,
        progress: &'a mut dyn FnMut(f64),
    ) -> Result<Self, RouterError> {
        let classifier = pipeline::classifier(p)?;
        let hash_seed = RngStreams::new(seed).stream("router.hash", 0).random();
        let pipe = Pipeline::new(Arc::new(p.clone()), traffic.mean_len(), hash_seed, trace)?;
        let prep = Prep::new(
            p,
            traffic,
            &RngStreams::new(seed),
            classifier,
            pipe.eq_base().to_vec(),
            pipe.ingress_slot_hash(),
        );
        let expected = (traffic.mean_rate_bps() / 8.0 / traffic.mean_len().max(1.0) * p.duration.as_secs_f64()) as u64;
        Ok(Driver {
            pipe,
            capture: None,
            capture_error: None,
            feed: Feed::new(prep),
            fx: Effects::default(),
            next: (Instant::ZERO, C_ARRIVAL),
            end: p.duration.as_nanos(),
            arrivals: 0,
            progress_every: (expected / 200).max(1 << 12),
            progress,
        })
    }

    /// Schedules the effects the last call gave; stops the run if the pipeline refused.
    #[inline]
    fn flush(&mut self, engine: &mut Engine<Ev>) {
        for t in self.fx.0.drain(..) {
            engine.schedule_class(t.at, t.class, t.ev);
        }
        if let (Some(c), Some(t)) = (self.capture.as_mut(), self.pipe.tapped()) {
            if let Err(e) = c.write(t) {
                self.capture_error.get_or_insert(e.to_string());
                engine.halt();
            }
        }
        if self.pipe.error().is_some() {
            engine.halt();
        }
    }

    /// The flows named by the stream's index (without it, a stopped inline feed, only the
    /// flows past the table are known).
    fn index(&mut self) -> FlowIndex {
        self.feed.into_maker().map(|prep| prep.index).unwrap_or_else(|| FlowIndex::new(0, 0))
    }
}

impl Model for Driver<'_> {
    type Event = Ev;
    #[inline]
    fn handle(&mut self, ev: Ev, engine: &mut Engine<Ev>) {
        self.pipe.handle(engine.now(), ev, &mut self.fx);
        self.flush(engine);
    }

    #[inline]
    fn next_source(&mut self) -> Option<(Instant, u8)> {
        // The pipeline's deadline or the next arrival; at one instant, the lower class.
        let arrival = self.feed.peek().map(|a| (Instant::from_nanos(a.t), C_ARRIVAL));
        let next = match (self.pipe.next_wakeup(), arrival) {
            (Some(w), Some(a)) => Some(w.min(a)),
            (w, a) => w.or(a),
        };
        if let Some(n) = next {
            self.next = n;
        }
        next
    }

    #[inline]
    fn source(&mut self, engine: &mut Engine<Ev>) {
        let now = engine.now();
        if self.next.1 != C_ARRIVAL {
            self.pipe.wake(now, &mut self.fx);
            return self.flush(engine);
        }
        let a = self.feed.next_item().expect("next_source announced an arrival");
        debug_assert_eq!(a.t, now.as_nanos());
        if let Some(x) = self.feed.ahead(BUCKET_AHEAD) {
            self.pipe.prefetch_arrival(x);
        }
        // Half as far ahead, the slot loaded by then: what it leads to (dqs's tree root).
        if let Some(x) = self.feed.ahead(BUCKET_AHEAD / 2) {
            self.pipe.prefetch_arrival_deeper(x);
        }
        self.arrivals += 1;
        if self.arrivals.is_multiple_of(self.progress_every) {
            (self.progress)((a.t as f64 / self.end.max(1) as f64).min(1.0));
        }
        self.pipe.receive(std::slice::from_ref(&a), &mut self.fx);
        self.flush(engine);
    }
}

/// Runs the router on `traffic` with `seed`; `progress` gets the fraction of arrivals done.
/// With `threads` of 2 or more, the arrivals (stages 1 and 2) are made on a second thread;
/// the result is the same byte for byte. A mechanism's refusal ends the run with its error.
pub fn run(
    p: &RouterParams,
    traffic: &RouterTraffic,
    seed: u64,
    threads: usize,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(f64),
) -> Result<RunResult, RouterError> {
    run_captured(p, traffic, seed, threads, interrupt, progress, None)
}

/// [`run`] with the packets of the ports of `capture` written to pcapng files as the run goes
/// (docs/router.md, "Packet captures"); the result says what each file holds
/// (`pcap_packets.<port>`, `pcap_not_written.<port>`, `pcap_cut_at.<port>`).
pub fn run_captured(
    p: &RouterParams,
    traffic: &RouterTraffic,
    seed: u64,
    threads: usize,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(f64),
    capture: Option<&CaptureTo>,
) -> Result<RunResult, RouterError> {
    let mut d = Driver::new(p, traffic, seed, false, progress)?;
    if let Some(c) = capture.filter(|c| !c.ports.is_empty()) {
        let to = |e: std::io::Error| RouterError::Capture(format!("{}: {e}", c.dir.display()));
        d.capture = Some(
            crate::trace::capture::PortCaptures::create(&c.dir, &c.prefix, &c.ports, c.limit, c.snaplen).map_err(to)?,
        );
        d.pipe.set_taps(&c.ports);
    }
    let (stop, events, end) = if threads >= 2 {
        std::thread::scope(|s| {
            d.feed.spawn(s);
            let r = drive(&mut d, interrupt);
            // Dropping the receiver stops the helper if the run ended before the stream.
            d.feed.stop();
            r
        })
    } else {
        drive(&mut d, interrupt)
    };
    if let Some(e) = d.pipe.take_error() {
        return Err(e.into());
    }
    if let Some(e) = d.capture_error.take() {
        return Err(RouterError::Capture(e));
    }
    let captured = match d.capture.take() {
        Some(c) => c.finish().map_err(|e| RouterError::Capture(e.to_string()))?,
        None => Vec::new(),
    };
    let index = d.index();
    let mut r = super::output::finish(d.pipe.into_outcome(events, end), &index, stop)?;
    for c in captured {
        let port = c.port.name();
        r.scalar(&format!("pcap_packets.{port}"), c.written as f64, "packets");
        r.scalar(&format!("pcap_not_written.{port}"), c.not_written as f64, "packets");
        if let Some(t) = c.cut_at_ns {
            r.scalar(&format!("pcap_cut_at.{port}"), t as f64 * 1e-9, "s");
        }
    }
    Ok(r)
}

#[cfg(test)]
pub(super) fn run_traced(
    p: &RouterParams,
    traffic: &RouterTraffic,
    seed: u64,
) -> Result<(RunResult, Vec<pipeline::Trace>), RouterError> {
    let mut progress = |_: f64| {};
    let mut d = Driver::new(p, traffic, seed, true, &mut progress)?;
    let (stop, events, end) = drive(&mut d, None);
    if let Some(e) = d.pipe.take_error() {
        return Err(e.into());
    }
    let index = d.index();
    let mut o = d.pipe.into_outcome(events, end);
    let trace = o.trace.take().unwrap_or_default();
    Ok((super::output::finish(o, &index, stop)?, trace))
}

/// Runs to the end of the drain; returns why it stopped, the events run and the end time.
fn drive(d: &mut Driver<'_>, interrupt: Option<Arc<AtomicBool>>) -> (StopReason, u64, u64) {
    let mut engine = Engine::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    let every = d.pipe.sample_every();
    if every > 0 {
        engine.schedule_class(Instant::from_nanos(every), C_SAMPLE, Ev::Sample);
    }
    let until = d.pipe.until();
    let stop = engine.run(d, RunLimits::until(Instant::from_nanos(until)), &mut |_| {});
    // A run that drains ends when its last packet left the link (not an event of its own).
    let end = match stop {
        StopReason::Drained => engine.now().as_nanos().max(d.pipe.last_delivery()),
        _ => engine.now().as_nanos(),
    };
    (stop, engine.executed(), end)
}

/// A mechanism's refusal stops the engine at once and is the run's result: the pipeline's
/// link round is swapped for one with a single queue, so the first packet of a per-flow
/// queue is refused. (Before the driver was split from the pipeline, the refusal halted the
/// engine but the run returned its partial results as if nothing had happened.)
#[cfg(test)]
#[test]
fn a_refusal_ends_the_run_with_its_error() {
    let p = super::tests::per_flow_shaped();
    let traffic = super::tests::synthetic(10, 1_000);
    let mut progress = |_: f64| {};
    let mut d = Driver::new(&p, &traffic, 1, false, &mut progress).expect("a valid router");
    d.pipe.set_link_round(npqos_core::sched::drr::Drr::new(1, 1500).expect("one queue"));
    let (stop, _, end) = drive(&mut d, None);
    assert_eq!(stop, StopReason::Halted);
    match d.pipe.take_error() {
        Some(pipeline::PipelineError::Mechanism { at, stage, .. }) => {
            assert_eq!(at, end, "the engine stopped at the refusal");
            assert!(stage.starts_with("egress"), "{stage}");
        }
        other => panic!("no refusal: {other:?}"),
    }
}
