//! The egress element and the link's scheduler (docs/pipeline.md, "Egress and link"): the
//! shaper over the output queues' buckets and the DRR round over the queues that hold packets
//! and are not throttled, which picks the next packet for the wire.
//!
//! The queues themselves are the caller's (the router model's output FIFOs of simulated
//! packets, `npqos live`'s dqs queues of real frames); the element asks of them through
//! [`EgressQueues`]: the head packet's length, the bucket that shapes a queue (or none), the
//! processor core whose heap a throttled queue joins, and it tells them when a queue was held
//! back by its rate (for overlimits, and for a simulator that schedules the periodic shaper's
//! fill). So the rule "ask the shaper for the head packet; under wait-for-tokens a packet that
//! does not conform leaves the round and waits; under send-then-pay it goes and its queue is
//! throttled" is written once for both drivers.
//!
//! The driver's calls: [`Egress::arrived`] when a packet joins a queue, [`Egress::pick`] for
//! the next packet (then [`Egress::sent`] once it took it out of its queue),
//! [`Egress::next_wakeup`] / [`Egress::wake`] for the event-driven shaper's timer, and
//! [`Egress::poll_queue`] for the periodic shaper's fill of one queue.

use crate::error::Error;
use crate::id::{CoreId, QueueId};
use crate::sched::drr::Drr;
use crate::shaper::heap::Observe;
use crate::shaper::{Conformance, Decision, EventShaper, PeriodicShaper};
use crate::time::Instant;

/// The shaper of the egress element: kim's event-driven shaper (Algorithm 1 over per-core
/// heaps), the periodic-fill baseline, or none.
#[derive(Clone, Debug)]
pub enum Shaping {
    None,
    Event(EventShaper),
    Periodic(PeriodicShaper),
}

impl Shaping {
    /// Whether bucket `b` is throttled (waiting for its reschedule time or fill).
    #[inline]
    pub fn is_disabled(&self, b: QueueId) -> bool {
        match self {
            Shaping::None => false,
            Shaping::Event(e) => e.is_disabled(b),
            Shaping::Periodic(p) => p.is_disabled(b),
        }
    }
    /// The shaper's decision on a packet of `len` bytes on bucket `b` at `now`, under
    /// `conformance` (send-then-pay: the packet is paid for and goes, `Throttled` says its
    /// bucket is now throttled; wait-for-tokens: `Throttled` says it must wait, unpaid), the
    /// event-driven shaper on `core`'s heap with its accesses seen by `obs`: the egress element's
    /// pick makes it. [`Self::decide_and_poll_idle`] without the poll.
    ///
    /// Errors: a bucket or core outside the shaper, `now` going backwards, a packet larger than
    /// the cap under wait-for-tokens.
    #[inline]
    pub fn decide<O: Observe>(
        &mut self,
        core: CoreId,
        b: QueueId,
        len: u64,
        now: Instant,
        conformance: Conformance,
        obs: &mut O,
    ) -> Result<Decision, Error> {
        self.decide_and_poll_idle(core, b, len, now, conformance, false, obs).map(|(d, _)| d)
    }

    /// The one dispatch of the shaper's calls: [`Self::decide`]'s decision, then, when
    /// `idle_poll` is set, the packet goes and the shaper is event-driven,
    /// [`EventShaper::poll_core_idle`] on `core` at `now` ([`EventShaper::send_and_poll_idle`]).
    /// Returns the decision and whether that idle poll was done (never for the other shapers,
    /// which have no core to poll). kim's model, which polls its core after every packet, calls
    /// it with the poll.
    ///
    /// Errors: those of [`Self::decide`].
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn decide_and_poll_idle<O: Observe>(
        &mut self,
        core: CoreId,
        b: QueueId,
        len: u64,
        now: Instant,
        conformance: Conformance,
        idle_poll: bool,
        obs: &mut O,
    ) -> Result<(Decision, bool), Error> {
        let wait = conformance == Conformance::WaitForTokens;
        Ok(match (self, wait) {
            (Shaping::None, _) => (Decision::Eligible, false),
            (Shaping::Event(e), _) => return e.send_and_poll_idle(core, b, len, now, wait, idle_poll, obs),
            (Shaping::Periodic(p), true) => (p.try_send(b, len, now)?, false),
            (Shaping::Periodic(p), false) => (p.on_send(b, len, now)?, false),
        })
    }

    /// When bucket `b` is full again if nothing more is sent on it (`None`: no shaper, or an
    /// unknown bucket).
    pub fn full_at(&self, b: QueueId) -> Option<Instant> {
        match self {
            Shaping::None => None,
            Shaping::Event(e) => e.full_at(b),
            Shaping::Periodic(p) => p.full_at(b),
        }
    }
}

