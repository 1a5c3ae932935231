//! Tests of the predictive mechanisms: each checks a property the paper states, against an
//! independent computation where there is one.

use super::admission::{Admission, FlowRequest, Refusal};
use super::estimate::{Estimator, OnlineLsq, SPC_TO_2GHZ, TABLE1};
use super::fq::{Discipline, Dispatched, FairQueue, FqPacket};
use super::lap::{LapPacket, LapScheduler, Policy};
use crate::{AppId, Error, FlowId, Instant, ProcessorId};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Two-pass batch least squares (the reference): means first, then centred sums.
fn batch(xs: &[(u32, f64)]) -> (f64, f64) {
    let n = xs.len() as f64;
    let ml = xs.iter().map(|x| x.0 as f64).sum::<f64>() / n;
    let mt = xs.iter().map(|x| x.1).sum::<f64>() / n;
    let sll: f64 = xs.iter().map(|x| (x.0 as f64 - ml).powi(2)).sum();
    let slt: f64 = xs.iter().map(|x| (x.0 as f64 - ml) * (x.1 - mt)).sum();
    let b = slt / sll;
    (mt - b * ml, b)
}

#[test]
fn online_fit_matches_a_batch_regression_on_the_same_samples() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for app in TABLE1 {
        let mut f = OnlineLsq::new();
        let mut xs = Vec::new();
        for _ in 0..100_000 {
            let l = rng.random_range(40..=1500u32);
            let t = app.estimate_us(l) * (1.0 + rng.random_range(-0.05..0.05));
            f.add(l, t);
            xs.push((l, t));
        }
        let (a, b) = f.fit().unwrap();
        let (ra, rb) = batch(&xs);
        assert!((a - ra).abs() <= 1e-9 * ra.abs().max(1.0), "{}: alpha {a} vs {ra}", app.name);
        assert!((b - rb).abs() <= 1e-9 * rb.abs().max(1.0), "{}: beta {b} vs {rb}", app.name);
        // And the fit recovers Table 1 within the noise.
        assert!((a - app.alpha_us).abs() < 0.02 * app.alpha_us + 0.5, "{}: alpha {a}", app.name);
        assert!((b - app.beta_us_per_byte).abs() < 0.01 * app.beta_us_per_byte + 1e-3, "{}: beta {b}", app.name);
    }
}

