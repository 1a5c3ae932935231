//! Unit tests of the allocator, driven by hand: each sets up a state the paper describes and
//! checks the decision. The randomized and end-to-end checks (every packet served once, FIFO,
//! eq 5) live in `npqos-sim`'s everest model, which runs the allocator on a timeline.

use super::*;

const US: u64 = 1_000;

fn cfg(policy: Policy, processors: u32, services: &[(u64, u64, f64)], t_sw_us: u64) -> AllocConfig {
    AllocConfig {
        processors,
        t_sw: Duration::from_micros(t_sw_us),
        delta: Duration::from_micros(t_sw_us.max(1)),
        services: services
            .iter()
            .enumerate()
            .map(|(i, &(t, d, g))| ServiceSpec {
                name: format!("s{i}"),
                t_pkt: Duration::from_micros(t),
                tolerance: Duration::from_micros(d),
                guarantee: g,
            })
            .collect(),
        policy,
    }
}

/// Service and processor ids from test indices (any integer type).
fn sv(i: impl TryInto<u32>) -> ServiceId {
    ServiceId(i.try_into().ok().expect("a small index"))
}
fn pr(i: impl TryInto<u32>) -> ProcessorId {
    ProcessorId(i.try_into().ok().expect("a small index"))
}

fn at(us: u64) -> Instant {
    Instant::from_nanos(us * US)
}

fn serves(out: &[Action]) -> Vec<(u32, u32)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Serve { proc, service } => Some((proc.0, service.0)),
            _ => None,
        })
        .collect()
}

fn switches(out: &[Action]) -> Vec<(u32, u32, u32)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Switch { proc, from, to } => Some((proc.0, from.0, to.0)),
            _ => None,
        })
        .collect()
}

#[test]
fn config_errors_are_named() {
    let mut c = cfg(Policy::Everest, 0, &[(10, 100, 1.0)], 10);
    assert!(matches!(Allocator::new(&c), Err(AllocError::Empty { .. })));
    c.processors = 2;
    c.services[0].guarantee = f64::NAN;
    assert!(matches!(Allocator::new(&c), Err(AllocError::BadGuarantee { service: 0, .. })));
    c.services[0].guarantee = 1.0;
    c.services[0].t_pkt = Duration::ZERO;
    assert!(matches!(Allocator::new(&c), Err(AllocError::ZeroTpkt { service: 0 })));
    let c = cfg(Policy::Quantum { quantum: Duration::ZERO }, 2, &[(10, 100, 1.0)], 10);
    assert!(matches!(Allocator::new(&c), Err(AllocError::ZeroQuantum)));
}

#[test]
fn q_lim_is_eq3_and_zero_for_no_committed_processor() {
    // t_pkt 10 us, D 2 ms: floor(D / t_pkt) - 1 = 199.
    let mut a = Allocator::new(&cfg(Policy::Static, 4, &[(10, 2000, 0.5), (18, 2000, 0.5)], 2000)).unwrap();
    assert_eq!(a.committed(sv(0)), 2);
    assert_eq!(a.q_lim(sv(0)), 2 * 199);
    assert_eq!(a.q_lim(sv(1)), 2 * (2000 / 18 - 1));
    // Everest starts with every processor marked: j = 0, Q_lim^0 = 0.
    a = Allocator::new(&cfg(Policy::Everest, 4, &[(10, 2000, 0.5), (18, 2000, 0.5)], 2000)).unwrap();
    assert_eq!((a.committed(sv(0)), a.allocated(sv(0)), a.q_lim(sv(0))), (0, 2, 0));
    a.check_invariants().unwrap();
}

#[test]
fn static_serves_only_its_own_processors_and_never_switches() {
    let mut a = Allocator::new(&cfg(Policy::Static, 2, &[(10, 50, 0.5), (10, 50, 0.5)], 100)).unwrap();
    let mut out = Vec::new();
    for i in 0..5 {
        a.arrival(at(i), sv(0), &mut out).unwrap();
    }
    // One processor per service: one packet on service 0's processor, four waiting.
    assert_eq!(serves(&out), vec![(0, 0)]);
    assert_eq!(a.queue_len(sv(0)), 4);
    out.clear();
    a.completed(at(10), pr(0), Duration::from_micros(10), &mut out).unwrap();
    assert_eq!(serves(&out), vec![(0, 0)]);
    assert_eq!(a.stats().switches, 0);
    a.check_invariants().unwrap();
}

