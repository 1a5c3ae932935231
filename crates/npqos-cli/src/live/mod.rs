//! `npqos live` (docs/live.md): the library's mechanisms forwarding real frames from one network
//! interface to another, Linux only.
//!
//! * [`ring`]: AF_PACKET sockets with TPACKET_V3 rings (receive in blocks, send in batches);
//! * [`forward`]: the forwarding threads, each a [`worker`]'s loop: frames from its receive
//!   ring into its [`npqos_sim::live::Forwarder`] with `now` from CLOCK_MONOTONIC, the shaper
//!   woken at its `next_wakeup()`, eligible frames out through its transmit ring, sleeping in
//!   `ppoll` (or spinning) in between; the kernel's fanout spreads the flows over the threads,
//!   and [`handoff`] carries a frame to the thread that owns its shared bucket;
//! * [`netns`]: network namespaces joined by veth pairs, a UDP sender and a counting receiver:
//!   the test bed of the namespace test and the benchmark;
//! * [`wire`]: the simulator checked against the wire on that bed (tcpreplay of a capture
//!   through npqos live beside `npqos run` of the same configuration's router scenario).

pub mod handoff;
pub mod netns;
pub mod notify;
pub mod port;
pub mod prototype;
pub mod reloader;
pub mod ring;
pub mod stats;
pub mod wire;
pub mod worker;
pub mod xsk;

use npqos_sim::live::reload::Reloading;
use npqos_sim::live::spec::Io;
use npqos_sim::live::{Forwarder, LiveSpec, Reverse};
use port::{Rx, Tx};
use reloader::{ReadAgain, Reloader};
use ring::{OpenError, RxCounters, RxRing, TxCounters, TxRing};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
pub use worker::{HandoffCounts, Status};
use worker::{ReversePath, ThreadRun, Worker};

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of the calling thread, nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// User-space CPU time of the calling thread, nanoseconds (`getrusage(RUSAGE_THREAD)`'s
/// `ru_utime`, microsecond resolution): with [`thread_cpu_ns`], what the thread spent in our
/// code against the kernel's (system calls, the transmit ring's `send()` carrying frames
/// through veth, wake-ups).
pub fn thread_user_ns() -> u64 {
    // SAFETY: an all-zero rusage is valid, and `ru` is a valid out pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_THREAD names the calling thread.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_utime.tv_sec as u64 * 1_000_000_000 + ru.ru_utime.tv_usec as u64 * 1_000
}

/// What a forwarding run measured, every thread's together.
pub struct LiveRun {
    /// The way in's forwarders of each configuration, oldest first (one without a reload),
    /// one per forwarding thread (a thread that stopped before a reload reached it has none
    /// of that configuration).
    pub forwarders: Vec<Vec<Forwarder>>,
    /// What the reloads did (`None` without one).
    pub reloads: Option<ReloadRecord>,
    pub rx: RxCounters,
    pub tx: TxCounters,
    /// From the first ring being ready to the stop, ns.
    pub elapsed_ns: u64,
    /// CPU time of the forwarding threads together, ns; of it, in user space.
    pub cpu_ns: u64,
    pub user_ns: u64,
    /// Times the forwarding threads slept in `ppoll` (each a wake-up after).
    pub sleeps: u64,
    /// Ran for the whole duration (not stopped by Ctrl-C or a lost interface).
    pub complete: bool,
    /// The interface that disappeared and ended the run, if one did.
    pub lost: Option<String>,
    /// The pipeline's refusal (a defect in it) that ended the run, if one did.
    pub refused: Option<String>,
    /// TCP offload super-frames received, and the segments they were cut into.
    pub super_frames: u64,
    pub segments: u64,
    /// The way back, output to input (`live.reverse = "pass"` or `"shape"`).
    pub reverse: Option<WayCounts>,
    /// The shaped way back's forwarders of each configuration, oldest first, one per thread
    /// (`live.reverse = "shape"`).
    pub reverse_forwarder: Option<Vec<Vec<Forwarder>>>,
    /// `live.mode = "pass"`: the way in passed on as it comes, no pipeline (the do-nothing
    /// forwarder on the same rings, to measure what the path itself costs).
    pub passed: Option<WayCounts>,
    /// The way in's packet captures (`[output] pcap`): what each file holds, or why writing
    /// them failed.
    pub captured: Result<Vec<npqos_sim::trace::capture::Captured>, String>,
    /// Per forwarding thread, what it did.
    pub threads: Vec<ThreadCounts>,
}

