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

fn at(us: u64) -> Instant {
    Instant::from_nanos(us * US)
}

fn serves(out: &[Action]) -> Vec<(u32, u32)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Serve { proc, service } => Some((*proc, *service)),
            _ => None,
        })
        .collect()
}

fn switches(out: &[Action]) -> Vec<(u32, u32, u32)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Switch { proc, from, to } => Some((*proc, *from, *to)),
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
    assert_eq!(a.committed(0), 2);
    assert_eq!(a.q_lim(0), 2 * 199);
    assert_eq!(a.q_lim(1), 2 * (2000 / 18 - 1));
    // Everest starts with every processor marked: j = 0, Q_lim^0 = 0.
    a = Allocator::new(&cfg(Policy::Everest, 4, &[(10, 2000, 0.5), (18, 2000, 0.5)], 2000)).unwrap();
    assert_eq!((a.committed(0), a.allocated(0), a.q_lim(0)), (0, 2, 0));
    a.check_invariants().unwrap();
}

#[test]
fn static_serves_only_its_own_processors_and_never_switches() {
    let mut a = Allocator::new(&cfg(Policy::Static, 2, &[(10, 50, 0.5), (10, 50, 0.5)], 100)).unwrap();
    let mut out = Vec::new();
    for i in 0..5 {
        a.arrival(at(i), 0, &mut out);
    }
    // One processor per service: one packet on service 0's processor, four waiting.
    assert_eq!(serves(&out), vec![(0, 0)]);
    assert_eq!(a.queue_len(0), 4);
    out.clear();
    a.completed(at(10), 0, Duration::from_micros(10), &mut out);
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
    a.arrival(at(1), 0, &mut out);
    assert_eq!(serves(&out).len(), 1);
    assert_eq!((a.allocated(0), a.committed(0)), (4, 1));
    // 25 packets within Delta: R x t_pkt = 2.5 -> k = floor(1.5) = 1, so 3 committed.
    for i in 0..24 {
        a.arrival(at(2 + i), 0, &mut out);
        // Complete at once so the queue empties on each arrival.
        for (p, _) in serves(&out) {
            a.completed(at(2 + i), p as usize, Duration::ZERO, &mut Vec::new());
        }
        out.clear();
    }
    assert_eq!(a.committed(0), 3);
    a.check_invariants().unwrap();
}

#[test]
fn everest_unmarks_its_own_processor_before_taking_another() {
    // Service 0: 2 processors, t_pkt 10 us, D 40 us -> Q_lim^j = 3j. Service 1 idle with 2.
    let mut a = Allocator::new(&cfg(Policy::Everest, 4, &[(10, 40, 0.5), (10, 40, 0.5)], 100)).unwrap();
    let mut out = Vec::new();
    // Two packets go straight to the two idle processors; after the first, the queue emptied
    // and k^j = floor(2 - 0.1) = 1 processor stayed marked; committed 1.
    a.arrival(at(0), 0, &mut out);
    a.arrival(at(0), 0, &mut out);
    assert_eq!(serves(&out).len(), 2);
    assert_eq!(a.committed(0), 1);
    out.clear();
    // Waiting packets 1..=3 do not exceed Q_lim^1 = 3; the 4th does: unmark own, no switch.
    for _ in 0..3 {
        assert_eq!(a.arrival(at(1), 0, &mut out), Trigger::None);
    }
    assert_eq!(a.arrival(at(1), 0, &mut out), Trigger::Hi { clean: true });
    assert!(switches(&out).is_empty());
    assert_eq!((a.committed(0), a.stats().unmarked), (2, 1));
    // Q_lim^2 = 6: packets 5 and 6 wait, the 7th takes the processor of service 1 marked
    // longest (both since 0: the lower index), which is idle: a switch starting now.
    a.arrival(at(2), 0, &mut out);
    a.arrival(at(2), 0, &mut out);
    assert_eq!(a.arrival(at(2), 0, &mut out), Trigger::Hi { clean: true });
    assert_eq!(switches(&out), vec![(2, 1, 0)]);
    assert_eq!((a.allocated(0), a.allocated(1)), (3, 1));
    a.check_invariants().unwrap();
    // While that processor is on its way, the next trigger is not clean.
    for _ in 0..2 {
        a.arrival(at(3), 0, &mut out);
    }
    assert_eq!(a.arrival(at(3), 0, &mut out), Trigger::Hi { clean: false });
    out.clear();
    a.switch_done(at(102), 2, &mut out);
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
        a.arrival(at(0), 1, &mut out);
    }
    // Service 1 took its own two and service 0's two processors (marked, idle).
    assert_eq!(a.allocated(1), 4);
    for _ in 0..2 {
        a.arrival(at(0), 0, &mut out);
    }
    out.clear();
    // Service 0 has no processor left anywhere marked: overload control. Its N_req is
    // ceil(q / 3) = 1 (q = 2) and its guarantee 2, so it may take one by force from service 1.
    a.arrival(at(1), 0, &mut out);
    assert_eq!(a.allocated(0), 1);
    assert_eq!(a.stats().forced, 1);
    // The victim is busy: it switches after its packet (no Switch action yet).
    assert!(switches(&out).is_empty());
    a.check_invariants().unwrap();
    // q = 4 > Q_lim^1 = 3 -> eligible; N_req = ceil(4/3) = 2 <= guarantee: a second one.
    a.arrival(at(1), 0, &mut out);
    assert_eq!(a.allocated(0), 2);
    // Now at its guarantee with service 1 at 2 and backlogged: refused.
    for _ in 0..3 {
        a.arrival(at(1), 0, &mut out);
    }
    assert_eq!(a.arrival(at(1), 0, &mut out), Trigger::HiRefused);
    assert_eq!(a.allocated(0), 2);
    a.check_invariants().unwrap();
}