#[test]
fn everest_marks_k_j_when_the_queue_empties() {
    // 4 processors on one service, t_pkt 10 us, Delta = 100 us. Serving a packet empties the
    // queue: R_arr(Delta) x t_pkt = 1 x 10 / 100 = 0.1, k^j = floor(4 - 0.1) = 3 marked.
    let mut a = Allocator::new(&cfg(Policy::Everest, 4, &[(10, 1000, 1.0)], 100)).unwrap();
    let mut out = Vec::new();
    a.arrival(at(1), sv(0), &mut out).unwrap();
    assert_eq!(serves(&out).len(), 1);
    assert_eq!((a.allocated(sv(0)), a.committed(sv(0))), (4, 1));
    // 25 packets within Delta: R x t_pkt = 2.5 -> k = floor(1.5) = 1, so 3 committed.
    for i in 0..24 {
        a.arrival(at(2 + i), sv(0), &mut out).unwrap();
        // Complete at once so the queue empties on each arrival.
        for (p, _) in serves(&out) {
            a.completed(at(2 + i), pr(p as usize), Duration::ZERO, &mut Vec::new()).unwrap();
        }
        out.clear();
    }
    assert_eq!(a.committed(sv(0)), 3);
    a.check_invariants().unwrap();
}

#[test]
fn everest_unmarks_its_own_processor_before_taking_another() {
    // Service 0: 2 processors, t_pkt 10 us, D 40 us -> Q_lim^j = 3j. Service 1 idle with 2.
    let mut a = Allocator::new(&cfg(Policy::Everest, 4, &[(10, 40, 0.5), (10, 40, 0.5)], 100)).unwrap();
    let mut out = Vec::new();
    // Two packets go straight to the two idle processors; after the first, the queue emptied
    // and k^j = floor(2 - 0.1) = 1 processor stayed marked; committed 1.
    a.arrival(at(0), sv(0), &mut out).unwrap();
    a.arrival(at(0), sv(0), &mut out).unwrap();
    assert_eq!(serves(&out).len(), 2);
    assert_eq!(a.committed(sv(0)), 1);
    out.clear();
    // Waiting packets 1..=3 do not exceed Q_lim^1 = 3; the 4th does: unmark own, no switch.
    for _ in 0..3 {
        assert_eq!(a.arrival(at(1), sv(0), &mut out).unwrap(), Trigger::None);
    }
    assert_eq!(a.arrival(at(1), sv(0), &mut out).unwrap(), Trigger::Hi { clean: true });
    assert!(switches(&out).is_empty());
    assert_eq!((a.committed(sv(0)), a.stats().unmarked), (2, 1));
    // Q_lim^2 = 6: packets 5 and 6 wait, the 7th takes the processor of service 1 marked
    // longest (both since 0: the lower index), which is idle: a switch starting now.
    a.arrival(at(2), sv(0), &mut out).unwrap();
    a.arrival(at(2), sv(0), &mut out).unwrap();
    assert_eq!(a.arrival(at(2), sv(0), &mut out).unwrap(), Trigger::Hi { clean: true });
    assert_eq!(switches(&out), vec![(2, 1, 0)]);
    assert_eq!((a.allocated(sv(0)), a.allocated(sv(1))), (3, 1));
    a.check_invariants().unwrap();
    // While that processor is on its way, the next trigger is not clean.
    for _ in 0..2 {
        a.arrival(at(3), sv(0), &mut out).unwrap();
    }
    assert_eq!(a.arrival(at(3), sv(0), &mut out).unwrap(), Trigger::Hi { clean: false });
    out.clear();
    a.switch_done(at(102), pr(2), &mut out).unwrap();
    assert_eq!(serves(&out), vec![(2, 0)]);
    assert!(a.t_sw_estimate() == 100 * US);
    a.check_invariants().unwrap();
}

