//! One forwarding thread of `npqos live` (docs/live.md, "The loop" and "Every core"): its own
//! receive and transmit rings, its own pipelines (the way in's and a shaped way back's), its
//! own end of the reload thread and of the statistics; with several threads, its share of the
//! flows (the kernel's fanout) and the lanes to the others for frames whose bucket another
//! thread owns ([`super::handoff`]).

use super::handoff::{Lanes, Way};
use super::port::{Rx, Tx};
use super::reloader::ReloadPort;
use super::ring;
use super::{monotonic_ns, stats, thread_cpu_ns, thread_user_ns, ReloadRecord, WayCounts};
use npqos_core::Instant;
use npqos_sim::live::gso::segment_tcp;
use npqos_sim::live::reload::Reloading;
use npqos_sim::live::spec::{Io, RxWait};
use npqos_sim::live::{Ahead, Forwarder, LiveSpec, Mode, Wait};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// An Ethernet header and one VLAN tag: what a frame carries beyond its IP packet.
pub(super) const ETH_HEADERS: usize = 18;

/// Frames taken from the receive ring between two looks at the clock and the transmit side:
/// a block holds up to ~250 full-size frames; more blocks per turn batch better but let the
/// shaper's wake-up slip.
const BLOCKS_PER_TURN: usize = 4;

/// Frames handed to the transmit ring per turn at most: as many as four blocks of small
/// frames bring in (a turn that takes 4 blocks of 106 B frames takes ~9,600; with 256, the
/// pipeline's queues filled at half the rate the rings allow).
const TX_PER_TURN: usize = 4096;

/// How often the interfaces are checked for having gone (and the status line called), ns.
const STATUS_EVERY: u64 = 200_000_000;

/// While the output is down, how often the transmit ring is tried again, ns.
const DOWN_RETRY: u64 = 10_000_000;

/// What the status line shows, each thread's (summed by the first thread).
#[derive(Clone, Copy, Debug, Default)]
pub struct Status {
    pub flows: u64,
    pub frames_in: u64,
    pub frames_out: u64,
    pub dropped: u64,
    /// Queues waiting in the shaper's heaps.
    pub heap: u64,
}

/// The first thread's status line: called with every thread's status and the fraction done.
pub(super) type StatusLine<'s> = &'s mut dyn FnMut(&Status, f64);

/// A thread's status, published for the first thread's status line.
#[derive(Default)]
pub(super) struct StatusCell([AtomicU64; 5]);

impl StatusCell {
    fn store(&self, s: Status) {
        for (c, v) in self.0.iter().zip([s.flows, s.frames_in, s.frames_out, s.dropped, s.heap]) {
            c.store(v, Ordering::Relaxed);
        }
    }
    fn load(&self) -> Status {
        let v = self.0.each_ref().map(|c| c.load(Ordering::Relaxed));
        Status { flows: v[0], frames_in: v[1], frames_out: v[2], dropped: v[3], heap: v[4] }
    }
}

/// What the threads share: the lanes between them, their status cells.
pub(super) struct Crew<'a> {
    pub lanes: &'a Lanes,
    /// Some service of a way shares a bucket among flows: frames are looked at for the thread
    /// that owns their bucket (the way in's, the way back's).
    pub shares: (bool, bool),
    pub status: &'a [StatusCell],
}

/// Frames handed between threads, one thread's view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandoffCounts {
    /// Frames this thread handed to the thread that owns their bucket.
    pub handed: u64,
    /// Frames other threads handed to this one.
    pub taken: u64,
    /// Frames not handed over because the lane to their owner was full (dropped).
    pub dropped_full: u64,
}

/// How a thread's run ended.
#[derive(Clone, Debug, Default)]
pub struct End {
    pub complete: bool,
    /// The interface that disappeared, if one did.
    pub lost: Option<String>,
    /// The pipeline's refusal that stopped it, if one did.
    pub refused: Option<String>,
}