/// One forwarding thread's share of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadCounts {
    /// Frames its way in's pipelines took (its share and the frames handed to it) and sent.
    pub frames_in: u64,
    pub frames_out: u64,
    /// Frames its receive ring took (the kernel's fanout share).
    pub rx_frames: u64,
    pub cpu_ns: u64,
    pub user_ns: u64,
    pub sleeps: u64,
    /// Turns of its loop, and of them those that took and sent no frame (it looked and found
    /// nothing to do: a thread that seldom sleeps spins through these).
    pub turns: u64,
    pub empty_turns: u64,
    pub handoff: HandoffCounts,
}

/// The reloads of a run (docs/live.md, "Reload"): the pipeline's counts, how long the
/// longest took from the signal to the new configuration taking frames, how long the
/// forwarding thread spent swapping it in, and the refused ones.
#[derive(Clone, Debug, Default)]
pub struct ReloadRecord {
    pub counts: npqos_sim::live::reload::ReloadCounts,
    /// The shaped way back's.
    pub counts_back: Option<npqos_sim::live::reload::ReloadCounts>,
    pub time_ns_max: u64,
    /// Of that, reading the file and building the pipelines (on the reload thread).
    pub build_ns_max: u64,
    pub swap_ns_max: u64,
    pub refused: u64,
}

/// What a reload needs from the command: the signals that ask for one (SIGHUP, registered
/// before the rings open so that an early one does not end the process), and how to read the
/// file again (the problems named, or a key that needs a restart).
pub struct Reload {
    pub signals: signal_hook::iterator::Signals,
    pub read: ReadAgain,
}

/// What one way's rings did, with its frames in and out: the way back (output to input,
/// passed on as they came with `live.reverse = "pass"`, or through its own pipeline with
/// `"shape"`), or the way in passed on without a pipeline (`live.mode = "pass"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WayCounts {
    pub rx: RxCounters,
    pub tx: TxCounters,
    /// Frames offered to the input (a super-frame's segments each; shaped: to the way back's
    /// pipeline), and those sent.
    pub frames_in: u64,
    pub frames_out: u64,
    /// The input's transmit ring had no free slot.
    pub dropped_tx_full: u64,
    /// Larger than a slot of the input's ring and not a TCP super-frame to cut.
    pub dropped_oversize: u64,
    /// Passed way back: frames without an IP packet that `live.non_ip` does not let through.
    pub dropped_unclassified: u64,
    pub super_frames: u64,
}

impl WayCounts {
    /// Two threads' counts of the same way together.
    fn add(&self, o: &WayCounts) -> WayCounts {
        WayCounts {
            rx: self.rx.add(&o.rx),
            tx: self.tx.add(&o.tx),
            frames_in: self.frames_in + o.frames_in,
            frames_out: self.frames_out + o.frames_out,
            dropped_tx_full: self.dropped_tx_full + o.dropped_tx_full,
            dropped_oversize: self.dropped_oversize + o.dropped_oversize,
            dropped_unclassified: self.dropped_unclassified + o.dropped_unclassified,
            super_frames: self.super_frames + o.super_frames,
        }
    }
}