#[test]
fn overload_takes_by_force_from_a_service_above_its_guarantee() {
    // 4 processors, equal guarantees (2 each). Service 1 grabbed 3 while service 0 was idle.
    let mut a = Allocator::new(&cfg(Policy::Everest, 4, &[(10, 40, 0.5), (10, 40, 0.5)], 100)).unwrap();
    let mut out = Vec::new();
    for _ in 0..40 {
        a.arrival(at(0), sv(1), &mut out).unwrap();
    }
    // Service 1 took its own two and service 0's two processors (marked, idle).
    assert_eq!(a.allocated(sv(1)), 4);
    for _ in 0..2 {
        a.arrival(at(0), sv(0), &mut out).unwrap();
    }
    out.clear();
    // Service 0 has no processor left anywhere marked: overload control. Its N_req is
    // ceil(q / 3) = 1 (q = 2) and its guarantee 2, so it may take one by force from service 1.
    a.arrival(at(1), sv(0), &mut out).unwrap();
    assert_eq!(a.allocated(sv(0)), 1);
    assert_eq!(a.stats().forced, 1);
    // The victim is busy: it switches after its packet (no Switch action yet).
    assert!(switches(&out).is_empty());
    a.check_invariants().unwrap();
    // q = 4 > Q_lim^1 = 3 -> eligible; N_req = ceil(4/3) = 2 <= guarantee: a second one.
    a.arrival(at(1), sv(0), &mut out).unwrap();
    assert_eq!(a.allocated(sv(0)), 2);
    // Now at its guarantee with service 1 at 2 and backlogged: refused.
    for _ in 0..3 {
        a.arrival(at(1), sv(0), &mut out).unwrap();
    }
    assert_eq!(a.arrival(at(1), sv(0), &mut out).unwrap(), Trigger::HiRefused);
    assert_eq!(a.allocated(sv(0)), 2);
    a.check_invariants().unwrap();
}

#[test]
fn everest_ld_allocates_only_after_a_late_packet_and_t_sw_apart() {
    let mut a = Allocator::new(&cfg(Policy::EverestLd, 4, &[(10, 40, 0.5), (10, 40, 0.5)], 100)).unwrap();
    let mut out = Vec::new();
    for _ in 0..30 {
        assert_eq!(a.arrival(at(0), sv(0), &mut out).unwrap(), Trigger::None);
    }
    let before = a.stats().hi_grants;
    let busy: Vec<u32> = serves(&out).iter().map(|s| s.0).collect();
    out.clear();
    // A packet that took 30 us (< D = 40): nothing.
    a.completed(at(30), pr(busy[0] as usize), Duration::from_micros(30), &mut out).unwrap();
    assert_eq!(a.stats().hi_grants, before);
    // A late one: one allocation.
    a.completed(at(31), pr(busy[1] as usize), Duration::from_micros(41), &mut out).unwrap();
    assert_eq!(a.stats().hi_grants, before + 1);
    assert_eq!(a.stats().late_triggers, 1);
    // Another late packet within t_sw = 100 us: no allocation.
    let p = serves(&out).last().unwrap().0;
    a.completed(at(60), pr(p as usize), Duration::from_micros(60), &mut out).unwrap();
    assert_eq!(a.stats().hi_grants, before + 1);
    a.check_invariants().unwrap();
}