/// What one thread did.
pub struct ThreadRun {
    pub forwarders: Vec<Forwarder>,
    pub reverse_forwarder: Option<Vec<Forwarder>>,
    pub record: ReloadRecord,
    pub rx: ring::RxCounters,
    pub tx: ring::TxCounters,
    pub cpu_ns: u64,
    pub user_ns: u64,
    pub sleeps: u64,
    /// Turns of its loop, and of them those that took and sent no frame.
    pub turns: u64,
    pub empty_turns: u64,
    pub super_frames: u64,
    pub segments: u64,
    pub reverse: Option<WayCounts>,
    pub passed: Option<WayCounts>,
    pub captured: Result<Vec<npqos_sim::trace::capture::Captured>, String>,
    pub handoff: HandoffCounts,
    pub end: End,
}

/// The way back: frames from the output to the input, with partial checksums completed (by
/// the receive side) and TCP super-frames cut to the input's MTU; passed on as they come, or
/// shaped by a pipeline of their own ([`Forwarder`] on the spec's [`LiveSpec::reversed`]).
pub(super) struct ReversePath {
    pub rx: Rx,
    pub tx: Tx,
    scratch: Vec<u8>,
    pub counts: WayCounts,
    pub shaper: Option<Reloading>,
    /// `live.non_ip`, for the way back passed without a pipeline.
    non_ip: Option<Vec<u16>>,
}

impl ReversePath {
    pub fn open(spec: &LiveSpec, rx: Rx, tx: Tx) -> Result<Self, ring::OpenError> {
        let scratch = Vec::with_capacity(tx.mtu() as usize + 64);
        let shaper = match spec.reversed() {
            Some(back) => Some(super::built(&back, Reloading::new(&back, tx.max_frame()))?),
            None => None,
        };
        Ok(ReversePath { rx, tx, scratch, counts: WayCounts::default(), shaper, non_ip: spec.non_ip.clone() })
    }

    /// The end of the run at `now`: the shaped way back's forwarders, oldest first, its
    /// reloads' counts in `record`.
    fn finish(&mut self, now: u64, record: &mut ReloadRecord) -> Option<Vec<Forwarder>> {
        let mut back = self.shaper.take()?;
        back.sample(Instant::from_nanos(now));
        record.counts_back = Some(back.counts());
        Some(back.into_all())
    }
}

/// Where a received frame goes: into this thread's pipeline of `way`, or to the thread that
/// owns its shared bucket.
struct Hand<'c, 'a> {
    crew: Option<&'c Crew<'a>>,
    me: usize,
    counts: HandoffCounts,
    /// The threads handed frames this turn, one bit each.
    woken: u64,
}

impl Hand<'_, '_> {
    #[inline]
    fn give(&mut self, fw: &mut Reloading, frame: &[u8], t: Instant, way: Way, ahead: Option<Ahead>) {
        if let Some(c) = self.crew.filter(|c| if way == Way::In { c.shares.0 } else { c.shares.1 }) {
            if let Some(owner) = fw.shared_bucket(frame).map(|h| c.lanes.owner(h)).filter(|&o| o != self.me) {
                if c.lanes.push(self.me, owner, frame, way) {
                    self.counts.handed += 1;
                    self.woken |= 1 << owner;
                } else {
                    self.counts.dropped_full += 1;
                }
                return;
            }
        }
        fw.receive_ahead(frame, t, ahead);
    }

    /// Wakes the threads handed frames since the last call.
    fn wake(&mut self) {
        if let (Some(c), w) = (self.crew, std::mem::take(&mut self.woken)) {
            if w != 0 {
                c.lanes.wake((0..64).filter(|i| w >> i & 1 == 1));
            }
        }
    }
}

/// One forwarding thread.
pub(super) struct Worker<'c, 'a> {
    pub spec: &'a LiveSpec,
    pub rx: Rx,
    pub tx: Tx,
    pub rev: Option<ReversePath>,
    pub fw: Reloading,
    pub port: Option<ReloadPort>,
    pub publisher: Option<stats::Publisher>,
    pub crew: Option<&'c Crew<'a>>,
    pub me: usize,
}