#[test]
fn online_fit_is_stable_where_eq2_raw_sums_are_not() {
    // Lengths far from zero with a small spread: eq 2 on raw sums subtracts nearly equal
    // numbers. (Not packet lengths, but the same arithmetic as ~1e7 large packets.)
    let mut f = OnlineLsq::new();
    let (mut sl, mut st, mut sll, mut slt, mut n) = (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for i in 0..10_000u32 {
        let l = 100_000_000 + (i % 7);
        let t = 3.0 + 0.5 * l as f64;
        f.add(l, t);
        let lf = l as f64;
        sl += lf;
        st += t;
        sll += lf * lf;
        slt += lf * t;
        n += 1.0;
    }
    let (_, b) = f.fit().unwrap();
    assert!((b - 0.5).abs() < 1e-6, "centred fit: beta {b}");
    let naive = (slt - st * sl / n) / (sll - sl * sl / n);
    assert!((naive - 0.5).abs() > 1e-3, "raw sums happened to survive: {naive}");
}

#[test]
fn estimator_uses_the_prior_until_the_fit_has_enough_samples() {
    let mut e = Estimator::new(&TABLE1, 10);
    assert_eq!(e.estimate_us(1, 200), 320.0 + 1.3 * 200.0);
    for i in 0..10 {
        e.observe(1, 100 + 100 * i, 2.0 * (100 + 100 * i) as f64 + 50.0);
    }
    assert!((e.estimate_us(1, 200) - 450.0).abs() < 1e-9);
    // One length only: no slope, keep the prior.
    let mut e = Estimator::new(&TABLE1, 2);
    e.observe(0, 64, 10.0);
    e.observe(0, 64, 12.0);
    assert_eq!(e.estimate_us(0, 64), 51.0);
    assert_eq!(TABLE1[3].scaled(SPC_TO_2GHZ).estimate_us(100), 32.0 + 0.92 * 100.0);
}

#[test]
fn admission_is_eq4_and_says_what_ran_out() {
    // Encryption, 10 Mbit/s of 200-byte packets: 6,250 packets/s x (320 + 1.3 x 200) us
    // = 3.625 processors; outgoing 10 Mbit/s (gamma = 1).
    let enc = FlowRequest { bandwidth_bps: 10e6, mean_len: 200, app: TABLE1[1] };
    assert!((enc.processing() - 3.625).abs() < 1e-12);
    let mut a = Admission::new(8.0, 1e9);
    assert!((a.admit(&enc).unwrap() - 3.625).abs() < 1e-12);
    assert!(a.admit(&enc).is_ok());
    match a.admit(&enc) {
        Err(Refusal::Processing { need, left }) => {
            assert!((need - 3.625).abs() < 1e-12 && (left - 0.75).abs() < 1e-9)
        }
        other => panic!("expected a processing refusal, got {other:?}"),
    }
    // FEC expands 1.14x: 900 Mbit/s in needs 1,026 Mbit/s out of a 1 Gbit/s link.
    let fec = FlowRequest { bandwidth_bps: 900e6, mean_len: 1000, app: TABLE1[3].scaled(1000.0) };
    let mut b = Admission::new(1e6, 1e9);
    assert!(matches!(b.admit(&fec), Err(Refusal::Bandwidth { .. })));
    b.release(&fec);
    assert_eq!(b.usage().2, 0);
    assert!(matches!(b.admit(&FlowRequest { mean_len: 0, ..enc }), Err(Refusal::Invalid(_))));
}

fn pkt(id: u64, flow: u32, est: f64, actual: f64, at: u64) -> FqPacket {
    FqPacket { id, flow: FlowId(flow), app: AppId(0), est_ns: est, actual_ns: actual, arrival: Instant::from_nanos(at) }
}

/// The fair queue's calls with times in ns, results unwrapped (the contract's errors are tested
/// on their own).
trait Ns {
    fn enq(&mut self, now: u64, p: FqPacket) -> Result<(), Error>;
    fn deq(&mut self, now: u64) -> Option<Dispatched>;
    fn done(&mut self, p: &FqPacket);
    fn head(&mut self, now: u64, flow: u32) -> Option<Dispatched>;
}
impl Ns for FairQueue {
    fn enq(&mut self, now: u64, p: FqPacket) -> Result<(), Error> {
        self.enqueue(Instant::from_nanos(now), p)
    }
    fn deq(&mut self, now: u64) -> Option<Dispatched> {
        self.dequeue(Instant::from_nanos(now)).unwrap()
    }
    fn done(&mut self, p: &FqPacket) {
        self.completed(p).unwrap()
    }
    fn head(&mut self, now: u64, flow: u32) -> Option<Dispatched> {
        self.take_head(Instant::from_nanos(now), FlowId(flow)).unwrap_or(None)
    }
}

/// Serves everything in `q` on one processor starting at `t0`; returns flows in service order.
fn drain_one_processor(q: &mut FairQueue, mut now: u64) -> Vec<u32> {
    let mut order = Vec::new();
    while let Some(d) = q.deq(now) {
        order.push(d.packet.flow.0);
        now += d.packet.actual_ns as u64;
        q.done(&d.packet);
    }
    order
}

#[test]
fn figure4_example_wf2q_alternates_and_knows_the_shortest() {
    // Flow 0 reserves 50%, flows 1-5 10% each; equal estimates, different actual times
    // (flow 1 the shortest). Flow 0 has 5 packets, the others one each.
    // Flow 0's packets are a little shorter, so that EFQ's estimated finish tags never tie.
    let actual = [99.0, 105.0, 120.0, 130.0, 140.0, 150.0];
    let shares = [0.5, 0.1, 0.1, 0.1, 0.1, 0.1];
    let fill = |disc| {
        let mut q = FairQueue::new(disc, 1, &shares).unwrap();
        let mut id = 0;
        for _ in 0..5 {
            q.enq(0, pkt(id, 0, 99.0, actual[0], 0)).unwrap();
            id += 1;
        }
        for f in 1..6u32 {
            q.enq(0, pkt(id, f, 100.0, actual[f as usize], 0)).unwrap();
            id += 1;
        }
        q
    };
    let w = drain_one_processor(&mut fill(Discipline::Wf2qPlus), 0);
    // Flow 0 alternates with the others, and flow 1 (shortest) is the first of those.
    assert_eq!(w[0], 0);
    assert_eq!(w[1], 1, "{w:?}");
    for k in 0..5 {
        assert_eq!(w[2 * k], 0, "{w:?}");
        assert_ne!(w[2 * k + 1], 0, "{w:?}");
    }
    // EFQ with equal estimates still alternates (the rates differ), in some order of 1-5.
    let e = drain_one_processor(&mut fill(Discipline::Efq), 0);
    for k in 0..5 {
        assert_eq!(e[2 * k], 0, "{e:?}");
    }
    // SFQ: every first packet has start tag 0; flow 0's later packets wait behind all of them.
    let s = drain_one_processor(&mut fill(Discipline::Sfq), 0);
    assert_eq!(&s[..6], &[0, 1, 2, 3, 4, 5], "{s:?}");
}

#[test]
fn efq_with_exact_estimates_serves_in_wf2q_order() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let shares: Vec<f64> = (0..8).map(|i| (i + 1) as f64 / 36.0).collect();
    let mut w = FairQueue::new(Discipline::Wf2qPlus, 1, &shares).unwrap();
    let mut e = FairQueue::new(Discipline::Efq, 1, &shares).unwrap();
    for id in 0..400 {
        let f = rng.random_range(0..8u32);
        let t = rng.random_range(1_000.0..50_000.0f64).round();
        w.enq(0, pkt(id, f, t, t, 0)).unwrap();
        e.enq(0, pkt(id, f, t, t, 0)).unwrap();
    }
    assert_eq!(drain_one_processor(&mut w, 0), drain_one_processor(&mut e, 0));
}