/// What the element needs of the caller's queues.
pub trait EgressQueues {
    /// Bytes of queue `q`'s head packet (`q` holds packets: it is in the round).
    fn head_len(&self, q: QueueId) -> u64;
    /// The bucket that shapes queue `q`, or `None` if it is not shaped.
    fn bucket(&self, q: QueueId) -> Option<QueueId>;
    /// The core whose heap queue `q` joins if its head packet throttles it.
    fn core(&self, q: QueueId) -> CoreId;
    /// Queue `q`'s head packet met a bucket without its tokens: it went anyway and throttled
    /// the queue (`sent`, send-then-pay), or it stays and waits (wait-for-tokens). `until`
    /// is what the shaper said: the reschedule time or fill.
    fn throttled(&mut self, _q: QueueId, _until: Instant, _sent: bool) {}
    /// The queues have active queue management (CoDel, [`crate::pipeline::codel`]): the round
    /// asks [`Self::aqm_head_len`] rather than [`Self::head_len`].
    fn has_aqm(&self) -> bool {
        false
    }
    /// Queue `q`'s AQM at `now` on its head (dropping packets as it says), then the surviving
    /// head's length; `None` when it dropped them all (the queue leaves the round).
    fn aqm_head_len(&mut self, q: QueueId, _now: Instant) -> Option<u64> {
        Some(self.head_len(q))
    }
}

/// The packet [`Egress::pick`] chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    pub queue: QueueId,
    /// It went but throttled its queue (send-then-pay): the queue leaves the round.
    pub throttled: bool,
}

/// Not in a waiting list ([`Waiting`]).
const NONE: u32 = u32::MAX;
/// The end of a waiting list.
const END: u32 = u32::MAX - 1;
/// The queue is its bucket's sender ([`Waiting::sender`]).
const SENDER: u32 = u32::MAX - 2;

/// The queues held back by a bucket that several queues share (a class's or a subscriber's
/// rate over its flows' queues, [`Egress::with_shared_buckets`]): per bucket a FIFO of the
/// queues that met it throttled, and the queue whose send throttled it, which rejoins last,
/// so that the queues of one bucket take turns (round robin) however few packets a refill
/// lets through. A queue is in at most one list; 12 B per bucket and 4 B per queue.
#[derive(Clone, Debug)]
struct Waiting {
    first: Vec<u32>,
    last: Vec<u32>,
    sender: Vec<u32>,
    /// Per queue: the next in its list, [`END`], [`SENDER`], or [`NONE`].
    next: Vec<u32>,
}

impl Waiting {
    fn park(&mut self, q: QueueId, b: QueueId) {
        if self.next[q.index()] != NONE {
            return; // already waiting
        }
        self.next[q.index()] = END;
        match self.last[b.index()] {
            END => self.first[b.index()] = q.0,
            l => self.next[l as usize] = q.0,
        }
        self.last[b.index()] = q.0;
    }
    fn sent(&mut self, q: QueueId, b: QueueId) {
        if self.next[q.index()] != NONE {
            return;
        }
        if let s @ 0..SENDER = self.sender[b.index()] {
            // Cannot happen (a throttled bucket is asked no more); kept in line if it did.
            self.next[s as usize] = NONE;
            self.park(QueueId(s), b);
        }
        self.sender[b.index()] = q.0;
        self.next[q.index()] = SENDER;
    }
    /// Queue `q` emptied as the sender of `b`: it waits for nothing (its queue may go to a
    /// flow of another bucket).
    fn emptied(&mut self, q: QueueId, b: QueueId) {
        if self.next[q.index()] == SENDER && self.sender[b.index()] == q.0 {
            self.sender[b.index()] = NONE;
            self.next[q.index()] = NONE;
        }
    }
    /// Bucket `b`'s queues, in the order they rejoin, taken out of its list.
    fn take(&mut self, b: QueueId, out: &mut Vec<QueueId>) {
        let mut q = std::mem::replace(&mut self.first[b.index()], END);
        self.last[b.index()] = END;
        while q != END {
            out.push(QueueId(q));
            q = std::mem::replace(&mut self.next[q as usize], NONE);
        }
        let s = std::mem::replace(&mut self.sender[b.index()], NONE);
        if s != NONE {
            self.next[s as usize] = NONE;
            out.push(QueueId(s));
        }
    }
}