impl Worker<'_, '_> {
    /// Forwards until the duration from `t0` has passed, `stop` is raised, an interface
    /// disappears or the pipeline refuses; `status` (the first thread's) is called about every
    /// 200 ms with every thread's status and the fraction of the duration done.
    pub fn run(mut self, stop: &AtomicBool, t0: u64, mut status: Option<StatusLine>) -> ThreadRun {
        let spec = self.spec;
        let mtu = self.tx.mtu() as usize;
        let (mut scratch, mut super_frames, mut segments) = (Vec::with_capacity(mtu + 64), 0u64, 0u64);
        let mut record = ReloadRecord::default();
        let mut hand = Hand { crew: self.crew, me: self.me, counts: HandoffCounts::default(), woken: 0 };
        let threads = self.crew.map_or(1, |c| c.lanes.threads());
        if threads > 1 {
            // Every thread's series and snapshots from the run's start, on the same ticks.
            self.fw.set_origin(Instant::from_nanos(t0));
            if let Some(b) = self.rev.as_mut().and_then(|r| r.shaper.as_mut()) {
                b.set_origin(Instant::from_nanos(t0));
            }
        }
        let (cpu0, user0, mut sleeps) = (thread_cpu_ns(), thread_user_ns(), 0u64);
        let (mut turns, mut empty_turns) = (0u64, 0u64);
        // Frames taken since the last sample, and whether that made the thread busy (`rx_wait = "auto"`).
        let (mut taken, mut busy) = (0u64, false);
        let end_at = spec.duration.map(|d| t0 + d.as_nanos());
        let sample_every = spec.sample_every.as_nanos();
        let (mut next_sample, mut next_status) = (t0 + sample_every, t0);
        let mut end = End { complete: true, ..Default::default() };
        let mut passed = (spec.mode == Mode::Pass).then(WayCounts::default);
        loop {
            turns += 1;
            let mut now = monotonic_ns();
            if end_at.is_some_and(|e| now >= e) {
                break;
            }
            if stop.load(Ordering::Relaxed) {
                end.complete = false;
                break;
            }
            self.take_reload(&mut record, threads);
            let mut got = self.take_handed(now, &mut hand);
            if let Some(counts) = passed.as_mut() {
                got += pass_frames(&mut self.rx, &mut self.tx, &mut scratch, counts, BLOCKS_PER_TURN, None);
                now = monotonic_ns();
            }
            // With mode = "pass" the way in has been passed on above; the pipeline takes nothing.
            let shaped_blocks = if passed.is_some() { 0 } else { BLOCKS_PER_TURN };
            for _ in 0..shaped_blocks {
                let t = Instant::from_nanos(now);
                let fw = &mut self.fw;
                let mut ahead = [None, None];
                let n = self.rx.next_block(|frame, _ts, [next, after]| {
                    // The next frames' flow state loads while this one is worked on.
                    let mine = ahead[0];
                    ahead = fw.look_ahead(next, after, ahead[1]);
                    // A TCP sender's offload super-frame, larger than the output's MTU: its
                    // segments, each shaped and counted as a frame (docs/live.md, "Offloads").
                    if frame.len() > mtu + ETH_HEADERS {
                        let cut = segment_tcp(frame, mtu, &mut scratch, |seg| {
                            hand.give(fw, seg, t, Way::In, None);
                            segments += 1;
                        });
                        if cut {
                            super_frames += 1;
                            return;
                        }
                    }
                    hand.give(fw, frame, t, Way::In, mine);
                });
                if n == 0 {
                    break;
                }
                got += n;
                now = monotonic_ns();
                // A block can hold thousands of frames: a reload ready is taken between blocks.
                self.take_reload(&mut record, threads);
            }
            if let Some(r) = &mut self.rev {
                got += r.pass(BLOCKS_PER_TURN, now, &mut hand);
            }
            taken += got as u64;
            hand.wake();
            let t = Instant::from_nanos(now);
            if self.fw.next_wakeup().is_some_and(|w| w <= t) {
                let _ = self.fw.wake(t);
            }
            let room = self.tx.room(TX_PER_TURN);
            let mut sent = 0;
            if room > 0 {
                let tx = &mut self.tx;
                sent = self.fw.transmit(t, room, |frame| tx.push(frame)).unwrap_or(0);
            }
            if got == 0 && sent == 0 {
                empty_turns += 1;
            }
            self.tx.flush();
            // A mechanism's refusal stops the pipeline (a defect): stop forwarding, keep the results.
            let back = self.rev.as_ref().and_then(|r| r.shaper.as_ref());
            if let Some(e) = self.fw.error().or(back.and_then(Reloading::error)) {
                tracing::error!("the pipeline stopped: {e}");
                (end.refused, end.complete) = (Some(e.to_string()), false);
                break;
            }
            if now >= next_sample {
                self.sample(t);
                next_sample += sample_every;
                busy = std::mem::take(&mut taken) * 1_000_000_000 >= RxWait::AUTO_FROM * sample_every;
            }
            if now >= next_status {
                if let Some(name) = self.lost_interface() {
                    tracing::warn!("interface {name:?} disappeared: stopping");
                    (end.lost, end.complete) = (Some(name), false);
                    break;
                }
                self.status(&mut status, end_at.map_or(0.0, |e| (now - t0) as f64 / (e - t0) as f64));
                next_status = now + STATUS_EVERY;
            }
            if got > 0 || self.rx.ready() {
                continue;
            }
            // Nothing to read: sleep until a block arrives, a frame is handed over, a
            // shaper's next wake-up, the next sample or the end.
            let until = self.until(now, end_at.into_iter().chain([next_sample, next_status]).min(), room == 0);
            if spec.wait == Wait::Sleep && until > now && self.sleep((until - now).min(100_000_000)) {
                sleeps += 1;
                self.gather(until, busy);
            }
        }
        let stop_ns = monotonic_ns();
        self.fw.sample(Instant::from_nanos(stop_ns));
        let reverse_forwarder = self.rev.as_mut().and_then(|r| r.finish(stop_ns, &mut record));
        record.counts = self.fw.counts();
        let captured = self.fw.finish_capture();
        ThreadRun {
            rx: self.rx.counters(),
            tx: self.tx.counters(),
            captured,
            forwarders: self.fw.into_all(),
            record,
            cpu_ns: thread_cpu_ns() - cpu0,
            user_ns: thread_user_ns() - user0,
            sleeps,
            turns,
            empty_turns,
            super_frames,
            segments,
            reverse: self.rev.map(|mut r| WayCounts { rx: r.rx.counters(), tx: r.tx.counters(), ..r.counts }),
            reverse_forwarder,
            passed,
            handoff: hand.counts,
            end,
        }
    }