#[test]
fn eager_policies_grab_a_released_processor_for_one_waiting_packet() {
    for policy in [Policy::CohortE, Policy::EverestAe, Policy::Quantum { quantum: Duration::from_micros(500) }] {
        let mut a = Allocator::new(&cfg(policy, 2, &[(10, 2000, 0.5), (10, 2000, 0.5)], 100)).unwrap();
        let mut out = Vec::new();
        a.arrival(at(0), sv(0), &mut out).unwrap();
        assert!(switches(&out).is_empty());
        // Second packet waits behind the busy processor: eager takes service 1's processor.
        assert_eq!(a.arrival(at(1), sv(0), &mut out).unwrap(), Trigger::Lo, "{policy:?}");
        assert_eq!(switches(&out), vec![(1, 1, 0)], "{policy:?}");
        // A third waits too, but a processor is already on its way: no more.
        assert_eq!(a.arrival(at(2), sv(0), &mut out).unwrap(), Trigger::None, "{policy:?}");
        a.check_invariants().unwrap();
    }
    // Everest, for the same packets, keeps waiting (Q_lim^j = 199 j).
    let mut a = Allocator::new(&cfg(Policy::Everest, 2, &[(10, 2000, 0.5), (10, 2000, 0.5)], 100)).unwrap();
    let mut out = Vec::new();
    for i in 0..3 {
        a.arrival(at(i), sv(0), &mut out).unwrap();
    }
    assert!(switches(&out).is_empty());
}

#[test]
fn adaptive_is_eager_only_when_a_switch_is_short_against_d() {
    // t_sw = D / 20: Everest-AE's eager trigger; t_sw = D / 2: it waits until the backlog
    // outlasts a switch (q > j floor(t_sw / t_pkt) = 100).
    for (t_sw, grabs) in [(100, true), (1000, false)] {
        let mut a = Allocator::new(&cfg(Policy::Adaptive, 2, &[(10, 2000, 0.5), (10, 2000, 0.5)], t_sw)).unwrap();
        let mut out = Vec::new();
        a.arrival(at(0), sv(0), &mut out).unwrap();
        let trig = a.arrival(at(1), sv(0), &mut out).unwrap();
        assert_eq!(trig == Trigger::Lo, grabs, "t_sw {t_sw}");
        assert_eq!(switches(&out).len(), grabs as usize, "t_sw {t_sw}");
        for i in 2..=101 {
            a.arrival(at(i), sv(0), &mut out).unwrap();
        }
        // With t_sw = D / 2 the 101st waiting packet sets off the low-priority trigger.
        assert_eq!(switches(&out), vec![(1, 1, 0)], "t_sw {t_sw}");
        a.check_invariants().unwrap();
    }
}

#[test]
fn quantum_expiry_hands_the_processor_to_a_waiting_service() {
    let q = Duration::from_micros(500);
    let mut a =
        Allocator::new(&cfg(Policy::Quantum { quantum: q }, 2, &[(10, 2000, 0.5), (10, 2000, 0.5)], 100)).unwrap();
    let mut out = Vec::new();
    // Service 0 reclaims its processor at t = 0 (quantum until 500 us) and keeps it busy.
    for i in 0..100 {
        a.arrival(at(i), sv(0), &mut out).unwrap();
    }
    // Service 1's processor was taken at t = 1 (switching); service 1 now has packets.
    a.switch_done(at(101), pr(1), &mut out).unwrap();
    assert_eq!(a.allocated(sv(0)), 2);
    a.arrival(at(200), sv(1), &mut out).unwrap();
    assert_eq!(a.allocated(sv(1)), 0);
    assert_eq!(a.next_wakeup(), Some(at(500)));
    out.clear();
    a.timer(at(500), &mut out).unwrap();
    // The expired processor 0 goes to service 1 (furthest below its share), after its packet.
    assert_eq!(a.allocated(sv(1)), 1);
    assert_eq!(a.stats().quantum_expiries, 1);
    a.check_invariants().unwrap();
}

#[test]
fn cohort_e_gives_a_released_processor_in_proportion_to_queues() {
    // 3 processors, one per service. Services 1 and 2 are backlogged 10 : 1; service 0's
    // processor goes idle with an empty queue and is released: it goes to service 1.
    let mut a =
        Allocator::new(&cfg(Policy::CohortE, 3, &[(10, 2000, 0.34), (10, 2000, 0.33), (10, 2000, 0.33)], 100)).unwrap();
    let mut out = Vec::new();
    // Every processor busy with its own service first, then the backlogs.
    for s in 0..3 {
        a.arrival(at(0), sv(s), &mut out).unwrap();
    }
    for _ in 0..10 {
        a.arrival(at(0), sv(1), &mut out).unwrap();
    }
    a.arrival(at(0), sv(2), &mut out).unwrap();
    // Service 1 and 2 each waited with no free processor left: nothing granted (no force).
    assert_eq!(a.stats().switches, 0);
    out.clear();
    a.completed(at(10), pr(0), Duration::from_micros(10), &mut out).unwrap();
    assert_eq!(switches(&out), vec![(0, 0, 1)]);
    a.check_invariants().unwrap();
}