#[test]
fn backlogged_flows_get_processing_in_proportion_to_their_shares() {
    for disc in [Discipline::Sfq, Discipline::Wf2qPlus, Discipline::Efq] {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let shares = [0.6, 0.3, 0.1];
        let mut q = FairQueue::new(disc, 2, &shares).unwrap();
        let mut id = 0;
        // Keep every flow backlogged; estimates are off by up to +-30%.
        for _ in 0..3000 {
            for f in 0..3u32 {
                let est = [20_000.0, 5_000.0, 60_000.0][f as usize];
                let act = est * rng.random_range(0.7..1.3);
                q.enq(0, pkt(id, f, est, act, 0)).unwrap();
                id += 1;
            }
        }
        // Two processors; serve 20 ms of processor time each (every flow stays backlogged).
        let mut used = [0.0f64; 3];
        let mut free = [0u64, 0u64];
        let mut running: Vec<(u64, usize, FqPacket)> = Vec::new();
        loop {
            let (p, &t) = free.iter().enumerate().min_by_key(|x| *x.1).unwrap();
            if t > 20_000_000 {
                break;
            }
            running.retain(|&(end, _, ref pk)| {
                if end <= t {
                    q.done(pk);
                    false
                } else {
                    true
                }
            });
            let d = q.deq(t).expect("backlogged");
            let a = d.packet.actual_ns;
            used[d.packet.flow.index()] += a;
            free[p] = t + a as u64;
            running.push((free[p], p, d.packet));
        }
        let total: f64 = used.iter().sum();
        for f in 0..3 {
            let got = used[f] / total;
            assert!((got - shares[f]).abs() < 0.01, "{disc:?} flow {f}: {got:.4} vs {}", shares[f]);
        }
    }
}

