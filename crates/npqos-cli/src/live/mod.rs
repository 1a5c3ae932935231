//! `npqos live` (docs/live.md): the library's mechanisms forwarding real frames from one network
//! interface to another, Linux only.
//!
//! * [`ring`]: AF_PACKET sockets with TPACKET_V3 rings (receive in blocks, send in batches);
//! * [`forward`]: the loop: frames from the receive ring into [`npqos_sim::live::Forwarder`]
//!   with `now` from CLOCK_MONOTONIC, the shaper woken at its `next_wakeup()`, eligible frames
//!   out through the transmit ring, sleeping in `ppoll` (or spinning) in between;
//! * [`netns`]: network namespaces joined by veth pairs, a UDP sender and a counting receiver:
//!   the test bed of the namespace test and the benchmark;
//! * [`wire`]: the simulator checked against the wire on that bed (tcpreplay of a capture
//!   through npqos live beside `npqos run` of the same configuration's router scenario).

pub mod netns;
pub mod prototype;
pub mod reloader;
pub mod ring;
pub mod stats;
pub mod wire;

use npqos_core::Instant;
use npqos_sim::live::gso::segment_tcp;
use npqos_sim::live::reload::Reloading;
use npqos_sim::live::{Forwarder, LiveSpec, Mode, Reverse, Wait};
use reloader::{ReadAgain, Reloader};
use ring::{OpenError, RxCounters, RxRing, TxCounters, TxRing};
use std::sync::atomic::{AtomicBool, Ordering};

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

/// What a forwarding run measured.
pub struct LiveRun {
    /// The way in's forwarder of each configuration, oldest first (one without a reload).
    pub forwarders: Vec<Forwarder>,
    /// What the reloads did (`None` without one).
    pub reloads: Option<ReloadRecord>,
    pub rx: RxCounters,
    pub tx: TxCounters,
    /// From the first ring being ready to the stop, ns.
    pub elapsed_ns: u64,
    /// CPU time of the forwarding thread, ns.
    pub cpu_ns: u64,
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
    /// The way back's own pipeline when it is shaped (`live.reverse = "shape"`).
    /// The shaped way back's forwarder of each configuration, oldest first.
    pub reverse_forwarder: Option<Vec<Forwarder>>,
    /// `live.mode = "pass"`: the way in passed on as it comes, no pipeline (the do-nothing
    /// forwarder on the same rings, to measure what the path itself costs).
    pub passed: Option<WayCounts>,
    /// The way in's packet captures (`[output] pcap`): what each file holds, or why writing
    /// them failed.
    pub captured: Result<Vec<npqos_sim::trace::capture::Captured>, String>,
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

/// The way back: frames from the output to the input, with partial checksums completed (by
/// the ring) and TCP super-frames cut to the input's MTU; passed on as they come, or shaped by
/// a pipeline of their own ([`Forwarder`] on the spec's [`LiveSpec::reversed`]).
struct ReversePath {
    rx: RxRing,
    tx: TxRing,
    scratch: Vec<u8>,
    counts: WayCounts,
    shaper: Option<Reloading>,
    /// `live.non_ip`, for the way back passed without a pipeline.
    non_ip: Option<Vec<u16>>,
}

impl ReversePath {
    fn open(spec: &LiveSpec) -> Result<Self, OpenError> {
        let tx = TxRing::open(&spec.input, spec.tx_frames)?;
        let scratch = Vec::with_capacity(tx.mtu() as usize + 64);
        let shaper = match spec.reversed() {
            Some(back) => Some(built(&back, Reloading::new(&back, tx.max_frame()))?),
            None => None,
        };
        Ok(ReversePath {
            rx: RxRing::open(&spec.output, spec.rx_ring)?,
            tx,
            scratch,
            counts: WayCounts::default(),
            shaper,
            non_ip: spec.non_ip.clone(),
        })
    }