impl LiveRun {
    /// The I/O layer's counts, as scalars for the results.
    pub fn io_scalars(&self) -> Vec<(String, f64, &'static str)> {
        let mut v: Vec<(String, f64, &'static str)> = Vec::new();
        if self.threads.len() > 1 {
            // Per forwarding thread, and the frames handed between them (docs/live.md,
            // "Every core").
            let h = self.threads.iter().fold(HandoffCounts::default(), |a, t| HandoffCounts {
                handed: a.handed + t.handoff.handed,
                taken: a.taken + t.handoff.taken,
                dropped_full: a.dropped_full + t.handoff.dropped_full,
            });
            v.extend([
                ("handed_over".to_string(), h.handed as f64, "frames"),
                ("dropped_handoff_full".to_string(), h.dropped_full as f64, "frames"),
            ]);
            for (i, t) in self.threads.iter().enumerate() {
                v.extend([
                    (format!("thread_rx_frames.{i}"), t.rx_frames as f64, "frames"),
                    (format!("thread_frames_in.{i}"), t.frames_in as f64, "frames"),
                    (format!("thread_frames_out.{i}"), t.frames_out as f64, "frames"),
                    (format!("thread_handed_over.{i}"), t.handoff.handed as f64, "frames"),
                    (format!("thread_taken_over.{i}"), t.handoff.taken as f64, "frames"),
                    (format!("thread_cpu.{i}"), t.cpu_ns as f64 / 1e9, "s"),
                    (format!("thread_cpu_user.{i}"), t.user_ns as f64 / 1e9, "s"),
                    (format!("thread_sleeps.{i}"), t.sleeps as f64, "sleeps"),
                    (format!("thread_turns.{i}"), t.turns as f64, "turns"),
                    (format!("thread_empty_turns.{i}"), t.empty_turns as f64, "turns"),
                ]);
            }
        }
        let mut st: Vec<(&'static str, f64, &'static str)> = vec![
            ("threads", self.threads.len() as f64, "threads"),
            ("forwarding_cpu", self.cpu_ns as f64 / 1e9, "s"),
            ("forwarding_cpu_user", self.user_ns as f64 / 1e9, "s"),
            ("forwarding_sleeps", self.sleeps as f64, "sleeps"),
            ("forwarding_turns", self.threads.iter().map(|t| t.turns).sum::<u64>() as f64, "turns"),
            ("forwarding_empty_turns", self.threads.iter().map(|t| t.empty_turns).sum::<u64>() as f64, "turns"),
            ("rx_frames", self.rx.frames as f64, "frames"),
            ("dropped_rx_ring", self.rx.ring_drops as f64, "frames"),
            ("dropped_rx_truncated", self.rx.truncated as f64, "frames"),
            ("rx_checksums_completed", self.rx.checksums_completed as f64, "frames"),
            ("rx_super_frames", self.super_frames as f64, "frames"),
            ("rx_super_frame_segments", self.segments as f64, "frames"),
            ("rx_blocks", self.rx.blocks as f64, "blocks"),
            ("tx_errors", self.tx.errors as f64, "frames"),
            ("rx_socket_errors", self.rx.socket_errors as f64, "errors"),
            ("rx_before_fanout_join", self.rx.before_join as f64, "frames"),
            ("tx_down_flushes", self.tx.down_flushes as f64, "send calls"),
            ("tx_flushes", self.tx.flushes as f64, "send calls"),
        ];
        if let Some(p) = &self.passed {
            st.extend([
                ("passed_frames_in", p.frames_in as f64, "frames"),
                ("passed_frames_out", p.frames_out as f64, "frames"),
                ("passed_dropped_tx_full", p.dropped_tx_full as f64, "frames"),
                ("passed_dropped_oversize", p.dropped_oversize as f64, "frames"),
                ("passed_super_frames", p.super_frames as f64, "frames"),
            ]);
        }
        if let Some(r) = &self.reverse {
            st.extend([
                ("reverse_frames_in", r.frames_in as f64, "frames"),
                ("reverse_frames_out", r.frames_out as f64, "frames"),
                ("reverse_dropped_tx_full", r.dropped_tx_full as f64, "frames"),
                ("reverse_dropped_oversize", r.dropped_oversize as f64, "frames"),
                ("reverse_dropped_unclassified", r.dropped_unclassified as f64, "frames"),
                ("reverse_dropped_rx_ring", r.rx.ring_drops as f64, "frames"),
                ("reverse_checksums_completed", r.rx.checksums_completed as f64, "frames"),
                ("reverse_super_frames", r.super_frames as f64, "frames"),
                ("reverse_tx_errors", r.tx.errors as f64, "frames"),
                ("reverse_rx_socket_errors", r.rx.socket_errors as f64, "errors"),
            ]);
        }
        v.extend(st.into_iter().map(|(k, x, u)| (k.to_string(), x, u)));
        v
    }
}

/// Forwards from `spec.input` to `spec.output` until `spec.duration` has passed, `stop` is
/// raised or an interface disappears, on [`LiveSpec::forwarding_threads`] threads (docs/live.md,
/// "Every core"; the calling thread is the first). An interface that goes down and up again
/// needs nothing: frames wait in the transmit ring (and behind it in the pipeline) while the
/// output is down, and the receive ring takes frames again once the input is up. `status` is
/// called about every 200 ms with every thread's status and the fraction of the duration done
/// (0 without a duration); `publishers` (one per thread, [`stats::start`]), if any, get the
/// statistics every `live.sample_every`.
///
/// With `capture` (the results' `pcap/` directory) and `[output] pcap`, the way in's ports'
/// packets are written there as it runs (docs/live.md, "Packet captures").
pub fn forward(
    spec: &LiveSpec,
    stop: &AtomicBool,
    reload: Option<Reload>,
    publishers: Vec<stats::Publisher>,
    capture: Option<&std::path::Path>,
    mut status: impl FnMut(&Status, f64),
) -> Result<LiveRun, OpenError> {
    let n = spec.forwarding_threads();
    // Each thread's pipelines: the flow tables' rows shared among the threads.
    let own = spec.for_thread(n);
    // Every ring opened and every pipeline built before the first frame is taken, so that a
    // problem is an error of the command, not of a thread.
    let mut workers = Vec::with_capacity(n);
    let mut publishers = publishers.into_iter();
    let back = !matches!(spec.reverse, Reverse::Off);
    for (rx, tx, back_rx, back_tx) in open_sides(spec, n, back)? {
        let rev = match (back_rx, back_tx) {
            (Some(back_rx), Some(back_tx)) => Some(ReversePath::open(&own, back_rx, back_tx)?),
            _ => None,
        };
        let mut fw = built(spec, Reloading::new(&own, tx.max_frame()))?;
        capture.map(|dir| open_capture(&mut fw, spec, dir)).transpose()?;
        let publisher = publishers.next();
        workers.push((rx, tx, rev, fw, publisher));
    }
    let (reloader, ports) = match start_reloader(reload, spec, &workers[0].1, workers[0].2.as_ref(), n)? {
        Some((r, p)) => (Some(r), p.into_iter().map(Some).collect()),
        None => (None, (0..n).map(|_| None).collect::<Vec<_>>()),
    };
    let lanes = if n > 1 {
        let max = workers[0].1.max_frame().max(workers[0].2.as_ref().map_or(0, |r| r.tx.max_frame()));
        let what = "the lanes between the forwarding threads";
        Some(handoff::Lanes::new(n, max).map_err(|err| OpenError::Io { iface: spec.input.clone(), what, err })?)
    } else {
        None
    };
    let cells: Vec<worker::StatusCell> = (0..n).map(|_| Default::default()).collect();
    let shares =
        |s: &LiveSpec| s.router_params().services.iter().any(|v| v.rate.is_some() && (!v.per_flow || v.host.is_some()));
    let crew = lanes.as_ref().map(|lanes| worker::Crew {
        lanes,
        shares: (shares(spec), spec.reversed().is_some_and(|b| shares(&b))),
        status: &cells,
    });
    // Timer slack of 1 ns: ppoll wakes when the shaper asked, not up to 50 us later.
    let slack = || {
        // SAFETY: prctl with an integer argument.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    };
    slack();
    let t0 = monotonic_ns();
    // Every ring is open: a service manager (or a test) may start the traffic now.
    notify::ready(&format!("forwarding {} -> {} on {n} thread(s)", spec.input, spec.output));
    let mut all: Vec<Worker> = workers
        .into_iter()
        .zip(ports)
        .enumerate()
        .map(|(me, ((rx, tx, rev, fw, publisher), port))| Worker {
            spec,
            rx,
            tx,
            rev,
            fw,
            port,
            publisher,
            crew: crew.as_ref(),
            me,
        })
        .collect();
    let first = all.remove(0);
    let runs: Vec<ThreadRun> = std::thread::scope(|s| {
        let others: Vec<_> = (all.into_iter())
            .map(|w| {
                let name = format!("npqos-fwd-{}", w.me);
                std::thread::Builder::new().name(name).spawn_scoped(s, move || {
                    slack();
                    w.run(stop, t0, None)
                })
            })
            .collect();
        let mut runs = vec![first.run(stop, t0, Some(&mut status))];
        // The first thread ended (the duration, a stop, a lost interface, a refusal): the
        // others end with it.
        let ended_early = !runs[0].end.complete;
        if ended_early {
            stop.store(true, Ordering::Relaxed);
        }
        for h in others {
            match h.map(|h| h.join()) {
                Ok(Ok(r)) => runs.push(r),
                Ok(Err(p)) => std::panic::resume_unwind(p),
                Err(e) => tracing::error!("starting a forwarding thread: {e}"),
            }
        }
        runs
    });
    let elapsed_ns = monotonic_ns() - t0;
    if let Some(r) = reloader {
        r.stop();
    }
    Ok(LiveRun::merge(runs, elapsed_ns))
}

impl LiveRun {
    /// One run of every thread's: counts summed, each configuration's forwarders side by side.
    fn merge(runs: Vec<ThreadRun>, elapsed_ns: u64) -> LiveRun {
        let sum_way = |a: Option<WayCounts>, b: Option<WayCounts>| match (a, b) {
            (Some(a), Some(b)) => Some(a.add(&b)),
            (a, b) => a.or(b),
        };
        let mut run = LiveRun {
            forwarders: Vec::new(),
            reloads: None,
            rx: RxCounters::default(),
            tx: TxCounters::default(),
            elapsed_ns,
            cpu_ns: 0,
            user_ns: 0,
            sleeps: 0,
            complete: runs.iter().all(|r| r.end.complete),
            lost: runs.iter().find_map(|r| r.end.lost.clone()),
            refused: runs.iter().find_map(|r| r.end.refused.clone()),
            super_frames: 0,
            segments: 0,
            reverse: None,
            reverse_forwarder: None,
            passed: None,
            captured: Ok(Vec::new()),
            threads: Vec::new(),
        };
        let mut record = ReloadRecord::default();
        for (i, r) in runs.into_iter().enumerate() {
            run.threads.push(ThreadCounts {
                frames_in: r.forwarders.iter().map(|f| f.totals().frames_in).sum(),
                frames_out: r.forwarders.iter().map(|f| f.totals().frames_out).sum(),
                rx_frames: r.rx.frames,
                cpu_ns: r.cpu_ns,
                user_ns: r.user_ns,
                sleeps: r.sleeps,
                turns: r.turns,
                empty_turns: r.empty_turns,
                handoff: r.handoff,
            });
            run.rx = run.rx.add(&r.rx);
            run.tx = run.tx.add(&r.tx);
            run.cpu_ns += r.cpu_ns;
            run.user_ns += r.user_ns;
            run.sleeps += r.sleeps;
            run.super_frames += r.super_frames;
            run.segments += r.segments;
            run.reverse = sum_way(run.reverse, r.reverse);
            run.passed = sum_way(run.passed, r.passed);
            if i == 0 {
                run.captured = r.captured;
            }
            record.merge(&r.record);
            for (c, f) in r.forwarders.into_iter().enumerate() {
                if run.forwarders.len() <= c {
                    run.forwarders.push(Vec::new());
                }
                run.forwarders[c].push(f);
            }
            if let Some(back) = r.reverse_forwarder {
                let all = run.reverse_forwarder.get_or_insert_with(Vec::new);
                for (c, f) in back.into_iter().enumerate() {
                    if all.len() <= c {
                        all.push(Vec::new());
                    }
                    all[c].push(f);
                }
            }
        }
        run.reloads = (record.counts.reloads + record.refused > 0).then_some(record);
        run
    }
}

impl ReloadRecord {
    /// Another thread's reloads: counts summed, the longest times the longest; a refused
    /// reload is every thread's, counted once.
    fn merge(&mut self, o: &ReloadRecord) {
        self.counts = self.counts.add(&o.counts);
        self.counts_back = match (self.counts_back, o.counts_back) {
            (Some(a), Some(b)) => Some(a.add(&b)),
            (a, b) => a.or(b),
        };
        self.time_ns_max = self.time_ns_max.max(o.time_ns_max);
        self.build_ns_max = self.build_ns_max.max(o.build_ns_max);
        self.swap_ns_max = self.swap_ns_max.max(o.swap_ns_max);
        self.refused = self.refused.max(o.refused);
    }
}

/// Each thread's sides: the way in's receive side and transmit side, and the way back's
/// (with `back`): packet rings, or AF_XDP sockets on receive queue `i` of each interface.
#[allow(clippy::type_complexity)]
fn open_sides(spec: &LiveSpec, n: usize, back: bool) -> Result<Vec<(Rx, Tx, Option<Rx>, Option<Tx>)>, OpenError> {
    let mut sides = Vec::with_capacity(n);
    if let Io::Xdp { .. } = spec.io {
        // A thread per receive queue: a queue no thread binds would take its frames past npqos
        // live to the kernel's stack (the program passes what has no socket), unforwarded.
        for iface in std::iter::once(&spec.input).chain(back.then_some(&spec.output)) {
            let q = xsk::rx_queues(iface);
            if q > n {
                let unserved = if q - 1 == n { format!("queue {n}") } else { format!("queues {n} to {}", q - 1) };
                return Err(OpenError::Unsuited(format!(
                    "io = \"xdp\": {iface} has {q} receive queues and npqos live runs {n} thread(s), one per \
                     queue, so the frames of {unserved} would not reach it (`ethtool -L {iface} combined {n}`, \
                     or live.threads = {q})"
                )));
            }
        }
        let program = |iface: &str| xsk::Program::attach(iface).map(Arc::new);
        let (way_in, way_back) = (program(&spec.input)?, back.then(|| program(&spec.output)).transpose()?);
        let rx_frames = (spec.rx_ring / 2048) as u32;
        for i in 0..n as u32 {
            let (rx, back_tx) = xsk::open(&spec.input, i, Some(&way_in), rx_frames, spec.tx_frames)?;
            let (back_rx, tx) = xsk::open(&spec.output, i, way_back.as_ref(), rx_frames, spec.tx_frames)?;
            let rx = rx.expect("a receive side with a program");
            sides.push((Rx::Xdp(rx), Tx::Xdp(tx), back_rx.map(Rx::Xdp), back.then_some(Tx::Xdp(back_tx))));
        }
        return Ok(sides);
    }
    // The receive sockets first, each joined to its way's fanout group right after its bind
    // (the frames a socket took before it joined are left out: the group had them too).
    let group = (std::process::id() & 0x7fff) as u16;
    let fanout = |g: u16, i: usize| (n > 1).then_some((g, i > 0));
    let mut rxs = Vec::with_capacity(n);
    for i in 0..n {
        let rx = RxRing::open_in(&spec.input, spec.rx_ring, fanout(group, i))?;
        let back_rx =
            back.then(|| RxRing::open_in(&spec.output, spec.rx_ring, fanout(group | 0x8000, i))).transpose()?;
        rxs.push((rx, back_rx));
    }
    for (rx, back_rx) in rxs {
        let tx = Tx::Ring(TxRing::open(&spec.output, spec.tx_frames)?);
        let back_tx = back.then(|| TxRing::open(&spec.input, spec.tx_frames).map(Tx::Ring)).transpose()?;
        sides.push((Rx::Ring(rx), tx, back_rx.map(Rx::Ring), back_tx));
    }
    Ok(sides)
}

/// The way in's packet captures into `dir` (`[output] pcap`; nothing without it).
fn open_capture(fw: &mut Reloading, spec: &LiveSpec, dir: &std::path::Path) -> Result<(), OpenError> {
    let what = "creating the packet captures";
    fw.capture_to(dir, &spec.capture).map_err(|err| OpenError::Io { iface: spec.input.clone(), what, err })
}

/// The reload thread, if the command asked for reloads (its pipelines built for the
/// transmit rings' slots of both ways), and one port per forwarding thread.
fn start_reloader(
    reload: Option<Reload>,
    spec: &LiveSpec,
    tx: &Tx,
    rev: Option<&ReversePath>,
    threads: usize,
) -> Result<Option<(Reloader, Vec<reloader::ReloadPort>)>, OpenError> {
    let Some(r) = reload else { return Ok(None) };
    let back = rev.and_then(|r| r.shaper.as_ref()).map(Reloading::max_frame);
    let started = Reloader::start(r.signals, r.read, tx.max_frame(), back, threads);
    let what = "starting the reload thread";
    started.map(Some).map_err(|err| OpenError::Io { iface: spec.input.clone(), what, err })
}

/// A pipeline built for `spec`, or why not as an error of the interface it is for.
fn built<T>(spec: &LiveSpec, r: Result<T, npqos_core::pipeline::router::PipelineError>) -> Result<T, OpenError> {
    r.map_err(|e| OpenError::Io {
        iface: spec.input.clone(),
        what: "building the forwarder",
        err: std::io::Error::other(e.to_string()),
    })
}
