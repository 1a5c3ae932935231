use super::*;
use crate::rate::Rate;
use crate::shaper::BucketParams;
use crate::Duration;
use std::collections::VecDeque;

/// Queues of packet lengths, each shaped by the bucket of its own number (queue 2 unshaped).
struct Fifos {
    q: Vec<VecDeque<u64>>,
    throttles: Vec<(u32, Instant, bool)>,
}

impl EgressQueues for Fifos {
    fn head_len(&self, q: QueueId) -> u64 {
        self.q[q.index()][0]
    }
    fn bucket(&self, q: QueueId) -> Option<QueueId> {
        (q.0 != 2).then_some(q)
    }
    fn core(&self, _q: QueueId) -> CoreId {
        CoreId(0)
    }
    fn throttled(&mut self, q: QueueId, until: Instant, sent: bool) {
        self.throttles.push((q.0, until, sent));
    }
}

fn t(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

/// 8 Mbps (1 B/us), cap 1000 B, alpha 500 B; DRR quantum 1500 B over three queues.
fn egress(shaping: &str, conformance: Conformance) -> Egress {
    let p = [BucketParams { cir: Rate::from_bits_per_sec(8_000_000), cap_bytes: 1000, alpha_bytes: 500 }; 3];
    let s = match shaping {
        "event" => Shaping::Event(EventShaper::new(&p, 1, 0, 0).unwrap()),
        "periodic" => Shaping::Periodic(PeriodicShaper::new(&p, Duration::from_micros(100)).unwrap()),
        _ => Shaping::None,
    };
    Egress::new(s, conformance, Drr::new(3, 1500).unwrap())
}

/// Takes every packet `pick` gives at `now` out of its queue; returns the queues in order.
fn drain(e: &mut Egress, f: &mut Fifos, now: Instant) -> Vec<u32> {
    let mut out = Vec::new();
    while let Some(p) = e.pick(now, f).unwrap() {
        f.q[p.queue.index()].pop_front();
        out.push(p.queue.0);
        e.sent(p, f.q[p.queue.index()].is_empty()).unwrap();
    }
    out
}

fn fifos(lens: [&[u64]; 3]) -> Fifos {
    Fifos { q: lens.iter().map(|l| l.iter().copied().collect()).collect(), throttles: Vec::new() }
}

#[test]
fn send_then_pay_sends_the_packet_that_overdraws_and_throttles_its_queue() {
    let mut e = egress("event", Conformance::SendThenPay);
    let mut f = fifos([&[600, 600, 600], &[100], &[700, 700]]);
    for q in 0..3 {
        e.arrived(QueueId(q), f.bucket(QueueId(q))).unwrap();
    }
    // Queue 0: 600 B, then 600 B overdraws (-200) and throttles; queue 1 sends; queue 2 is
    // not shaped and sends both.
    assert_eq!(drain(&mut e, &mut f, t(0)), [0, 0, 1, 2, 2]);
    assert_eq!(f.throttles, [(0, t(700_000), true)], "alpha (500 B) + 200 B owed at 1 B/us");
    assert_eq!(e.next_wakeup(), Some(t(700_000)));
    // The timer re-enables bucket 0, whose queue still holds a packet.
    let f2 = &f;
    assert_eq!(e.wake(t(700_000), Some, |q| !f2.q[q.index()].is_empty()).unwrap(), 1);
    assert_eq!(drain(&mut e, &mut f, t(700_000)), [0]);
}

#[test]
fn wait_for_tokens_leaves_the_head_waiting_and_serves_the_others() {
    let mut e = egress("event", Conformance::WaitForTokens);
    let mut f = fifos([&[600, 600], &[300], &[]]);
    e.arrived(QueueId(0), Some(QueueId(0))).unwrap();
    e.arrived(QueueId(1), Some(QueueId(1))).unwrap();
    assert_eq!(drain(&mut e, &mut f, t(0)), [0, 1], "queue 0's second packet waits for 200 B");
    assert_eq!(f.throttles, [(0, t(200_000), false)]);
    assert_eq!(f.q[0].len(), 1);
    let f2 = &f;
    e.wake(t(200_000), Some, |q| !f2.q[q.index()].is_empty()).unwrap();
    assert_eq!(drain(&mut e, &mut f, t(200_000)), [0]);
}

#[test]
fn the_periodic_fill_reenables_one_queue_and_no_shaper_passes_everything() {
    let mut e = egress("periodic", Conformance::SendThenPay);
    let mut f = fifos([&[1200, 100], &[], &[]]);
    e.arrived(QueueId(0), Some(QueueId(0))).unwrap();
    assert_eq!(drain(&mut e, &mut f, t(0)), [0]);
    // -200 B: two fills of 100 B, the second at 200 us.
    assert_eq!(f.throttles, [(0, t(200_000), true)]);
    assert_eq!(e.next_wakeup(), None, "the caller schedules the fill");
    assert!(!e.poll_queue(t(100_000), QueueId(0), QueueId(0), true).unwrap());
    assert!(e.poll_queue(t(200_000), QueueId(0), QueueId(0), true).unwrap());
    assert_eq!(drain(&mut e, &mut f, t(200_000)), [0]);

    let mut e = egress("none", Conformance::WaitForTokens);
    let mut f = fifos([&[5000, 5000], &[], &[]]);
    e.arrived(QueueId(0), Some(QueueId(0))).unwrap();
    assert_eq!(drain(&mut e, &mut f, t(0)), [0, 0]);
    assert!(f.throttles.is_empty());
}

#[test]
fn bad_calls_are_errors() {
    let mut e = egress("event", Conformance::SendThenPay);
    assert!(matches!(e.arrived(QueueId(3), None), Err(Error::UnknownId { .. })));
    let mut f = fifos([&[100], &[], &[]]);
    e.arrived(QueueId(0), Some(QueueId(0))).unwrap();
    drain(&mut e, &mut f, t(10));
    f.q[0].push_back(100);
    e.arrived(QueueId(0), Some(QueueId(0))).unwrap();
    assert!(matches!(e.pick(t(5), &mut f), Err(Error::TimeWentBackwards { .. })));
}

/// `decide_and_poll_idle` decides as `decide` does for every shaper and conformance (the same
/// sequence of decisions on two copies); only the event-driven shaper ever reports an idle poll.
#[test]
fn the_decision_with_its_idle_poll_is_the_decision() {
    let p = [BucketParams { cir: Rate::from_bits_per_sec(8_000_000), cap_bytes: 1000, alpha_bytes: 500 }; 3];
    for kind in ["event", "periodic", "none"] {
        for conformance in [Conformance::SendThenPay, Conformance::WaitForTokens] {
            let make = || match kind {
                "event" => Shaping::Event(EventShaper::new(&p, 1, 0, 0).unwrap()),
                "periodic" => Shaping::Periodic(PeriodicShaper::new(&p, Duration::from_micros(100)).unwrap()),
                _ => Shaping::None,
            };
            let (mut a, mut b) = (make(), make());
            let mut idle = 0;
            for k in 0..2_000u64 {
                let (q, len, now) = (QueueId((k % 3) as u32), 100 + k % 900, t(k * 40_000));
                let d = a.decide(CoreId(0), q, len, now, conformance, &mut ()).map_err(|e| e.to_string());
                let e = b.decide_and_poll_idle(CoreId(0), q, len, now, conformance, true, &mut ());
                let (e, was_idle) = match e {
                    Ok((e, i)) => (Ok(e), i),
                    Err(e) => (Err(e.to_string()), false),
                };
                assert_eq!(d, e, "{kind}, {conformance:?}, packet {k}");
                idle += was_idle as u32;
                // The event-driven shaper's core is polled after every packet: in full by `a`,
                // by `b` only when its idle poll was not all there was to do.
                if let (Shaping::Event(x), Shaping::Event(y)) = (&mut a, &mut b) {
                    x.poll_core(CoreId(0), now, &mut (), |_| {}).unwrap();
                    if !was_idle {
                        y.poll_core(CoreId(0), now, &mut (), |_| {}).unwrap();
                    }
                }
            }
            assert_eq!(idle > 0, kind == "event", "{kind}, {conformance:?}: {idle} idle polls");
        }
    }
}
