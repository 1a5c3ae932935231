//! FQ-CoDel's round against RFC 8290: new-flow priority, DRR with an MTU quantum, the pass
//! through the old list, CoDel per queue, and the fattest queue's drop batch.

use super::*;
use crate::pipeline::codel::CodelQueue;

/// Queues of (enqueued at, bytes) packets; per queue the times CoDel dropped from it.
struct Qs {
    q: Vec<VecDeque<(u64, u32)>>,
    drops: Vec<u32>,
}

struct One<'a>(&'a mut VecDeque<(u64, u32)>, &'a mut u32);

impl CodelQueue for One<'_> {
    fn head(&self, now: u64) -> Option<(u64, bool)> {
        self.0.front().map(|&(t, _)| (now - t, false))
    }
    fn bytes(&self) -> u64 {
        self.0.iter().skip(1).map(|p| p.1 as u64).sum()
    }
    fn drop_head(&mut self, _now: u64) {
        self.0.pop_front();
        *self.1 += 1;
    }
    fn mark_head(&mut self, _now: u64) {}
}

impl FqQueues for Qs {
    fn codel(&mut self, q: u32, codel: &mut Codel, p: &CodelParams, now: u64) -> Dequeued {
        codel.dequeue(p, now, &mut One(&mut self.q[q as usize], &mut self.drops[q as usize]))
    }
    fn head_len(&self, q: u32) -> u32 {
        self.q[q as usize][0].1
    }
}

impl Qs {
    fn new(n: usize) -> Self {
        Qs { q: vec![VecDeque::new(); n], drops: vec![0; n] }
    }
    fn push(&mut self, f: &mut FqCodel, q: u32, t: u64, len: u32) {
        self.q[q as usize].push_back((t, len));
        f.enqueued(q).unwrap();
    }
    /// One dequeue at `now`: the queue served and its packet's length.
    fn take(&mut self, f: &mut FqCodel, now: u64) -> Option<(u32, u32)> {
        let q = f.dequeue(now, self).queue?;
        let (_, len) = self.q[q as usize].pop_front().expect("the picked queue has a head");
        Some((q, len))
    }
}

#[test]
fn a_sparse_flow_goes_before_a_backlogged_one() {
    let mut f = FqCodel::new(FqCodelParams::default(), 8).unwrap();
    let mut qs = Qs::new(8);
    for _ in 0..100 {
        qs.push(&mut f, 0, 0, 1500);
    }
    for _ in 0..3 {
        assert_eq!(qs.take(&mut f, 10), Some((0, 1500)));
    }
    // A packet of a new flow arrives: it is the very next one served.
    qs.push(&mut f, 5, 10, 64);
    assert_eq!(f.active(), (1, 1), "queue 5 new, queue 0 old");
    assert_eq!(qs.take(&mut f, 11), Some((5, 64)));
    // Queue 5 is empty but still on the new list; the next look finds it empty and, the old
    // list having a queue, moves it there (Linux's pass against starving old flows), where
    // queue 0, out of credit, gets its quantum and goes behind it; queue 5, empty again,
    // leaves the round and queue 0 is served.
    assert_eq!(f.active(), (1, 1));
    assert_eq!(qs.take(&mut f, 12), Some((0, 1500)));
    assert_eq!(f.active(), (0, 1));
    // A packet now makes queue 5 a new flow again.
    qs.push(&mut f, 5, 12, 64);
    assert_eq!(f.active(), (1, 1));
    assert_eq!(f.counters().new_flows, 3, "queue 0, then queue 5 twice");
}

#[test]
fn backlogged_queues_share_bytes_within_a_quantum() {
    let mut f = FqCodel::new(FqCodelParams::default(), 4).unwrap();
    let mut qs = Qs::new(4);
    for _ in 0..20_000 {
        qs.push(&mut f, 1, 0, 1500);
        qs.push(&mut f, 2, 0, 64);
        qs.push(&mut f, 3, 0, 594);
    }
    let mut bytes = [0u64; 4];
    for i in 0..10_000 {
        // Looked at before CoDel would drop anything (sojourn below target).
        let (q, len) = qs.take(&mut f, i).unwrap();
        bytes[q as usize] += len as u64;
    }
    let lo = bytes[1..].iter().min().unwrap();
    let hi = bytes[1..].iter().max().unwrap();
    assert!(hi - lo <= 2 * 1514 + 1500, "bytes per queue {bytes:?}");
}

#[test]
fn codel_drops_from_the_standing_queue_only() {
    let mut f = FqCodel::new(FqCodelParams::default(), 2).unwrap();
    let mut qs = Qs::new(2);
    let ms = 1_000_000u64;
    // Queue 0 holds a standing queue of 50 ms; queue 1 gets a fresh packet at each look.
    let mut now = 0;
    while now < 2_000 * ms {
        while qs.q[0].len() < 40 {
            qs.push(&mut f, 0, now.saturating_sub(50 * ms), 1500);
        }
        qs.push(&mut f, 1, now, 200);
        for _ in 0..2 {
            qs.take(&mut f, now);
        }
        now += ms;
    }
    assert_eq!(qs.drops[1], 0, "the sparse queue's packets never waited");
    // RFC 8289's control law over 1.9 s of dropping: interval / sqrt(count) apart.
    assert!(qs.drops[0] > 20, "the standing queue was dropped from: {:?}", qs.drops);
    assert_eq!(f.counters().codel_dropped, qs.drops[0] as u64);
}

#[test]
fn the_fattest_queue_loses_half_its_bytes_or_a_batch() {
    let f = FqCodelParams::default();
    assert_eq!(f.fattest_drop(10_000, [1000; 10]), 5);
    assert_eq!(f.fattest_drop(200 * 64, [64; 200]), 64, "at most drop_batch");
    assert_eq!(f.fattest_drop(1500, [1500]), 1);
    assert!(FqCodel::new(FqCodelParams { quantum: 0, ..Default::default() }, 1).is_err());
    assert!(FqCodel::new(FqCodelParams::default(), 0).is_err());
    assert!(FqCodel::new(FqCodelParams { drop_batch: 0, ..Default::default() }, 1).is_err());
}