mod contract {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Call {
        Arrive(u32),
        /// Complete the packet of the k-th busy processor (or of an arbitrary processor id).
        Complete(u32, bool),
        /// Finish the switch of the k-th switching processor (or of an arbitrary id).
        SwitchDone(u32, bool),
        Timer,
    }

    fn call() -> impl Strategy<Value = Call> {
        prop_oneof![
            5 => (0u32..5).prop_map(Call::Arrive),
            4 => (0u32..8, proptest::bool::weighted(0.1)).prop_map(|(k, bogus)| Call::Complete(k, bogus)),
            2 => (0u32..8, proptest::bool::weighted(0.1)).prop_map(|(k, bogus)| Call::SwitchDone(k, bogus)),
            1 => Just(Call::Timer),
        ]
    }

    fn policy() -> impl Strategy<Value = Policy> {
        prop_oneof![
            Just(Policy::Static),
            Just(Policy::Quantum { quantum: Duration::from_micros(300) }),
            Just(Policy::CohortE),
            Just(Policy::Everest),
            Just(Policy::EverestLd),
            Just(Policy::EverestAe),
            Just(Policy::Adaptive),
        ]
    }

    proptest! {
        /// Arbitrary call sequences under every policy, with unknown ids, calls the state does
        /// not allow and time going backwards mixed in: no panic; a bad call is an error of the
        /// right kind and changes nothing (the invariants hold and the queue counts agree with
        /// a model of the runtime); every Serve takes a waiting packet.
        #[test]
        fn arbitrary_calls_never_panic_and_keep_the_books(
            pol in policy(),
            calls in proptest::collection::vec((call(), 0u64..300, proptest::bool::weighted(0.05)), 1..300),
        ) {
            let c = cfg(pol, 4, &[(10, 200, 0.5), (30, 200, 0.3), (5, 200, 0.2)], 100);
            let mut a = Allocator::new(&c).unwrap();
            let mut out = Vec::new();
            let mut waiting = [0u64; 3];
            let mut busy: Vec<u32> = Vec::new();
            let mut switching: Vec<u32> = Vec::new();
            let mut now = 0u64;
            for (call, dt, back) in calls {
                let t = if back && now > 0 { now - 1 } else { now + dt };
                let before = (waiting, busy.clone(), switching.clone());
                out.clear();
                let r = match call {
                    Call::Arrive(s) => a.arrival(Instant::from_nanos(t), ServiceId(s), &mut out).map(|_| ()),
                    Call::Complete(k, bogus) => {
                        let p = if bogus || busy.is_empty() { k } else { busy[k as usize % busy.len()] };
                        a.completed(Instant::from_nanos(t), ProcessorId(p), Duration::ZERO, &mut out)
                    }
                    Call::SwitchDone(k, bogus) => {
                        let p = if bogus || switching.is_empty() { k } else { switching[k as usize % switching.len()] };
                        a.switch_done(Instant::from_nanos(t), ProcessorId(p), &mut out)
                    }
                    Call::Timer => a.timer(Instant::from_nanos(t), &mut out),
                };
                match r {
                    Ok(()) => {
                        now = t;
                        match call {
                            Call::Arrive(s) => waiting[s as usize] += 1,
                            Call::Complete(..) | Call::SwitchDone(..) => {}
                            Call::Timer => {}
                        }
                        // The processor that reported is no longer busy / switching (it may
                        // start again through `out`).
                        if let Call::Complete(k, bogus) = call {
                            let p = if bogus || before.1.is_empty() { k } else { before.1[k as usize % before.1.len()] };
                            busy.retain(|&x| x != p);
                        }
                        if let Call::SwitchDone(k, bogus) = call {
                            let p = if bogus || before.2.is_empty() { k } else { before.2[k as usize % before.2.len()] };
                            switching.retain(|&x| x != p);
                        }
                        for act in &out {
                            match *act {
                                Action::Serve { proc, service } => {
                                    prop_assert!(waiting[service.index()] > 0, "serve of an empty queue");
                                    waiting[service.index()] -= 1;
                                    prop_assert!(!busy.contains(&proc.0) && !switching.contains(&proc.0));
                                    busy.push(proc.0);
                                }
                                Action::Switch { proc, .. } => {
                                    prop_assert!(!switching.contains(&proc.0));
                                    busy.retain(|&x| x != proc.0);
                                    switching.push(proc.0);
                                }
                            }
                        }
                    }
                    Err(e) => {
                        prop_assert!(out.is_empty(), "a refused call decided something");
                        prop_assert!(
                            matches!(e, Error::UnknownId { .. } | Error::NotAllowed(_) | Error::TimeWentBackwards { .. }),
                            "{e:?}"
                        );
                        if matches!(e, Error::TimeWentBackwards { .. }) {
                            prop_assert!(t < now);
                        }
                    }
                }
                prop_assert!(a.check_invariants().is_ok(), "{:?}", a.check_invariants());
                for s in 0..3u32 {
                    prop_assert_eq!(a.queue_len(ServiceId(s)), waiting[s as usize]);
                }
            }
        }
    }