    /// Frames other threads handed to this one since the last turn, into its pipelines at
    /// `now`; returns how many.
    fn take_handed(&mut self, now: u64, hand: &mut Hand) -> usize {
        let Some(c) = self.crew else { return 0 };
        let t = Instant::from_nanos(now);
        let (fw, back) = (&mut self.fw, self.rev.as_mut().and_then(|r| r.shaper.as_mut()));
        let mut back = back;
        let n = c.lanes.drain(self.me, |frame, way| match (way, back.as_deref_mut()) {
            (Way::Back, Some(b)) => {
                b.receive(frame, t);
            }
            _ => {
                fw.receive(frame, t);
            }
        });
        hand.counts.taken += n as u64;
        n
    }

    /// The interface of the spec that is no longer the one a ring is bound to (removed, or
    /// removed and made again with a new index), if any.
    fn lost_interface(&self) -> Option<String> {
        [(&self.spec.input, self.rx.index()), (&self.spec.output, self.tx.index())]
            .into_iter()
            .find(|(name, idx)| ring::index_of(name) != Some(*idx))
            .map(|(name, _)| name.clone())
    }

    /// This thread's status published; the first thread's status line with every thread's.
    fn status(&self, status: &mut Option<StatusLine>, done: f64) {
        let fw = self.fw.current();
        let t = fw.totals();
        let mine = Status {
            flows: fw.flow_count() as u64,
            frames_in: t.frames_in,
            frames_out: t.frames_out,
            dropped: t.drops.iter().sum(),
            heap: fw.shaper().waiting(npqos_core::id::CoreId(0)) as u64,
        };
        let Some(f) = status.as_mut() else {
            if let Some(c) = self.crew {
                c.status[self.me].store(mine);
            }
            return;
        };
        let all = match self.crew {
            None => mine,
            Some(c) => {
                c.status[self.me].store(mine);
                c.status.iter().map(StatusCell::load).fold(Status::default(), |a, b| Status {
                    flows: a.flows + b.flows,
                    frames_in: a.frames_in + b.frames_in,
                    frames_out: a.frames_out + b.frames_out,
                    dropped: a.dropped + b.dropped,
                    heap: a.heap + b.heap,
                })
            }
        };
        f(&all, done);
    }

