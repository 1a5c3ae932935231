use super::*;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr};

fn key(i: u32) -> FlowKey {
    FlowKey::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 17, 5000, 53)
}
fn t(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

#[test]
fn never_used_buckets_go_first_in_index_order_or_by_hint() {
    let mut b = FlowBuckets::new(4).unwrap();
    assert_eq!(b.acquire(&key(0), None, t(0)).unwrap(), (0, Taken::Fresh));
    assert_eq!(b.acquire(&key(1), Some(2), t(0)).unwrap(), (2, Taken::Fresh));
    // The cursor steps over the bucket the hint took.
    assert_eq!(b.acquire(&key(2), None, t(0)).unwrap(), (1, Taken::Fresh));
    assert_eq!(b.acquire(&key(3), None, t(0)).unwrap(), (3, Taken::Fresh));
    assert_eq!(b.counters().fresh, 4);
    b.check().unwrap();
}

#[test]
fn a_flow_takes_its_own_bucket_back_full_or_not() {
    let mut b = FlowBuckets::new(2).unwrap();
    let (b0, _) = b.acquire(&key(0), None, t(0)).unwrap();
    assert!(b.release(b0, t(500), t(10)).unwrap(), "parked when its last packet leaves");
    assert_eq!(b.counters().parked, 1);
    // Before and after it is full, the flow gets it back.
    assert_eq!(b.acquire(&key(0), None, t(20)).unwrap(), (b0, Taken::Own));
    assert!(b.release(b0, t(30), t(25)).unwrap());
    assert_eq!(b.acquire(&key(0), None, t(1_000)).unwrap(), (b0, Taken::Own));
    // A hinted flow is found by its hint, with nothing in the map.
    assert_eq!(b.acquire(&key(1), Some(1), t(1_000)).unwrap(), (1, Taken::Fresh));
    assert!(b.release(1, t(2_000), t(1_000)).unwrap());
    assert_eq!(b.acquire(&key(1), Some(1), t(1_500)).unwrap(), (1, Taken::Own));
    assert_eq!(b.counters().parked_max, 1);
    b.check().unwrap();
}

#[test]
fn when_all_are_used_a_full_bucket_goes_before_a_filling_one() {
    let mut b = FlowBuckets::new(3).unwrap();
    for (f, full) in [(0, 900), (1, 100), (2, 400)] {
        let (x, _) = b.acquire(&key(f), None, t(0)).unwrap();
        b.release(x, t(full), t(0)).unwrap();
    }
    // At 200 only bucket 1 is full again: reused. Then the nearest to full, 2, then 0: evicted.
    assert_eq!(b.acquire(&key(10), None, t(200)).unwrap(), (1, Taken::Reused));
    assert_eq!(b.acquire(&key(11), None, t(200)).unwrap(), (2, Taken::Evicted));
    // Flow 2 lost its bucket: it comes back to flow 0's, the only one parked.
    assert_eq!(b.acquire(&key(2), None, t(300)).unwrap(), (0, Taken::Evicted));
    let c = *b.counters();
    assert_eq!((c.fresh, c.reused, c.evicted, c.parked), (3, 1, 2, 0));
    b.check().unwrap();
}

#[test]
fn with_every_bucket_held_a_new_flow_shares_one_by_hash() {
    let mut b = FlowBuckets::new(2).unwrap();
    b.acquire(&key(0), None, t(0)).unwrap();
    b.acquire(&key(1), None, t(0)).unwrap();
    let (x, how) = b.acquire(&key(2), None, t(0)).unwrap();
    assert_eq!(how, Taken::Shared);
    assert_eq!(b.held(x), 2);
    assert_eq!(b.acquire(&key(2), None, t(1)).unwrap(), (x, Taken::Shared), "the same one every time");
    assert_eq!(b.counters().shared, 2);
    b.check().unwrap();
}

#[test]
fn bad_calls_are_refused_and_change_nothing() {
    assert!(matches!(FlowBuckets::new(0), Err(Error::BadParameter { .. })));
    let mut b = FlowBuckets::new(2).unwrap();
    assert_eq!(b.acquire(&key(0), Some(2), t(0)), Err(Error::UnknownId { kind: "bucket", id: 2, count: 2 }));
    assert!(matches!(b.release(0, t(0), t(0)), Err(Error::NotAllowed(_))));
    assert!(matches!(b.release(7, t(0), t(0)), Err(Error::UnknownId { .. })));
    b.acquire(&key(0), None, t(10)).unwrap();
    assert!(matches!(b.acquire(&key(1), None, t(9)), Err(Error::TimeWentBackwards { .. })));
    assert!(matches!(b.release(0, t(20), t(9)), Err(Error::TimeWentBackwards { .. })));
    assert_eq!(b.held(0), 1);
    assert_eq!(b.counters().fresh, 1);
    b.check().unwrap();
}

/// The rule written as plainly as possible: a scan of every bucket per call.
struct Model {
    /// Per bucket: its flow, packets held, full time.
    owner: Vec<Option<u32>>,
    held: Vec<u32>,
    full_at: Vec<u64>,
    used: Vec<bool>,
}

impl Model {
    fn acquire(&mut self, f: u32, hint: Option<u32>, now: u64) -> (u32, Taken) {
        let n = self.owner.len();
        let pick = |b: usize, how, m: &mut Model| {
            m.owner.iter_mut().filter(|o| **o == Some(f)).for_each(|o| *o = None);
            (m.owner[b], m.used[b], m.held[b]) = (Some(f), true, 1);
            (b as u32, how)
        };
        if let Some(b) = self.owner.iter().position(|&o| o == Some(f)) {
            self.held[b] += 1;
            return (b as u32, Taken::Own);
        }
        if let Some(h) = hint.filter(|&h| !self.used[h as usize]) {
            return pick(h as usize, Taken::Fresh, self);
        }
        if let Some(b) = self.used.iter().position(|&u| !u) {
            return pick(b, Taken::Fresh, self);
        }
        let parked =
            (0..n).filter(|&b| self.held[b] == 0 && self.owner[b].is_some()).min_by_key(|&b| (self.full_at[b], b));
        if let Some(b) = parked {
            let how = if self.full_at[b] <= now { Taken::Reused } else { Taken::Evicted };
            return pick(b, how, self);
        }
        let b = (crate::pipeline::flow_hash(&key(f)) % n as u64) as usize;
        self.held[b] += 1;
        (b as u32, Taken::Shared)
    }
}

#[derive(Clone, Debug)]
enum Call {
    Acquire(u32),
    Release(u32),
    Wait(u64),
}

fn calls() -> impl Strategy<Value = Vec<Call>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0u32..12).prop_map(Call::Acquire),
            3 => (0u32..8).prop_map(Call::Release),
            1 => (0u64..2_000).prop_map(Call::Wait),
        ],
        0..300,
    )
}