/// The egress element. See the module documentation.
#[derive(Clone, Debug)]
pub struct Egress {
    shaping: Shaping,
    conformance: Conformance,
    wait: bool,
    drr: Drr,
    woken: Vec<QueueId>,
    /// With buckets shared by several queues: the queues each one holds back.
    waiting: Option<Waiting>,
    /// tc's `overhead` and `mpu`: what the shaper charges a packet ([`Self::with_wire`]).
    overhead: i64,
    mpu: u64,
    rejoin: Vec<QueueId>,
}

impl Egress {
    /// An element over `drr`'s queues, shaped by `shaping` under `conformance`.
    pub fn new(shaping: Shaping, conformance: Conformance, drr: Drr) -> Self {
        Egress {
            shaping,
            conformance,
            wait: conformance == Conformance::WaitForTokens,
            drr,
            woken: Vec::new(),
            waiting: None,
            rejoin: Vec::new(),
            overhead: 0,
            mpu: 0,
        }
    }

    /// Rates in wire terms: the shaper charges a packet of `len` bytes `max(len + overhead,
    /// mpu)` (tc's keys); the round's quanta stay in the packets' bytes.
    pub fn with_wire(mut self, overhead: i64, mpu: u64) -> Self {
        (self.overhead, self.mpu) = (overhead, mpu);
        self
    }

    /// Buckets that several queues share (`buckets` of them): a queue whose head meets its
    /// bucket throttled leaves the round and waits in the bucket's list, whichever queue's
    /// packet throttled it, and [`Self::wake_shared`] brings every queue of a re-enabled bucket
    /// back, the one whose send throttled it last. Without it a queue's bucket is its own (or
    /// one queue's at a time), and [`Self::wake`] asks the caller for the one queue.
    pub fn with_shared_buckets(mut self, buckets: usize) -> Self {
        let queues = self.drr.queues();
        self.waiting = Some(Waiting {
            first: vec![END; buckets],
            last: vec![END; buckets],
            sender: vec![NONE; buckets],
            next: vec![NONE; queues],
        });
        self
    }
    pub fn shaping(&self) -> &Shaping {
        &self.shaping
    }
    pub fn drr(&self) -> &Drr {
        &self.drr
    }

    /// A packet joined queue `q`, shaped by `bucket`: the queue is in the round unless that
    /// bucket is throttled.
    ///
    /// Errors: an unknown queue.
    #[inline]
    pub fn arrived(&mut self, q: QueueId, bucket: Option<QueueId>) -> Result<(), Error> {
        if let Some(b) = bucket.filter(|&b| self.shaping.is_disabled(b)) {
            if let Some(w) = &mut self.waiting {
                if !self.drr.is_active(q) {
                    w.park(q, b);
                }
            }
            return Ok(());
        }
        self.drr.enqueued(q)
    }

    /// The next packet for the wire at `now`: DRR over the queues in the round, each head
    /// asked of its bucket. Under wait-for-tokens a head without its tokens stays and its
    /// queue leaves the round until the shaper re-enables it; the next queue is asked. `None`
    /// when no queue may send. The caller takes the packet out of its queue and calls
    /// [`Self::sent`].
    ///
    /// Errors (the run cannot go on): the shaper or the round refused a call (a bucket or
    /// queue outside them, `now` going backwards).
    #[inline]
    pub fn pick(&mut self, now: Instant, queues: &mut impl EgressQueues) -> Result<Option<Pick>, Error> {
        loop {
            let q = match queues.has_aqm() {
                true => self.drr.select_or_leave(|q| queues.aqm_head_len(q, now)),
                false => self.drr.select(|q| queues.head_len(q)),
            };
            let Some(q) = q else { return Ok(None) };
            let Some(b) = queues.bucket(q) else { return Ok(Some(Pick { queue: q, throttled: false })) };
            if let Some(w) = self.waiting.as_mut().filter(|_| self.shaping.is_disabled(b)) {
                // Another queue's packet throttled the bucket this queue shares: it waits.
                queues.throttled(q, now, false);
                w.park(q, b);
                self.drr.dequeued(q, true)?;
                continue;
            }
            let len = crate::pipeline::router::wire_len(queues.head_len(q), self.overhead, self.mpu);
            let d = self.shaping.decide(queues.core(q), b, len, now, self.conformance, &mut ())?;
            let Decision::Throttled { until } = d else { return Ok(Some(Pick { queue: q, throttled: false })) };
            queues.throttled(q, until, !self.wait);
            if !self.wait {
                if let Some(w) = &mut self.waiting {
                    w.sent(q, b);
                }
                return Ok(Some(Pick { queue: q, throttled: true }));
            }
            if let Some(w) = &mut self.waiting {
                w.park(q, b);
            }
            self.drr.dequeued(q, true)?;
        }
    }