    /// The shaped way back at `now`: frames from up to `blocks` blocks into its pipeline, the
    /// shaper woken if due, what may go sent; returns the frames taken.
    fn shape(&mut self, blocks: usize, now: u64) -> usize {
        let ReversePath { rx, tx, scratch, counts, shaper, .. } = self;
        let Some(fw) = shaper else { return 0 };
        let (mtu, t) = (tx.mtu() as usize, Instant::from_nanos(now));
        let mut taken = 0;
        for _ in 0..blocks {
            let n = rx.next_block(|frame, _ts| {
                if frame.len() > mtu + ETH_HEADERS {
                    let cut = segment_tcp(frame, mtu, scratch, |seg| {
                        counts.frames_in += 1;
                        fw.receive(seg, t);
                    });
                    if cut {
                        counts.super_frames += 1;
                        return;
                    }
                }
                counts.frames_in += 1;
                fw.receive(frame, t);
            });
            if n == 0 {
                break;
            }
            taken += n;
        }
        if fw.next_wakeup().is_some_and(|w| w <= t) {
            let _ = fw.wake(t);
        }
        // The transmit ring's slots are looked at only when there are frames to send.
        if fw.queued() > 0 {
            let room = tx.room(256);
            if room > 0 {
                if let Ok(n) = fw.transmit(t, room, |frame| tx.push(frame)) {
                    counts.frames_out += n as u64;
                }
            }
        }
        tx.flush();
        taken
    }

    /// The end of the run at `now`: the shaped way back's forwarders, oldest first, its
    /// reloads' counts in `record`.
    fn finish(&mut self, now: u64, record: &mut ReloadRecord) -> Option<Vec<Forwarder>> {
        let mut back = self.shaper.take()?;
        back.sample(Instant::from_nanos(now));
        record.counts_back = Some(back.counts());
        Some(back.into_all())
    }