#[test]
fn configuration_errors_are_named() {
    assert!(FairQueue::new(Discipline::Efq, 0, &[0.5]).is_err());
    assert!(FairQueue::new(Discipline::Efq, 1, &[0.7, 0.4]).is_err());
    assert!(FairQueue::new(Discipline::Efq, 1, &[0.0]).is_err());
    let mut q = FairQueue::new(Discipline::Efq, 1, &[0.5]).unwrap();
    assert!(q.enq(0, pkt(0, 3, 1.0, 1.0, 0)).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Every packet is served exactly once, each flow in FIFO order, under every discipline,
    /// with arrivals interleaved with service.
    #[test]
    fn every_packet_once_and_flows_stay_fifo(
        seed in any::<u64>(), flows in 1usize..12, m in 1u32..4, n in 1usize..300, disc in 0usize..3,
    ) {
        let disc = [Discipline::Sfq, Discipline::Wf2qPlus, Discipline::Efq][disc];
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let shares: Vec<f64> = (0..flows).map(|_| 1.0 / flows as f64).collect();
        let mut q = FairQueue::new(disc, m, &shares).unwrap();
        let mut now = 0u64;
        let mut next_id = 0u64;
        let mut served = Vec::new();
        let mut inflight: Vec<FqPacket> = Vec::new();
        while served.len() < n {
            if next_id < n as u64 && rng.random_bool(0.6) {
                let f = rng.random_range(0..flows as u32);
                let e = rng.random_range(100.0..10_000.0f64);
                q.enq(now, pkt(next_id, f, e, e * rng.random_range(0.5..1.5), now)).unwrap();
                next_id += 1;
            } else if let Some(d) = q.deq(now) {
                served.push(d.packet);
                inflight.push(d.packet);
                if inflight.len() >= m as usize {
                    let p = inflight.remove(0);
                    q.done(&p);
                }
            } else if next_id >= n as u64 {
                break;
            }
            now += rng.random_range(0..2_000u64);
        }
        prop_assert_eq!(served.len(), n);
        prop_assert!(q.is_empty());
        let mut ids: Vec<u64> = served.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        prop_assert_eq!(ids, (0..n as u64).collect::<Vec<_>>());
        for f in 0..flows as u32 {
            let seq: Vec<u64> = served.iter().filter(|p| p.flow.0 == f).map(|p| p.id).collect();
            prop_assert!(seq.windows(2).all(|w| w[0] < w[1]), "flow {} out of order: {:?}", f, seq);
        }
    }
}

// ---- LAP / FCFS / T-Opt (section 5) ----

fn lp(id: u64, app: u32, est: f64) -> LapPacket {
    LapPacket { id, app: AppId(app), est }
}

#[test]
fn lap_groups_converge_to_the_rounded_shares_of_queued_work() {
    // Queued work held constant (every served packet is replaced by one of its application).
    // Eq 19: application a gets f_a n rounded. 50/30/20 on 16: 8/4.8/3.2 -> 8/5/3;
    // 60/40/20 on 8: 4/2.67/1.33 -> 4/3/1. 70/20/10 on 8 rounds to 6/2/1 = 9 > 8: no group
    // may exceed its target and the processors are all used.
    for (counts, est, n) in
        [([50u32, 30, 20], [1.0, 1.0, 1.0], 16u32), ([10, 40, 40], [6.0, 1.0, 0.5], 8), ([70, 20, 10], [1.0; 3], 8)]
    {
        let mut s = LapScheduler::new(Policy::Lap, 3, n).unwrap();
        let mut id = 0;
        for (a, &c) in counts.iter().enumerate() {
            for _ in 0..c {
                s.enqueue(lp(id, a as u32, est[a])).unwrap();
                id += 1;
            }
        }
        let mut late_colds = 0;
        for k in 0..5_000u64 {
            let pick = s.dispatch(ProcessorId((k % n as u64) as u32)).unwrap().expect("backlogged");
            if k >= 1_000 && pick.cold {
                late_colds += 1;
            }
            s.enqueue(lp(id, pick.packet.app.0, pick.packet.est)).unwrap();
            id += 1;
        }
        let w: Vec<f64> = (0..3).map(|a| s.work(AppId(a))).collect();
        let total: f64 = w.iter().sum();
        assert!((s.total_work() - total).abs() < 1e-9);
        let target: Vec<u32> = w.iter().map(|x| (x / total * n as f64).round() as u32).collect();
        let groups: Vec<u32> = (0..3).map(|a| s.group(AppId(a))).collect();
        if target.iter().sum::<u32>() == n {
            assert_eq!(groups, target, "work {w:?}");
        } else {
            assert!(groups.iter().zip(&target).all(|(g, t)| g <= t), "{groups:?} over {target:?}");
            assert_eq!(groups.iter().sum::<u32>(), n);
        }
        assert_eq!(late_colds, 0, "a converged partition has no cold caches");
    }
}

#[test]
fn fcfs_serves_in_arrival_order_and_lap_with_one_packet_is_fcfs() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let stream: Vec<LapPacket> =
        (0..2_000).map(|i| lp(i, rng.random_range(0..7), rng.random_range(1.0..100.0))).collect();
    let run = |policy, q: usize| {
        let mut s = LapScheduler::new(policy, 7, 4).unwrap();
        let mut next = 0;
        let mut out = Vec::new();
        for k in 0.. {
            while s.len() < q && next < stream.len() {
                s.enqueue(stream[next]).unwrap();
                next += 1;
            }
            let Some(p) = s.dispatch(ProcessorId(k % 4)).unwrap() else { break };
            out.push((p.packet.id, p.cold));
        }
        out
    };
    let fcfs = run(Policy::Fcfs, 64);
    assert!(fcfs.iter().enumerate().all(|(i, &(id, _))| id == i as u64));
    assert_eq!(run(Policy::Lap, 1), run(Policy::Fcfs, 1));
    // Locality: LAP with 64 visible packets has far fewer cold caches than FCFS, and T-Opt
    // (whole stream visible, never leaving an application with packets) fewer still.
    let colds = |v: &[(u64, bool)]| v.iter().filter(|x| x.1).count();
    let (f, l, t) = (colds(&fcfs), colds(&run(Policy::Lap, 64)), colds(&run(Policy::TOpt, usize::MAX)));
    assert!(t < l && 2 * l < f, "cold caches: t-opt {t}, lap {l}, fcfs {f}");
    // T-Opt: each processor goes cold once at the start and once per application that runs
    // out under it.
    assert!(t <= 4 + 7 * 4, "t-opt cold caches {t}");
}

