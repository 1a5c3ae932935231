//! Scheduler decision cost per packet (predictive): with every flow (or application) backlogged,
//! each iteration serves one packet and files a new one, so the backlog stays constant.
//!
//! * Fair queuing (`FairQueue`): SFQ, EFQ, WF2Q+ with 32, 1e3 and 1e5 flows, each holding two
//!   packets; one iteration = dequeue + completed + enqueue. Baseline measured in the same run:
//!   a naive SFQ that scans every flow's start tag for the smallest (O(flows) per packet).
//! * LAP (`LapScheduler`) with 30 and 1e3 applications, 16 processors, 512 packets visible;
//!   one iteration = dispatch to the next processor + enqueue. Baseline: FCFS on the same
//!   structure (no choice to make).
//!
//! Results: docs/PERFORMANCE.md. Run: `cargo bench -p npqos-benches --bench sched`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use npqos_core::sched::fq::{Discipline, FairQueue, FqPacket};
use npqos_core::sched::lap::{LapPacket, LapScheduler, Policy};
use npqos_core::{AppId, FlowId, Instant, ProcessorId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const M: u32 = 16;

/// Pre-drawn processing times (ns), so RNG cost is not measured.
fn times() -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    (0..4096).map(|_| rng.random_range(1_000.0..100_000.0)).collect()
}

fn fair_queue(c: &mut Criterion) {
    let mut g = c.benchmark_group("fq_decision");
    g.throughput(Throughput::Elements(1));
    let t = times();
    for &n in &[32usize, 1_000, 100_000] {
        let shares = vec![1.0 / n as f64; n];
        for disc in [Discipline::Sfq, Discipline::Efq, Discipline::Wf2qPlus] {
            let mut q = FairQueue::new(disc, M, &shares).expect("valid");
            let mut id = 0u64;
            let pk = |id: u64, flow: FlowId, k: usize| FqPacket {
                id,
                flow,
                app: AppId(0),
                est_ns: t[k & 4095],
                actual_ns: t[k & 4095] * 1.05,
                arrival: Instant::ZERO,
            };
            for _ in 0..2 {
                for f in 0..n as u32 {
                    q.enqueue(Instant::ZERO, pk(id, FlowId(f), id as usize)).expect("flow");
                    id += 1;
                }
            }
            let mut now = 0u64;
            g.bench_with_input(BenchmarkId::new(disc.label(), n), &n, |b, _| {
                b.iter(|| {
                    let d = q.dequeue(Instant::from_nanos(now)).expect("time goes on").expect("backlogged");
                    q.completed(&d.packet).expect("in service");
                    now += (d.packet.actual_ns / M as f64) as u64;
                    q.enqueue(Instant::from_nanos(now), pk(id, d.packet.flow, id as usize)).expect("flow");
                    id += 1;
                    black_box(d.key)
                })
            });
        }
        // Baseline: SFQ by linear scan over the flows' head start tags.
        let mut start = vec![0.0f64; n];
        let inv_share = n as f64 / M as f64;
        let mut k = 0usize;
        g.bench_with_input(BenchmarkId::new("sfq_linear_scan", n), &n, |b, _| {
            b.iter(|| {
                let (f, s) =
                    start.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)).map(|(i, &s)| (i, s)).expect("flows");
                k = (k + 1) & 4095;
                start[f] = s + t[k] * inv_share;
                black_box(f)
            })
        });
    }
    g.finish();
}

fn lap(c: &mut Criterion) {
    let mut g = c.benchmark_group("lap_decision");
    g.throughput(Throughput::Elements(1));
    let t = times();
    for &apps in &[30u32, 1_000] {
        for policy in [Policy::Lap, Policy::Fcfs] {
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            let stream: Vec<AppId> = (0..65_536).map(|_| AppId(rng.random_range(0..apps))).collect();
            let mut s = LapScheduler::new(policy, apps as usize, M).expect("valid");
            let mut id = 0u64;
            for _ in 0..512 {
                s.enqueue(LapPacket { id, app: stream[id as usize & 65_535], est: t[id as usize & 4095] })
                    .expect("valid");
                id += 1;
            }
            let mut proc = 0u32;
            g.bench_with_input(BenchmarkId::new(policy.label(), apps), &apps, |b, _| {
                b.iter(|| {
                    let p = s.dispatch(ProcessorId(proc)).expect("processor").expect("backlogged");
                    proc = (proc + 1) % M;
                    s.enqueue(LapPacket { id, app: stream[id as usize & 65_535], est: t[id as usize & 4095] })
                        .expect("valid");
                    id += 1;
                    black_box(p.cold)
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3)).warm_up_time(std::time::Duration::from_secs(1));
    targets = fair_queue, lap
}
criterion_main!(benches);