#[test]
fn everest_ld_allocates_only_after_a_late_packet_and_t_sw_apart() {
    let mut a = Allocator::new(&cfg(Policy::EverestLd, 4, &[(10, 40, 0.5), (10, 40, 0.5)], 100)).unwrap();
    let mut out = Vec::new();
    for _ in 0..30 {
        assert_eq!(a.arrival(at(0), 0, &mut out), Trigger::None);
    }
    let before = a.stats().hi_grants;
    let busy: Vec<u32> = serves(&out).iter().map(|s| s.0).collect();
    out.clear();
    // A packet that took 30 us (< D = 40): nothing.
    a.completed(at(30), busy[0] as usize, Duration::from_micros(30), &mut out);
    assert_eq!(a.stats().hi_grants, before);
    // A late one: one allocation.
    a.completed(at(31), busy[1] as usize, Duration::from_micros(41), &mut out);
    assert_eq!(a.stats().hi_grants, before + 1);
    assert_eq!(a.stats().late_triggers, 1);
    // Another late packet within t_sw = 100 us: no allocation.
    let p = serves(&out).last().unwrap().0;
    a.completed(at(60), p as usize, Duration::from_micros(60), &mut out);
    assert_eq!(a.stats().hi_grants, before + 1);
    a.check_invariants().unwrap();
}

#[test]
fn eager_policies_grab_a_released_processor_for_one_waiting_packet() {
    for policy in [Policy::CohortE, Policy::EverestAe, Policy::Quantum { quantum: Duration::from_micros(500) }] {
        let mut a = Allocator::new(&cfg(policy, 2, &[(10, 2000, 0.5), (10, 2000, 0.5)], 100)).unwrap();
        let mut out = Vec::new();
        a.arrival(at(0), 0, &mut out);
        assert!(switches(&out).is_empty());
        // Second packet waits behind the busy processor: eager takes service 1's processor.
        assert_eq!(a.arrival(at(1), 0, &mut out), Trigger::Lo, "{policy:?}");
        assert_eq!(switches(&out), vec![(1, 1, 0)], "{policy:?}");
        // A third waits too, but a processor is already on its way: no more.
        assert_eq!(a.arrival(at(2), 0, &mut out), Trigger::None, "{policy:?}");
        a.check_invariants().unwrap();
    }
    // Everest, for the same packets, keeps waiting (Q_lim^j = 199 j).
    let mut a = Allocator::new(&cfg(Policy::Everest, 2, &[(10, 2000, 0.5), (10, 2000, 0.5)], 100)).unwrap();
    let mut out = Vec::new();
    for i in 0..3 {
        a.arrival(at(i), 0, &mut out);
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
        a.arrival(at(0), 0, &mut out);
        let trig = a.arrival(at(1), 0, &mut out);
        assert_eq!(trig == Trigger::Lo, grabs, "t_sw {t_sw}");
        assert_eq!(switches(&out).len(), grabs as usize, "t_sw {t_sw}");
        for i in 2..=101 {
            a.arrival(at(i), 0, &mut out);
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
        a.arrival(at(i), 0, &mut out);
    }
    // Service 1's processor was taken at t = 1 (switching); service 1 now has packets.
    a.switch_done(at(101), 1, &mut out);
    assert_eq!(a.allocated(0), 2);
    a.arrival(at(200), 1, &mut out);
    assert_eq!(a.allocated(1), 0);
    assert_eq!(a.next_wakeup(), Some(at(500)));
    out.clear();
    a.timer(at(500), &mut out);
    // The expired processor 0 goes to service 1 (furthest below its share), after its packet.
    assert_eq!(a.allocated(1), 1);
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
        a.arrival(at(0), s, &mut out);
    }
    for _ in 0..10 {
        a.arrival(at(0), 1, &mut out);
    }
    a.arrival(at(0), 2, &mut out);
    // Service 1 and 2 each waited with no free processor left: nothing granted (no force).
    assert_eq!(a.stats().switches, 0);
    out.clear();
    a.completed(at(10), 0, Duration::from_micros(10), &mut out);
    assert_eq!(switches(&out), vec![(0, 0, 1)]);
    a.check_invariants().unwrap();
}