    /// The time series' point of both ways at `t`, and the statistics: copied into the
    /// publisher's own buffer, handed over without a lock or a system call.
    fn sample(&mut self, t: Instant) {
        self.fw.sample(t);
        let mut back = self.rev.as_mut().and_then(|r| r.shaper.as_mut());
        if let Some(b) = back.as_deref_mut() {
            b.sample(t);
        }
        if let Some(p) = &mut self.publisher {
            p.publish(self.fw.current(), back.map(|b| b.current()), t);
        }
    }

    /// A reload the reload thread has ready, if any (an atomic load when there is none):
    /// taken from now on if the file was good (the configuration before sends what it holds);
    /// a refused one is counted (its problems were logged by the thread) and the running one
    /// stays. Both ways change together or not at all.
    fn take_reload(&mut self, record: &mut ReloadRecord, threads: usize) {
        let Some(b) = self.port.as_ref().and_then(ReloadPort::ready) else { return };
        let back = self.rev.as_mut().and_then(|r| r.shaper.as_mut());
        let Ok((way_in, way_back)) = b.pipelines else {
            record.refused += 1;
            return;
        };
        let swap = monotonic_ns();
        self.fw.take(way_in);
        let back_services = match (back, way_back) {
            (Some(b), Some(next)) => {
                b.take(next);
                if threads > 1 {
                    b.set_origin(Instant::from_nanos(swap));
                }
                Some(b.current().spec().service_info())
            }
            _ => None,
        };
        if threads > 1 {
            self.fw.set_origin(Instant::from_nanos(swap));
        }
        let now = monotonic_ns();
        let took = now.saturating_sub(b.signalled_ns);
        record.time_ns_max = record.time_ns_max.max(took);
        record.swap_ns_max = record.swap_ns_max.max(now - swap);
        record.build_ns_max = record.build_ns_max.max(b.built_ns.saturating_sub(b.signalled_ns));
        if self.me == 0 {
            tracing::info!(
                "configuration reloaded {} us after the signal ({} us to swap it in)",
                took / 1000,
                (now - swap) / 1000
            );
        }
        if let Some(p) = &mut self.publisher {
            p.set_services(self.fw.current().spec().service_info(), back_services);
        }
    }

    /// When the thread must look again at `now`: the shapers' next wake-ups or `due` (the
    /// next sample, status or the end), and soon while the transmit side is full (`full`) or
    /// holds frames (while its interface is down, every 10 ms).
    fn until(&self, now: u64, due: Option<u64>, full: bool) -> u64 {
        let back = self.rev.as_ref().and_then(|r| r.shaper.as_ref()).and_then(Reloading::next_wakeup);
        let wakeups = [self.fw.next_wakeup(), back].map(|w| w.map(Instant::as_nanos));
        let until = wakeups.into_iter().chain([due]).flatten().min().unwrap_or(u64::MAX);
        if full || self.tx.pending() > 0 {
            return until.min(now + if self.tx.is_down() { DOWN_RETRY } else { 20_000 });
        }
        until
    }

    /// After a sleep on an AF_XDP receive ring, which wakes at its first frame: more time (not
    /// past `until`) for a batch to gather, as a packet ring's block does: `rx_wait`, or with
    /// `"auto"` 1 ms while the thread is `busy` and none otherwise.
    fn gather(&self, until: u64, busy: bool) {
        let Io::Xdp { rx_wait } = self.spec.io else { return };
        let wait = match rx_wait {
            RxWait::Auto if busy => RxWait::AUTO_HOLD,
            RxWait::Auto => return,
            RxWait::Fixed(d) => d,
        };
        let hold = wait.as_nanos().min(until.saturating_sub(monotonic_ns()));
        if hold > 0 && self.rx.ready() {
            std::thread::sleep(std::time::Duration::from_nanos(hold));
        }
    }