    #[test]
    fn bad_calls_are_typed_errors() {
        let c = cfg(Policy::Everest, 2, &[(10, 100, 1.0)], 10);
        let mut a = Allocator::new(&c).unwrap();
        let mut out = Vec::new();
        assert_eq!(
            a.arrival(at(5), ServiceId(1), &mut out),
            Err(Error::UnknownId { kind: "service", id: 1, count: 1 })
        );
        assert!(matches!(a.completed(at(5), ProcessorId(0), Duration::ZERO, &mut out), Err(Error::NotAllowed(_))));
        assert!(matches!(
            a.switch_done(at(5), ProcessorId(9), &mut out),
            Err(Error::UnknownId { kind: "processor", .. })
        ));
        a.arrival(at(5), ServiceId(0), &mut out).unwrap();
        assert!(matches!(a.timer(at(4), &mut out), Err(Error::TimeWentBackwards { .. })));
        assert_eq!(a.queue_len(ServiceId(7)), 0);
        assert_eq!(a.owner(ProcessorId(7)), None);
    }
}

#[test]
fn withdrawn_packets_leave_the_queue_and_an_emptied_queue_is_marked() {
    // One processor, busy: three packets wait. Two are withdrawn (an AQM dropped them): one
    // waits, and the processor's completion serves exactly it.
    let mut a = Allocator::new(&cfg(Policy::Everest, 1, &[(10, 1000, 1.0)], 100)).unwrap();
    let mut out = Vec::new();
    for i in 0..4 {
        a.arrival(at(1 + i), sv(0), &mut out).unwrap();
    }
    assert_eq!((serves(&out).len(), a.queue_len(sv(0))), (1, 3));
    assert!(a.withdrawn(at(5), sv(0), 4, &mut out).is_err(), "more than wait");
    a.withdrawn(at(5), sv(0), 2, &mut out).unwrap();
    assert_eq!(a.queue_len(sv(0)), 1);
    out.clear();
    a.completed(at(6), pr(0), Duration::ZERO, &mut out).unwrap();
    assert_eq!(serves(&out), vec![(0, 0)]);
    assert_eq!(a.queue_len(sv(0)), 0);
    // The last one withdrawn while the processor is busy: the queue is empty, and the
    // completion serves nothing.
    a.arrival(at(7), sv(0), &mut out).unwrap();
    a.withdrawn(at(8), sv(0), 1, &mut out).unwrap();
    out.clear();
    a.completed(at(9), pr(0), Duration::ZERO, &mut out).unwrap();
    assert!(serves(&out).is_empty());
    a.check_invariants().unwrap();
}
