//! CoDel against RFC 8289's control law: a queue whose packets wait 10 ms (twice the target)
//! for as long as it is looked at, a look every 100 us.

use super::*;
use std::collections::VecDeque;

/// A queue of (enqueued at, bytes, ECN-capable) packets.
#[derive(Default)]
struct Fifo {
    pkts: VecDeque<(u64, u64, bool)>,
    drops: Vec<u64>,
    marks: Vec<u64>,
}

impl CodelQueue for Fifo {
    fn head(&self, now: u64) -> Option<(u64, bool)> {
        self.pkts.front().map(|&(t, _, ect)| (now - t, ect))
    }
    fn bytes(&self) -> u64 {
        self.pkts.iter().skip(1).map(|p| p.1).sum()
    }
    fn drop_head(&mut self, now: u64) {
        self.pkts.pop_front();
        self.drops.push(now);
    }
    fn mark_head(&mut self, now: u64) {
        self.marks.push(now);
    }
}

const MS: u64 = 1_000_000;
const STEP: u64 = 100_000;

/// Looks at the queue every 100 us from 0 to `until`: each look dequeues (CoDel first), and the
/// queue is kept at packets that waited `wait(now)` with 20 packets of 1,500 B behind the head.
fn run(p: &CodelParams, until: u64, ect: bool, wait: impl Fn(u64) -> u64) -> (Fifo, Codel) {
    let (mut q, mut c) = (Fifo::default(), Codel::default());
    let mut now = 0;
    while now <= until {
        q.pkts.clear();
        for _ in 0..21 {
            q.pkts.push_back((now.saturating_sub(wait(now)), 1500, ect));
        }
        let d = c.dequeue(p, now, &mut q);
        assert!(d.head, "a packet is left to send at {now}");
        now += STEP;
    }
    (q, c)
}

#[test]
fn below_target_or_a_packet_behind_nothing_is_dropped() {
    let p = CodelParams::default();
    let (q, c) = run(&p, 2_000 * MS, false, |_| 4 * MS);
    assert!(q.drops.is_empty() && !c.dropping());
    // Above target but at most one MTU behind the head: never dropped (RFC 8289's maxpacket).
    let mut q = Fifo::default();
    let mut c = Codel::default();
    for i in 0..20_000u64 {
        let now = i * STEP;
        q.pkts = VecDeque::from([(now.saturating_sub(50 * MS), 1500, false), (now, 1500, false)]);
        c.dequeue(&p, now, &mut q);
    }
    assert!(q.drops.is_empty());
}

#[test]
fn drops_follow_the_control_law_interval_over_sqrt_count() {
    let p = CodelParams::default();
    let (q, c) = run(&p, 1_000 * MS, false, |_| 10 * MS);
    // The packets' wait reaches the target at 5 ms (the queue started at 0): the first drop
    // an interval later (at 105 ms), then each interval / sqrt(count) after the one before, to
    // the look's 100 us.
    assert_eq!(q.drops[0], 105 * MS);
    let mut want = q.drops[0] as f64;
    for (n, &t) in q.drops.iter().enumerate().skip(1) {
        want += 100e6 / (n as f64).sqrt();
        // The next drop is due from the scheduled time, not from the look that made it.
        assert!((t as f64 - want).abs() <= STEP as f64, "drop {n} at {t} ns, the control law says {want:.0}");
    }
    // By 1 s: drops at 105, 205, 275.7, 333.4, 383.4, 428.1, 468.9, 506.7, 542.1, 575.4,
    // 607.0, 637.2, 666.0, 693.8, 720.5, 746.3, 771.3, 795.6, 819.1, 842.1, 864.4, 886.2,
    // 907.5, 928.4, 948.8, 968.8, 988.4 ms: 27 of them.
    assert_eq!(q.drops.len(), 27, "{:?}", q.drops);
    assert!(c.dropping());
    assert_eq!(c.count() as usize, q.drops.len());
}

#[test]
fn it_leaves_the_dropping_state_below_target_and_resumes_its_rate_soon_after() {
    let p = CodelParams::default();
    // Above target until 600 ms, below until 700 ms, above again.
    let wait = |t: u64| if (600 * MS..700 * MS).contains(&t) { MS } else { 10 * MS };
    let (q, c) = run(&p, 1_000 * MS, false, wait);
    let before = q.drops.iter().filter(|&&t| t < 600 * MS).count();
    assert!(q.drops.iter().all(|&t| !(600 * MS..800 * MS).contains(&t)), "no drop below target, nor an interval after");
    let after: Vec<u64> = q.drops.iter().copied().filter(|&t| t >= 800 * MS).collect();
    // Back above target at 700 ms: the first drop at 800 ms, and then the count resumes from
    // the last cycle's drops (it was `before`, entered at 1: `before - 1` more), so the next
    // drop comes interval / sqrt(before - 1) later, not a whole interval.
    assert_eq!(after[0], 800 * MS);
    let resumed = (before - 1) as f64;
    let gap = (after[1] - after[0]) as f64;
    assert!((gap - 100e6 / resumed.sqrt()).abs() <= STEP as f64, "gap {gap} after resuming at count {resumed}");
    assert!(c.dropping());
}

#[test]
fn ecn_capable_packets_are_marked_on_the_same_schedule() {
    let p = CodelParams { ecn: true, ..CodelParams::default() };
    let (marked, c) = run(&p, 1_000 * MS, true, |_| 10 * MS);
    assert!(marked.drops.is_empty(), "ECN-capable packets are not dropped");
    let (dropped, _) = run(&CodelParams::default(), 1_000 * MS, false, |_| 10 * MS);
    assert_eq!(marked.marks, dropped.drops, "marks where the drops would be");
    assert_eq!(c.count() as usize, marked.marks.len());
    // Without ECN on, ECN-capable packets are dropped.
    let (q, _) = run(&CodelParams::default(), 1_000 * MS, true, |_| 10 * MS);
    assert_eq!(q.drops, dropped.drops);
}

#[test]
fn the_control_law() {
    let i = 100 * MS;
    assert_eq!(Codel::control_law(0, 1, i), 100 * MS);
    assert_eq!(Codel::control_law(0, 4, i), 50 * MS);
    assert_eq!(Codel::control_law(10, 100, i), 10 + 10 * MS);
}