    /// Sleeps in `ppoll` for at most `ns` nanoseconds, until a block arrives on the input's
    /// (or the way back's) receive ring, a reload is ready or another thread hands frames
    /// over. A socket error (ENETDOWN: the interface went down) is taken, or poll would report
    /// it again at once on every turn. False when it did not sleep (a frame handed over to it
    /// is waiting).
    fn sleep(&mut self, ns: u64) -> bool {
        if self.crew.is_some_and(|c| !c.lanes.may_sleep(self.me)) {
            return false;
        }
        let ts = libc::timespec { tv_sec: (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as i64 };
        let poll = |fd| libc::pollfd { fd, events: libc::POLLIN | libc::POLLERR, revents: 0 };
        let mut pfd = [
            poll(self.rx.fd()),
            poll(self.rev.as_ref().map_or(-1, |r| r.rx.fd())),
            poll(self.port.as_ref().map_or(-1, ReloadPort::fd)),
            poll(self.crew.map_or(-1, |c| c.lanes.fd(self.me))),
        ];
        // SAFETY: valid pollfds (a negative fd is ignored), a valid timeout, no signal mask change.
        let r = unsafe { libc::ppoll(pfd.as_mut_ptr(), 4, &ts, std::ptr::null()) };
        if let Some(c) = self.crew {
            c.lanes.awake(self.me);
        }
        // A reload is ready: the next turn takes it; the eventfd is emptied so that poll sleeps.
        if let Some(re) = self.port.as_ref().filter(|_| r > 0 && pfd[2].revents & libc::POLLIN != 0) {
            re.clear();
        }
        if r > 0 && pfd[0].revents & libc::POLLERR != 0 {
            if let Some(e) = self.rx.take_error() {
                tracing::warn!("receiving on {:?}: {e}", self.spec.input);
            }
        }
        if let Some(back) = self.rev.as_mut().filter(|_| r > 0 && pfd[1].revents & libc::POLLERR != 0) {
            if let Some(e) = back.rx.take_error() {
                tracing::warn!("receiving on {:?}: {e}", self.spec.output);
            }
        }
        true
    }
}

impl ReversePath {
    /// Passes up to `blocks` blocks of frames on at `now` (shaped, if the way back is), then
    /// flushes; returns the frames taken.
    fn pass(&mut self, blocks: usize, now: u64, hand: &mut Hand) -> usize {
        if self.shaper.is_some() {
            return self.shape(blocks, now, hand);
        }
        let ReversePath { rx, tx, scratch, counts, non_ip, .. } = self;
        pass_frames(rx, tx, scratch, counts, blocks, non_ip.as_deref())
    }

    /// The shaped way back at `now`: frames from up to `blocks` blocks into its pipeline (or
    /// to the thread that owns their bucket), the shaper woken if due, what may go sent;
    /// returns the frames taken.
    fn shape(&mut self, blocks: usize, now: u64, hand: &mut Hand) -> usize {
        let ReversePath { rx, tx, scratch, counts, shaper, .. } = self;
        let Some(fw) = shaper else { return 0 };
        let (mtu, t) = (tx.mtu() as usize, Instant::from_nanos(now));
        let mut taken = 0;
        for _ in 0..blocks {
            let mut ahead = [None, None];
            let n = rx.next_block(|frame, _ts, [next, after]| {
                let mine = ahead[0];
                ahead = fw.look_ahead(next, after, ahead[1]);
                if frame.len() > mtu + ETH_HEADERS {
                    let cut = segment_tcp(frame, mtu, scratch, |seg| {
                        counts.frames_in += 1;
                        hand.give(fw, seg, t, Way::Back, None);
                    });
                    if cut {
                        counts.super_frames += 1;
                        return;
                    }
                }
                counts.frames_in += 1;
                hand.give(fw, frame, t, Way::Back, mine);
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
            let room = tx.room(TX_PER_TURN);
            if room > 0 {
                if let Ok(n) = fw.transmit(t, room, |frame| tx.push(frame)) {
                    counts.frames_out += n as u64;
                }
            }
        }
        tx.flush();
        taken
    }
}

/// Frames from up to `blocks` blocks of `rx` passed on to `tx` as they come (TCP super-frames
/// cut to `tx`'s MTU), then flushed; returns the frames taken. Every frame offered to `tx`, a
/// super-frame's segments one by one, is counted: in = out + dropped. With `non_ip`, frames
/// that are not IPv4 or IPv6 by their EtherType pass only if it is listed (`live.non_ip`).
pub(super) fn pass_frames(
    rx: &mut Rx,
    tx: &mut Tx,
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
        let n = rx.next_block(|frame, _ts, _| {
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