    /// Passes up to `blocks` blocks of frames on at `now` (shaped, if the way back is), then
    /// flushes; returns the frames taken.
    fn pass(&mut self, blocks: usize, now: u64) -> usize {
        if self.shaper.is_some() {
            return self.shape(blocks, now);
        }
        let ReversePath { rx, tx, scratch, counts, non_ip, .. } = self;
        pass_frames(rx, tx, scratch, counts, blocks, non_ip.as_deref())
    }
}

/// Frames from up to `blocks` blocks of `rx` passed on to `tx` as they come (TCP super-frames
/// cut to `tx`'s MTU), then flushed; returns the frames taken. Every frame offered to `tx`, a
/// super-frame's segments one by one, is counted: in = out + dropped. With `non_ip`, frames
/// that are not IPv4 or IPv6 by their EtherType pass only if it is listed (`live.non_ip`).
fn pass_frames(
    rx: &mut RxRing,
    tx: &mut TxRing,
    scratch: &mut Vec<u8>,
    counts: &mut WayCounts,
    blocks: usize,
    non_ip: Option<&[u16]>,
) -> usize {
    let (mtu, max) = (tx.mtu() as usize, tx.max_frame() as usize);
    let mut taken = 0;
    for _ in 0..blocks {
        // Look at the transmit ring's slots only when there is something to pass.
        if !rx.ready() {
            break;
        }
        let mut room = tx.room(usize::MAX);
        let mut send = |frame: &[u8], counts: &mut WayCounts| {
            counts.frames_in += 1;
            let refused = non_ip.is_some_and(|list| {
                let t = npqos_sim::live::spec::ethertype(frame);
                !matches!(t, Some(0x0800 | 0x86dd)) && !t.is_some_and(|t| list.contains(&t))
            });
            if refused {
                counts.dropped_unclassified += 1;
            } else if room == 0 {
                counts.dropped_tx_full += 1;
            } else if frame.len() > max {
                counts.dropped_oversize += 1;
            } else {
                tx.push(frame);
                room -= 1;
                counts.frames_out += 1;
            }
        };
        let n = rx.next_block(|frame, _ts| {
            if frame.len() > mtu + ETH_HEADERS {
                let cut = segment_tcp(frame, mtu, scratch, |seg| send(seg, counts));
                if cut {
                    counts.super_frames += 1;
                    return;
                }
            }
            send(frame, counts);
        });
        tx.flush();
        if n == 0 {
            break;
        }
        taken += n;
    }
    taken
}

impl LiveRun {
    /// The I/O layer's counts, as scalars for the results.
    pub fn io_scalars(&self) -> Vec<(&'static str, f64, &'static str)> {
        let mut v = vec![
            ("rx_frames", self.rx.frames as f64, "frames"),
            ("dropped_rx_ring", self.rx.ring_drops as f64, "frames"),
            ("dropped_rx_truncated", self.rx.truncated as f64, "frames"),
            ("rx_checksums_completed", self.rx.checksums_completed as f64, "frames"),
            ("rx_super_frames", self.super_frames as f64, "frames"),
            ("rx_super_frame_segments", self.segments as f64, "frames"),
            ("rx_blocks", self.rx.blocks as f64, "blocks"),
            ("tx_errors", self.tx.errors as f64, "frames"),
            ("rx_socket_errors", self.rx.socket_errors as f64, "errors"),
            ("tx_down_flushes", self.tx.down_flushes as f64, "send calls"),
            ("tx_flushes", self.tx.flushes as f64, "send calls"),
        ];
        if let Some(p) = &self.passed {
            v.extend([
                ("passed_frames_in", p.frames_in as f64, "frames"),
                ("passed_frames_out", p.frames_out as f64, "frames"),
                ("passed_dropped_tx_full", p.dropped_tx_full as f64, "frames"),
                ("passed_dropped_oversize", p.dropped_oversize as f64, "frames"),
                ("passed_super_frames", p.super_frames as f64, "frames"),
            ]);
        }
        if let Some(r) = &self.reverse {
            v.extend([
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
        v
    }
}

/// An Ethernet header and one VLAN tag: what a frame carries beyond its IP packet.
const ETH_HEADERS: usize = 18;

/// Frames taken from the receive ring between two looks at the clock and the transmit side:
/// a block holds up to ~250 full-size frames; more blocks per turn batch better but let the
/// shaper's wake-up slip.
const BLOCKS_PER_TURN: usize = 4;

/// How often the interfaces are checked for having gone (and the status line called), ns.
const STATUS_EVERY: u64 = 200_000_000;

/// While the output is down, how often the transmit ring is tried again, ns.
const DOWN_RETRY: u64 = 10_000_000;

/// The interface of `spec` that is no longer the one a ring is bound to (removed, or removed
/// and made again with a new index), if any.
fn lost_interface(spec: &LiveSpec, rx: &RxRing, tx: &TxRing) -> Option<String> {
    [(&spec.input, rx.index()), (&spec.output, tx.index())]
        .into_iter()
        .find(|(name, idx)| ring::index_of(name) != Some(*idx))
        .map(|(name, _)| name.clone())
}

/// Forwards from `spec.input` to `spec.output` until `spec.duration` has passed, `stop` is
/// raised or an interface disappears. An interface that goes down and up again needs nothing:
/// frames wait in the transmit ring (and behind it in the pipeline) while the output is down,
/// and the receive ring takes frames again once the input is up. `status` is called about
/// every 200 ms with the forwarder and the fraction of the duration done (0 without a
/// duration); `publisher`, if any, gets the statistics every `live.sample_every`.
///
/// With `capture` (the results' `pcap/` directory) and `[output] pcap`, the way in's ports'
/// packets are written there as it runs (docs/live.md, "Packet captures").
pub fn forward(
    spec: &LiveSpec,
    stop: &AtomicBool,
    reload: Option<Reload>,
    mut publisher: Option<&mut stats::Publisher>,
    capture: Option<&std::path::Path>,
    mut status: impl FnMut(&Forwarder, f64),
) -> Result<LiveRun, OpenError> {
    let mut rx = RxRing::open(&spec.input, spec.rx_ring)?;
    let mut tx = TxRing::open(&spec.output, spec.tx_frames)?;
    let mut rev = match spec.reverse {
        Reverse::Pass | Reverse::Shape(_) => Some(ReversePath::open(spec)?),
        Reverse::Off => None,
    };
    let mtu = tx.mtu() as usize;
    let (mut scratch, mut super_frames, mut segments) = (Vec::with_capacity(mtu + 64), 0u64, 0u64);
    let (mut fw, mut record) = (built(spec, Reloading::new(spec, tx.max_frame()))?, ReloadRecord::default());
    capture.map(|dir| open_capture(&mut fw, spec, dir)).transpose()?;
    let reloader = start_reloader(reload, spec, &tx, rev.as_ref())?;
    // Timer slack of 1 ns: ppoll wakes when the shaper asked, not up to 50 us later.
    // SAFETY: prctl with an integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let cpu0 = thread_cpu_ns();
    let t0 = monotonic_ns();
    let end = spec.duration.map(|d| t0 + d.as_nanos());
    let sample_every = spec.sample_every.as_nanos();
    let mut next_sample = t0 + sample_every;
    let mut next_status = t0;
    let mut complete = true;
    let mut lost = None;
    let mut refused = None;
    let mut passed = (spec.mode == Mode::Pass).then(WayCounts::default);
    loop {
        let mut now = monotonic_ns();
        if end.is_some_and(|e| now >= e) {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            complete = false;
            break;
        }
        take_reload(reloader.as_ref(), (&mut fw, rev.as_mut()), &mut record, publisher.as_deref_mut());
        let mut got = 0;
        if let Some(counts) = passed.as_mut() {
            got += pass_frames(&mut rx, &mut tx, &mut scratch, counts, BLOCKS_PER_TURN, None);
            now = monotonic_ns();
        }
        // With mode = "pass" the way in has been passed on above; the pipeline takes nothing.
        let shaped_blocks = if passed.is_some() { 0 } else { BLOCKS_PER_TURN };
        for _ in 0..shaped_blocks {
            let t = Instant::from_nanos(now);
            let n = rx.next_block(|frame, _ts| {
                // A TCP sender's offload super-frame, larger than the output's MTU: its
                // segments, each shaped and counted as a frame (docs/live.md, "Offloads").
                if frame.len() > mtu + ETH_HEADERS {
                    let cut = segment_tcp(frame, mtu, &mut scratch, |seg| {
                        fw.receive(seg, t);
                        segments += 1;
                    });
                    if cut {
                        super_frames += 1;
                        return;
                    }
                }
                fw.receive(frame, t);
            });
            if n == 0 {
                break;
            }
            got += n;
            now = monotonic_ns();
            // A block can hold thousands of frames: a reload ready is taken between blocks.
            take_reload(reloader.as_ref(), (&mut fw, rev.as_mut()), &mut record, publisher.as_deref_mut());
        }
        if let Some(r) = &mut rev {
            got += r.pass(BLOCKS_PER_TURN, now);
        }
        let t = Instant::from_nanos(now);
        if fw.next_wakeup().is_some_and(|w| w <= t) {
            let _ = fw.wake(t);
        }
        let room = tx.room(256);
        if room > 0 {
            let _ = fw.transmit(t, room, |frame| tx.push(frame));
        }
        tx.flush();
        // A mechanism's refusal stops the pipeline (a defect): stop forwarding, keep the results.
        if let Some(e) = fw.error().or(rev.as_ref().and_then(|r| r.shaper.as_ref()).and_then(Reloading::error)) {
            tracing::error!("the pipeline stopped: {e}");
            (refused, complete) = (Some(e.to_string()), false);
            break;
        }
        if now >= next_sample {
            sample(&mut fw, rev.as_mut().and_then(|r| r.shaper.as_mut()), publisher.as_deref_mut(), t);
            next_sample += sample_every;
        }
        if now >= next_status {
            if let Some(name) = lost_interface(spec, &rx, &tx) {
                tracing::warn!("interface {name:?} disappeared: stopping");
                (lost, complete) = (Some(name), false);
                break;
            }
            status(fw.current(), end.map_or(0.0, |e| (now - t0) as f64 / (e - t0) as f64));
            next_status = now + STATUS_EVERY;
        }
        if got > 0 || rx.ready() {
            continue;
        }
        // Nothing to read: sleep until a block arrives, a shaper's next wake-up, the next
        // sample or the end.
        let back = rev.as_ref().and_then(|r| r.shaper.as_ref()).and_then(Reloading::next_wakeup);
        let wakeups = [fw.next_wakeup(), back].map(|w| w.map(Instant::as_nanos));
        let mut until = wakeups.into_iter().chain([end]).flatten().fold(next_sample.min(next_status), u64::min);
        if room == 0 || tx.pending() > 0 {
            // The transmit ring is full: look again soon (while its interface is down, every
            // 10 ms).
            until = until.min(now + if tx.is_down() { DOWN_RETRY } else { 20_000 });
        }
        if spec.wait == Wait::Sleep && until > now {
            sleep(spec, &mut rx, rev.as_mut(), reloader.as_ref(), (until - now).min(100_000_000));
        }
    }
    let stop_ns = monotonic_ns();
    if let Some(r) = reloader {
        r.stop();
    }
    fw.sample(Instant::from_nanos(stop_ns));
    let reverse_forwarder = rev.as_mut().and_then(|r| r.finish(stop_ns, &mut record));
    record.counts = fw.counts();
    let captured = fw.finish_capture();
    Ok(LiveRun {
        rx: rx.counters(),
        tx: tx.counters(),
        captured,
        forwarders: fw.into_all(),
        reloads: (record.counts.reloads + record.refused > 0).then_some(record.clone()),
        elapsed_ns: stop_ns - t0,
        cpu_ns: thread_cpu_ns() - cpu0,
        complete,
        lost,
        refused,
        super_frames,
        segments,
        reverse: rev.map(|mut r| WayCounts { rx: r.rx.counters(), tx: r.tx.counters(), ..r.counts }),
        reverse_forwarder,
        passed,
    })
}

/// The time series' point of both ways at `t`, and the statistics: copied into the
/// publisher's own buffer, handed over without a lock or a system call.
fn sample(fw: &mut Reloading, mut back: Option<&mut Reloading>, publisher: Option<&mut stats::Publisher>, t: Instant) {
    fw.sample(t);
    if let Some(b) = back.as_deref_mut() {
        b.sample(t);
    }
    if let Some(p) = publisher {
        p.publish(fw.current(), back.map(|b| b.current()), t);
    }
}

/// The way in's packet captures into `dir` (`[output] pcap`; nothing without it).
fn open_capture(fw: &mut Reloading, spec: &LiveSpec, dir: &std::path::Path) -> Result<(), OpenError> {
    let what = "creating the packet captures";
    fw.capture_to(dir, &spec.capture).map_err(|err| OpenError::Io { iface: spec.input.clone(), what, err })
}

/// The reload thread, if the command asked for reloads (its pipelines built for the
/// transmit rings' slots of both ways).
fn start_reloader(
    reload: Option<Reload>,
    spec: &LiveSpec,
    tx: &TxRing,
    rev: Option<&ReversePath>,
) -> Result<Option<Reloader>, OpenError> {
    let Some(r) = reload else { return Ok(None) };
    let back = rev.and_then(|r| r.shaper.as_ref()).map(Reloading::max_frame);
    let started = Reloader::start(r.signals, r.read, tx.max_frame(), back);
    let what = "starting the reload thread";
    started.map(Some).map_err(|err| OpenError::Io { iface: spec.input.clone(), what, err })
}

/// A reload the reload thread has ready, if any (an atomic load when there is none): taken
/// from now on if the file was good (the configuration before sends what it holds); a refused
/// one is counted (its problems were logged by the thread) and the running one stays. Both
/// ways change together or not at all.
fn take_reload(
    reloader: Option<&Reloader>,
    (fw, rev): (&mut Reloading, Option<&mut ReversePath>),
    record: &mut ReloadRecord,
    publisher: Option<&mut stats::Publisher>,
) {
    let Some(b) = reloader.and_then(Reloader::ready) else { return };
    let back = rev.and_then(|r| r.shaper.as_mut());
    let Ok((way_in, way_back)) = b.pipelines else {
        record.refused += 1;
        return;
    };
    let swap = monotonic_ns();
    fw.take(way_in);
    let back_services = match (back, way_back) {
        (Some(b), Some(next)) => {
            b.take(next);
            Some(b.current().spec().service_info())
        }
        _ => None,
    };
    let now = monotonic_ns();
    let took = now.saturating_sub(b.signalled_ns);
    record.time_ns_max = record.time_ns_max.max(took);
    record.swap_ns_max = record.swap_ns_max.max(now - swap);
    record.build_ns_max = record.build_ns_max.max(b.built_ns.saturating_sub(b.signalled_ns));
    tracing::info!(
        "configuration reloaded {} us after the signal ({} us to swap it in)",
        took / 1000,
        (now - swap) / 1000
    );
    if let Some(p) = publisher {
        p.set_services(fw.current().spec().service_info(), back_services);
    }
}

/// Sleeps in `ppoll` for at most `ns` nanoseconds, until a block arrives on the input's (or
/// the way back's) receive ring. A socket error (ENETDOWN: the interface went down) is taken,
/// or poll would report it again at once on every turn.
fn sleep(spec: &LiveSpec, rx: &mut RxRing, rev: Option<&mut ReversePath>, reloader: Option<&Reloader>, ns: u64) {
    let ts = libc::timespec { tv_sec: (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as i64 };
    let poll = |fd| libc::pollfd { fd, events: libc::POLLIN | libc::POLLERR, revents: 0 };
    let mut pfd =
        [poll(rx.fd()), poll(rev.as_ref().map_or(-1, |r| r.rx.fd())), poll(reloader.map_or(-1, Reloader::fd))];
    // SAFETY: valid pollfds (a negative fd is ignored), a valid timeout, no signal mask change.
    let r = unsafe { libc::ppoll(pfd.as_mut_ptr(), 3, &ts, std::ptr::null()) };
    // A reload is ready: the next turn takes it; the eventfd is emptied so that poll sleeps.
    if let Some(re) = reloader.filter(|_| r > 0 && pfd[2].revents & libc::POLLIN != 0) {
        re.clear();
    }
    if r > 0 && pfd[0].revents & libc::POLLERR != 0 {
        if let Some(e) = rx.take_error() {
            tracing::warn!("receiving on {:?}: {e}", spec.input);
        }
    }
    if let Some(back) = rev.filter(|_| r > 0 && pfd[1].revents & libc::POLLERR != 0) {
        if let Some(e) = back.rx.take_error() {
            tracing::warn!("receiving on {:?}: {e}", spec.output);
        }
    }
}

/// A pipeline built for `spec`, or why not as an error of the interface it is for.
fn built<T>(spec: &LiveSpec, r: Result<T, npqos_core::pipeline::router::PipelineError>) -> Result<T, OpenError> {
    r.map_err(|e| OpenError::Io {
        iface: spec.input.clone(),
        what: "building the forwarder",
        err: std::io::Error::other(e.to_string()),
    })
}