#[test]
fn lap_rejects_bad_input() {
    assert!(LapScheduler::new(Policy::Lap, 3, 0).is_err());
    assert!(LapScheduler::new(Policy::Lap, 0, 3).is_err());
    let mut s = LapScheduler::new(Policy::Lap, 2, 2).unwrap();
    assert!(s.enqueue(lp(0, 2, 1.0)).is_err());
    assert!(s.enqueue(lp(0, 0, f64::NAN)).is_err());
    s.enqueue(lp(5, 0, 1.0)).unwrap();
    assert!(s.enqueue(lp(5, 1, 1.0)).is_err(), "ids must increase");
    assert!(s.dispatch(ProcessorId(2)).is_err());
    assert!(!s.remove(AppId(0), 4).unwrap(), "never enqueued");
    assert!(s.remove(AppId(9), 5).is_err(), "no such application");
    assert!(s.remove(AppId(0), 5).unwrap());
    assert!(!s.remove(AppId(0), 5).unwrap(), "already removed");
    assert!(s.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Under every policy, with arrivals, dispatches and removals interleaved: every packet is
    /// dispatched or removed exactly once, each application's packets go oldest first, the
    /// queued work is the sum of the waiting estimates, and the groups count the processors.
    #[test]
    fn lap_every_packet_once_fifo_per_app_and_consistent_counts(
        seed in any::<u64>(), apps in 1u32..9, n in 1u32..6, total in 1u64..400, policy in 0usize..3,
    ) {
        let policy = [Policy::Fcfs, Policy::Lap, Policy::TOpt][policy];
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut s = LapScheduler::new(policy, apps as usize, n).unwrap();
        let mut waiting: Vec<LapPacket> = Vec::new();
        let mut done = Vec::new();
        let mut next = 0u64;
        let mut enqueued = 0usize;
        while next < total || !waiting.is_empty() {
            let r = rng.random_range(0..10);
            if next < total && (r < 5 || waiting.is_empty()) {
                let p = lp(next, rng.random_range(0..apps), rng.random_range(0..50) as f64);
                s.enqueue(p).unwrap();
                waiting.push(p);
                enqueued += 1;
                next += 1 + rng.random_range(0..3);
            } else if r < 8 {
                let proc = rng.random_range(0..n);
                let prev = s.cache(ProcessorId(proc));
                let pick = s.dispatch(ProcessorId(proc)).unwrap().expect("a packet waits");
                prop_assert_eq!(pick.cold, prev != Some(pick.packet.app));
                prop_assert_eq!(s.cache(ProcessorId(proc)), Some(pick.packet.app));
                let i = waiting.iter().position(|p| p.id == pick.packet.id).expect("was waiting");
                let p = waiting.remove(i);
                if policy == Policy::Fcfs {
                    prop_assert_eq!(i, 0, "fcfs takes the oldest");
                }
                prop_assert!(waiting.iter().all(|q| q.app != p.app || q.id > p.id), "app fifo");
                done.push(p.id);
            } else {
                let i = rng.random_range(0..waiting.len());
                let p = waiting.remove(i);
                prop_assert!(s.remove(p.app, p.id).unwrap());
                done.push(p.id);
            }
            prop_assert_eq!(s.len(), waiting.len());
            for a in 0..apps {
                let w: f64 = waiting.iter().filter(|p| p.app.0 == a).map(|p| p.est).sum();
                prop_assert!((s.work(AppId(a)) - w).abs() < 1e-6, "app {} work {} vs {}", a, s.work(AppId(a)), w);
            }
            let warm: u32 = (0..apps).map(|a| s.group(AppId(a))).sum();
            prop_assert_eq!(warm, (0..n).filter(|&p| s.cache(ProcessorId(p)).is_some()).count() as u32);
        }
        let served = done.len();
        done.sort_unstable();
        done.dedup();
        prop_assert_eq!(done.len(), served, "a packet left twice");
        prop_assert_eq!(served, enqueued);
        prop_assert!(s.dispatch(ProcessorId(0)).unwrap().is_none());
    }
}

#[test]
fn take_head_charges_the_flow_as_if_served() {
    // Two equal flows, one processor, unit packets. LAP takes flow 0's first two packets
    // behind EFQ's back: flow 0 is then two packets ahead, so EFQ serves flow 1 twice first.
    let mut q = FairQueue::new(Discipline::Efq, 1, &[0.5, 0.5]).unwrap();
    for id in 0..8 {
        q.enq(0, pkt(id, (id % 2) as u32, 1_000.0, 1_000.0, 0)).unwrap();
    }
    for want in [0, 2] {
        let t = q.head(0, 0).expect("flow 0 has a head");
        assert_eq!(t.packet.id, want);
        q.done(&t.packet);
    }
    let order: Vec<u32> = (0..6).map(|k| q.deq(1_000 * (k + 1)).unwrap().packet.flow.0).collect();
    assert_eq!(&order[..2], [1, 1], "{order:?}");
    assert_eq!(order.iter().filter(|&&f| f == 0).count(), 2);
    assert!(q.head(0, 0).is_none() && q.head(0, 9).is_none());
}

// ---- The mechanism contract: arbitrary calls, bad input included ----

/// One call on a fair queue, with arguments that may be out of range.
#[derive(Clone, Debug)]
enum FqCall {
    Enqueue {
        dt: i64,
        flow: u32,
        est: f64,
        actual: f64,
    },
    Dequeue {
        dt: i64,
    },
    TakeHead {
        dt: i64,
        flow: u32,
    },
    /// Report completion of the `k`-th packet in service (or of a made-up one past the end).
    Complete {
        k: usize,
        actual: f64,
    },
}

fn fq_call() -> impl Strategy<Value = FqCall> {
    let time = prop_oneof![Just(f64::NAN), Just(-1.0), Just(f64::INFINITY), Just(2e15), 0.0..1e6f64];
    prop_oneof![
        (-50i64..2_000, 0u32..6, time.clone(), time.clone()).prop_map(|(dt, flow, est, actual)| FqCall::Enqueue {
            dt,
            flow,
            est,
            actual
        }),
        (-50i64..2_000).prop_map(|dt| FqCall::Dequeue { dt }),
        (-50i64..2_000, 0u32..6).prop_map(|(dt, flow)| FqCall::TakeHead { dt, flow }),
        (0usize..8, time).prop_map(|(k, actual)| FqCall::Complete { k, actual }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    /// Arbitrary calls never panic; a refused call changes nothing; what is accepted keeps the
    /// books: waiting = enqueued - served, each flow served in FIFO order, only packets that
    /// were enqueued are served, and a packet in service is completed at most once.
    #[test]
    fn fair_queue_contract(
        disc in 0usize..3, m in 1u32..4, flows in 1usize..5, calls in prop::collection::vec(fq_call(), 1..200),
    ) {
        let disc = [Discipline::Sfq, Discipline::Wf2qPlus, Discipline::Efq][disc];
        let shares = vec![1.0 / flows as f64; flows];
        let mut q = FairQueue::new(disc, m, &shares).unwrap();
        let mut now = 0i64;
        let mut last_ok = 0i64;
        let mut waiting: Vec<FqPacket> = Vec::new();
        let mut in_service: Vec<FqPacket> = Vec::new();
        let mut next_id = 0u64;
        for c in calls {
            let ok_time = |t: i64| t >= last_ok;
            match c {
                FqCall::Enqueue { dt, flow, est, actual } => {
                    now = (now + dt).max(0);
                    let p = FqPacket { id: next_id, flow: FlowId(flow), app: AppId(0), est_ns: est, actual_ns: actual, arrival: Instant::from_nanos(now as u64) };
                    let valid = (flow as usize) < flows
                        && [est, actual].iter().all(|v| v.is_finite() && (0.0..=1e15).contains(v))
                        && ok_time(now);
                    let r = q.enqueue(Instant::from_nanos(now as u64), p);
                    prop_assert_eq!(r.is_ok(), valid, "{:?}", r);
                    if valid {
                        last_ok = now;
                        waiting.push(p);
                        next_id += 1;
                    }
                }
                FqCall::Dequeue { dt } | FqCall::TakeHead { dt, .. } => {
                    now = (now + dt).max(0);
                    let t = Instant::from_nanos(now as u64);
                    let (r, flow) = match c {
                        FqCall::TakeHead { flow, .. } => (q.take_head(t, FlowId(flow)), Some(flow)),
                        _ => (q.dequeue(t), None),
                    };
                    let valid = ok_time(now) && flow.is_none_or(|f| (f as usize) < flows);
                    prop_assert_eq!(r.is_ok(), valid, "{:?}", r);
                    if !valid {
                        continue;
                    }
                    last_ok = now;
                    match r.unwrap() {
                        None => prop_assert!(flow.map_or(waiting.is_empty(), |f| waiting.iter().all(|p| p.flow.0 != f))),
                        Some(d) => {
                            let i = waiting.iter().position(|p| p.id == d.packet.id).expect("served a waiting packet");
                            prop_assert!(waiting[..i].iter().all(|p| p.flow != d.packet.flow), "flow FIFO");
                            if let Some(f) = flow {
                                prop_assert_eq!(d.packet.flow.0, f);
                            }
                            in_service.push(waiting.remove(i));
                        }
                    }
                }
                FqCall::Complete { k, actual } => {
                    let (mut p, known) = match in_service.get(k) {
                        Some(p) => (*p, true),
                        None => (FqPacket { id: u64::MAX, flow: FlowId(k as u32), app: AppId(0), est_ns: 1.0, actual_ns: 1.0, arrival: Instant::ZERO }, false),
                    };
                    p.actual_ns = actual;
                    let r = q.completed(&p);
                    let flow_busy = in_service.iter().any(|x| x.flow == p.flow);
                    let valid = (p.flow.index() < flows) && flow_busy && actual.is_finite() && (0.0..=1e15).contains(&actual);
                    prop_assert_eq!(r.is_ok(), valid, "{:?}", r);
                    if valid {
                        // A made-up packet of a busy flow is accepted in place of one of its own.
                        let i = if known { k } else { in_service.iter().position(|x| x.flow == p.flow).unwrap() };
                        in_service.remove(i);
                    }
                }
            }
            prop_assert_eq!(q.len(), waiting.len());
        }
    }
}

/// One call on a LAP scheduler, with arguments that may be out of range.
#[derive(Clone, Debug)]
enum LapCall {
    Enqueue { skip: u64, app: u32, est: f64 },
    Dispatch { proc: u32 },
    Remove { app: u32, back: u64 },
    Assign { proc: u32, app: u32 },
}

fn lap_call() -> impl Strategy<Value = LapCall> {
    prop_oneof![
        (0u64..3, 0u32..5, prop_oneof![Just(f64::NAN), Just(-1.0), Just(f64::INFINITY), 0.0..100.0f64])
            .prop_map(|(skip, app, est)| LapCall::Enqueue { skip, app, est }),
        (0u32..5).prop_map(|proc| LapCall::Dispatch { proc }),
        (0u32..5, 0u64..6).prop_map(|(app, back)| LapCall::Remove { app, back }),
        (0u32..5, 0u32..5).prop_map(|(proc, app)| LapCall::Assign { proc, app }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    /// Arbitrary calls on every policy never panic; a refused call changes nothing; the queued
    /// count and per-application work match the packets waiting, and the groups count the
    /// processors.
    #[test]
    fn lap_contract(
        policy in 0usize..3, apps in 1u32..4, n in 1u32..4, calls in prop::collection::vec(lap_call(), 1..200),
    ) {
        let policy = [Policy::Fcfs, Policy::Lap, Policy::TOpt][policy];
        let mut s = LapScheduler::new(policy, apps as usize, n).unwrap();
        let mut waiting: Vec<LapPacket> = Vec::new();
        let mut next = 0u64;
        for c in calls {
            match c {
                LapCall::Enqueue { skip, app, est } => {
                    // skip = 0 reuses the last id: refused unless it is the first packet.
                    let id = if skip == 0 { next.saturating_sub(1) } else { next + skip };
                    let valid = app < apps && est.is_finite() && (0.0..=1e15).contains(&est) && (id >= next || next == 0 && id == 0) && (skip > 0 || next == 0);
                    let r = s.enqueue(LapPacket { id, app: AppId(app), est });
                    prop_assert_eq!(r.is_ok(), valid, "{:?}", r);
                    if valid {
                        waiting.push(LapPacket { id, app: AppId(app), est });
                        next = id + 1;
                    }
                }
                LapCall::Dispatch { proc } => {
                    let r = s.dispatch(ProcessorId(proc));
                    prop_assert_eq!(r.is_ok(), proc < n);
                    match r {
                        Ok(Some(pick)) => {
                            let i = waiting.iter().position(|p| p.id == pick.packet.id).expect("dispatched a waiting packet");
                            waiting.remove(i);
                            prop_assert_eq!(s.cache(ProcessorId(proc)), Some(pick.packet.app));
                        }
                        Ok(None) => prop_assert!(waiting.is_empty()),
                        Err(_) => {}
                    }
                }
                LapCall::Remove { app, back } => {
                    let id = next.saturating_sub(back);
                    let r = s.remove(AppId(app), id);
                    prop_assert_eq!(r.is_ok(), app < apps);
                    let pos = waiting.iter().position(|p| p.id == id && p.app.0 == app);
                    prop_assert_eq!(r.unwrap_or(false), pos.is_some());
                    if let Some(i) = pos {
                        waiting.remove(i);
                    }
                }
                LapCall::Assign { proc, app } => {
                    let r = s.assign(ProcessorId(proc), AppId(app));
                    prop_assert_eq!(r.is_ok(), proc < n && app < apps);
                }
            }
            prop_assert_eq!(s.len(), waiting.len());
            for a in 0..apps {
                let w: f64 = waiting.iter().filter(|p| p.app.0 == a).map(|p| p.est).sum();
                prop_assert!((s.work(AppId(a)) - w).abs() < 1e-6 * (1.0 + w));
            }
            let warm: u32 = (0..apps).map(|a| s.group(AppId(a))).sum();
            prop_assert_eq!(warm, (0..n).filter(|&p| s.cache(ProcessorId(p)).is_some()).count() as u32);
        }
    }
}

/// Issue #21 item 1: eq 18 does not bound a packet's delay under EFQ minus its delay under
/// WF2Q+ on a processor that cannot be interrupted. Eq 17 charges a misordering the gap between
/// the two packets' finish tags (a fluid server's view); on a real processor a misordered
/// packet waits for the whole of the other one. Smallest case: one processor, two flows of
/// share 0.5, one packet each at t = 0. Flow 0: estimate 10 us, actual 10 us; flow 1: estimate
/// 9 us, actual 11 us (error V = 2 us). EFQ serves flow 1 first (smaller estimated finish), so
/// flow 0's packet completes at 21 us instead of WF2Q+'s 10 us: 11 us later, where eq 18 gives
/// 2 us. Against the fluid ideal (20 us) EFQ is 1 us late: the paper's bound holds in the sense
/// it is derived (docs/predictive.md "EFQ's misordering").
#[test]
fn eq18_does_not_bound_the_per_packet_delay_difference_on_one_processor() {
    let finish_of_flow0 = |disc| {
        let mut q = FairQueue::new(disc, 1, &[0.5, 0.5]).unwrap();
        q.enq(0, pkt(0, 0, 10_000.0, 10_000.0, 0)).unwrap();
        q.enq(0, pkt(1, 1, 9_000.0, 11_000.0, 0)).unwrap();
        let mut now = 0u64;
        loop {
            let d = q.deq(now).expect("flow 0's packet is still queued");
            now += d.packet.actual_ns as u64;
            q.done(&d.packet);
            if d.packet.flow.0 == 0 {
                return now as f64;
            }
        }
    };
    let (efq, wf2q) = (finish_of_flow0(Discipline::Efq), finish_of_flow0(Discipline::Wf2qPlus));
    assert_eq!((efq, wf2q), (21_000.0, 10_000.0));
    let (_, eq18) = super::fq::misordering_bounds(&[10_000.0, 11_000.0], &[0.0, 2_000.0], 0, 0.5).unwrap();
    assert_eq!(eq18, 2_000.0);
    assert!(efq - wf2q > 5.0 * eq18, "11 us against a 2 us bound");
    // The fluid ideal at share 0.5 finishes flow 0's 10 us packet at 20 us: EFQ is 1 us behind.
    assert!(efq - 20_000.0 <= eq18);
}