    /// The packet of [`Self::pick`] left queue `q`, which is now `empty` or not.
    ///
    /// Errors: a queue outside the round.
    #[inline]
    pub fn sent(&mut self, pick: Pick, empty: bool) -> Result<(), Error> {
        self.drr.dequeued(pick.queue, empty || pick.throttled)
    }

    /// With shared buckets: queue `q`, the sender that throttled bucket `b`, is now empty, so
    /// it waits for nothing (the caller may give the queue to another flow).
    pub fn emptied(&mut self, q: QueueId, b: QueueId) {
        if let Some(w) = &mut self.waiting {
            w.emptied(q, b);
        }
    }

    /// When [`Self::wake`] must next be called: the event-driven shaper's earliest reschedule
    /// time (`None` for the periodic shaper, whose fills the caller schedules per queue with
    /// `eligible_at` and [`Self::poll_queue`], or without a shaper). It changes only through
    /// [`Self::pick`] (a queue throttled) and [`Self::wake`] (queues re-enabled).
    pub fn next_wakeup(&self) -> Option<Instant> {
        match &self.shaping {
            Shaping::Event(e) => e.next_wakeup(),
            _ => None,
        }
    }

    /// The event-driven shaper's timer at `now`: the buckets whose time has come are enabled
    /// again, and each one's queue (`queue_of`, `None`: no queue holds it now) rejoins the
    /// round if it holds packets (`has_packets`). Returns how many buckets were re-enabled.
    /// Calling it early is harmless.
    ///
    /// Errors: `now` before a time already given, a queue outside the round.
    pub fn wake(
        &mut self,
        now: Instant,
        queue_of: impl Fn(QueueId) -> Option<QueueId>,
        has_packets: impl Fn(QueueId) -> bool,
    ) -> Result<usize, Error> {
        let Shaping::Event(e) = &mut self.shaping else { return Ok(0) };
        self.woken.clear();
        e.on_wakeup(now, &mut self.woken)?;
        for &b in &self.woken {
            if let Some(q) = queue_of(b).filter(|&q| has_packets(q)) {
                self.drr.enqueued(q)?;
            }
        }
        Ok(self.woken.len())
    }

    /// [`Self::wake`] with shared buckets: every queue waiting on a re-enabled bucket rejoins
    /// the round (in the order they met it throttled, the one whose send throttled it last)
    /// if `may_rejoin(q, b)`: it holds packets whose head is shaped by `b`. Returns how many
    /// buckets were re-enabled.
    ///
    /// Errors: `now` before a time already given, a queue outside the round.
    pub fn wake_shared(&mut self, now: Instant, may_rejoin: impl Fn(QueueId, QueueId) -> bool) -> Result<usize, Error> {
        let (Shaping::Event(e), Some(w)) = (&mut self.shaping, &mut self.waiting) else { return Ok(0) };
        self.woken.clear();
        e.on_wakeup(now, &mut self.woken)?;
        for &b in &self.woken {
            self.rejoin.clear();
            w.take(b, &mut self.rejoin);
            for &q in &self.rejoin {
                if may_rejoin(q, b) {
                    self.drr.enqueued(q)?;
                }
            }
        }
        Ok(self.woken.len())
    }

    /// Whether buckets are shared ([`Self::with_shared_buckets`]).
    pub fn shared_buckets(&self) -> bool {
        self.waiting.is_some()
    }

    /// The periodic shaper's fill for queue `q` (its bucket `b`) at `now`: if it re-enables the
    /// bucket, the queue rejoins the round when it holds packets. Returns whether it was
    /// re-enabled.
    ///
    /// Errors: an unknown bucket or queue, `now` before a time already given.
    pub fn poll_queue(&mut self, now: Instant, q: QueueId, b: QueueId, has_packets: bool) -> Result<bool, Error> {
        let Shaping::Periodic(p) = &mut self.shaping else { return Ok(false) };
        let again = p.poll_queue(b, now)?;
        if again && has_packets {
            self.drr.enqueued(q)?;
        }
        Ok(again)
    }

    /// A hint: queue `q` and its bucket `b` are needed soon (no effect on results).
    #[inline]
    pub fn prefetch(&self, q: QueueId, b: QueueId) {
        self.drr.prefetch(q);
        if let Shaping::Event(e) = &self.shaping {
            e.prefetch(b);
        }
    }
}

#[cfg(test)]
mod tests;