proptest! {
    /// Any sequence of acquires and releases, with or without hints, gives the buckets the
    /// plain model gives, the invariants hold after every call and the heap stays bounded.
    #[test]
    fn the_rule_is_the_plain_model(n in 1u32..6, hinted in any::<bool>(), calls in calls()) {
        let mut b = FlowBuckets::new(n).unwrap();
        let mut m = Model { owner: vec![None; n as usize], held: vec![0; n as usize], full_at: vec![0; n as usize], used: vec![false; n as usize] };
        let mut now = 0u64;
        // Packets in flight: (flow, bucket).
        let mut inflight: Vec<(u32, u32)> = Vec::new();
        for c in calls {
            match c {
                Call::Acquire(f) => {
                    let hint = (hinted && f < n).then_some(f);
                    let got = b.acquire(&key(f), hint, t(now)).unwrap();
                    prop_assert_eq!(got, m.acquire(f, hint, now));
                    inflight.push((f, got.0));
                }
                Call::Release(i) if !inflight.is_empty() => {
                    let (_, x) = inflight.remove(i as usize % inflight.len());
                    // The shaper's full time: somewhere in the next 1,000 ns.
                    let full = now + (x as u64 * 389 + now * 7) % 1_000;
                    let parked = b.release(x, t(full), t(now)).unwrap();
                    m.held[x as usize] -= 1;
                    prop_assert_eq!(parked, m.held[x as usize] == 0);
                    if parked {
                        m.full_at[x as usize] = full;
                    }
                }
                Call::Release(_) => {}
                Call::Wait(d) => now += d,
            }
            b.check().map_err(TestCaseError::fail)?;
            prop_assert!(b.parked.len() <= 2 * n as usize + 64);
        }
    }
}

#[test]
fn flows_coming_and_going_forever_keep_the_memory_bounded() {
    // 64 buckets, 1e5 flows, each with one packet in and out: memory stays what it was once
    // every bucket had been used and the heap and maps had grown to their bound.
    let mut b = FlowBuckets::new(64).unwrap();
    let mut bound = 0;
    for i in 0..100_000u32 {
        let now = i as u64 * 100;
        let (x, _) = b.acquire(&key(i % 5_000), None, t(now)).unwrap();
        // Half the buckets fill quickly, half slowly: some are reused, some evicted.
        b.release(x, t(now + if i % 2 == 0 { 20_000 } else { 100 }), t(now)).unwrap();
        if i == 10_000 {
            bound = b.memory_bytes();
        }
    }
    assert!(b.memory_bytes() <= bound, "{} B, was {bound} B", b.memory_bytes());
    assert!(b.parked.len() <= 2 * 64 + 64);
    assert!(b.counters().evicted > 0 && b.counters().reused > 0);
    b.check().unwrap();
}
