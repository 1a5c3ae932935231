//! `npqos model <short>`: analytical models as sizing tools.
//!
//! `dqs` gives eq 5's AFM memory, the expected search costs (Theorems 1-2 and the exact
//! random-BST values) and the brute-force table it replaces.
//!
//! `qcache` gives, per queuing subsystem, Table 5's latencies from Table 1 (or from a qcache scenario's `[timing]`), the memory-bound and
//! thread-bound rates at a hit rate, the threads needed to reach the memory bound, and the
//! one-queue (worst-case) rate.
//!
//! `predictive` gives, per reserved flow of an fq or efq-lap scenario (default: the paper's 32
//! flows), eq 1's processing-time estimate, its largest error, the rate at the scenario's load,
//! eq 4's reservation, and the eq 13 / eq 18 worst-case misordering against WF2Q+.
//!
//! `everest` gives, per service of an everest scenario, N_max (the fewest dedicated processors
//! that meet D on the scenario's traffic) and eq 7's guarantee, as a share and in processors.
//!
//! `kim` gives the workload side of the paper (eqs 15-16), the cost of the periodic-fill
//! baseline (section 1 / 2.2) and the stochastic model of section 3.2 (eqs 8-13; constant
//! inter-arrival times as in the paper, exponential ones as our extension): heap size per core,
//! reschedules per second and, from the heap's access pattern, off-chip accesses per second.

use crate::error::bad;
use crate::output::num;
use anyhow::Result;
use npqos_core::model::kim::{offchip_per_reschedule, solve_queue, Gaps, HeapSize, QueueModel};
use npqos_sim::units::{parse_count, parse_duration, parse_rate, parse_size};
use npqos_sim::workload::{mean_gap_for_overload, SizeDist};
use serde_json::json;
use std::io::Write;

/// `writeln!` to the model's output, failing the command if the write fails.
macro_rules! outln {
    ($w:expr) => { writeln!($w)? };
    ($w:expr, $($t:tt)*) => { writeln!($w, $($t)*)? };
}

#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// Number of shaped queues (1000000, 1_000_000 or 1e6)
    #[arg(long, default_value = "1e6", value_parser = count)]
    queues: u64,
    /// Link (interface) rate shared equally by the queues
    #[arg(long, default_value = "100Gbps")]
    link: String,
    /// Overload factor: input rate / shaped rate (kim eq 15)
    #[arg(long, default_value_t = 1.0)]
    overload: f64,
    /// Packet sizes: imix (kim Table I) or uniform (40-1500 B)
    #[arg(long, default_value = "imix")]
    sizes: String,
    /// Fill period of the periodic-fill baseline
    #[arg(long, default_value = "10us")]
    fill_period: String,
    /// Processor cores (one reschedule heap each)
    #[arg(long, default_value = "100", value_parser = count)]
    cores: u64,
    /// Reschedule threshold alpha
    #[arg(long, default_value = "3000B")]
    alpha: String,
    /// Bucket cap (CBE) [default: alpha]
    #[arg(long)]
    cap: Option<String>,
    /// Inter-arrival times: constant (the paper's stochastic model) or exponential (our extension)
    #[arg(long, default_value = "constant")]
    arrivals: String,
    /// dqs: AFM slots M (one or more, comma-separated)
    #[arg(long, default_value = "64,256,1024", value_delimiter = ',', value_parser = count)]
    slots: Vec<u64>,
    /// dqs: active flows l (flows with packets buffered)
    #[arg(long, default_value = "256", value_parser = count)]
    active_flows: u64,
    /// dqs: physical queues N [default: active flows]
    #[arg(long, value_parser = count)]
    physical_queues: Option<u64>,
    /// dqs: flows in progress, for the brute-force per-flow table
    #[arg(long, default_value = "1e6", value_parser = count)]
    in_progress: u64,
    /// dqs: bits of a flow id B (104 for the IPv4 5-tuple)
    #[arg(long, default_value = "104", value_parser = count)]
    flow_bits: u64,
    /// qcache: threads issuing queue operations
    #[arg(long, default_value = "32", value_parser = count)]
    threads: u64,
    /// qcache: descriptor hit rate of the cached subsystems (0..1)
    #[arg(long, default_value_t = 0.0)]
    hit_rate: f64,
    /// qcache: memory clock in MHz (one reference per cycle)
    #[arg(long, default_value_t = 200.0)]
    memory_mhz: f64,
    /// everest, predictive, qcache: the scenario whose services (everest), flows (fq, efq-lap)
    /// or timing, threads and memory clock (qcache; then --threads and --memory-mhz are not
    /// used) to size [predictive default: the paper's 32 flows on one processor at load 1;
    /// qcache default: Table 1 and the flags]
    #[arg(long)]
    scenario: Option<std::path::PathBuf>,
    /// everest: seed of the scenario's traffic [default: the scenario's]
    #[arg(long)]
    seed: Option<u64>,
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

/// The error of `npqos model TOOL --scenario` given a scenario of a model it does not read.
fn wrong_model(path: &std::path::Path, model: &str, tool: &str, reads: &str) -> anyhow::Error {
    bad(format!("{}: model = {model:?}; npqos model {tool} {reads} scenario", path.display()))
}

fn count(s: &str) -> Result<u64, String> {
    parse_count(s).map_err(|e| e.to_string())
}

/// `npqos model SHORT ...`, printing to stdout.
pub fn model(short: &str, a: &ModelArgs) -> Result<()> {
    model_to(short, a, &mut std::io::stdout().lock())
}

/// A sizing model's results as the JSON `--json` prints, from the arguments `npqos model`
/// takes (`["kim", "--queues", "1e6"]`): what `npqos.model.*` in Python returns. Argument
/// errors are bad input carrying clap's message.
pub fn model_json(argv: &[String]) -> Result<serde_json::Value> {
    #[derive(clap::Parser)]
    #[command(name = "npqos model")]
    struct Cmd {
        short: String,
        #[command(flatten)]
        args: ModelArgs,
    }
    let mut c =
        <Cmd as clap::Parser>::try_parse_from(std::iter::once("npqos model".to_string()).chain(argv.iter().cloned()))
            .map_err(|e| bad(e.to_string().trim().to_string()))?;
    c.args.json = true;
    let mut buf = Vec::new();
    model_to(&c.short, &c.args, &mut buf)?;
    Ok(serde_json::from_slice(&buf)?)
}

/// Runs model `short`, writing its table (or JSON) to `w`.
pub fn model_to(short: &str, a: &ModelArgs, w: &mut dyn Write) -> Result<()> {
    match short {
        "kim" => kim(a, w),
        "dqs" => dqs(a, w),
        "qcache" => qcache(a, w),
        "predictive" => predictive(a, w),
        "everest" => everest(a, w),
        other => Err(bad(format!("unknown model {other:?}: expected one of kim, dqs, qcache, predictive, everest"))),
    }
}

fn kim(a: &ModelArgs, w: &mut dyn Write) -> Result<()> {
    let link = parse_rate(&a.link).map_err(|e| bad(format!("--link {:?}: {e}", a.link)))?;
    let period = parse_duration(&a.fill_period).map_err(|e| bad(format!("--fill-period {:?}: {e}", a.fill_period)))?;
    if a.queues == 0 {
        return Err(bad("--queues 0: expected at least one queue"));
    }
    if link.is_zero() || period.is_zero() {
        return Err(bad("--link and --fill-period must be positive"));
    }
    if !(a.overload > 0.0 && a.overload.is_finite()) {
        return Err(bad(format!("--overload {}: expected a positive number", a.overload)));
    }
    let sizes = match a.sizes.as_str() {
        "imix" => SizeDist::kim_imix(),
        "uniform" => SizeDist::Uniform { min: 40, max: 1500 },
        s => return Err(bad(format!("--sizes {s:?}: expected imix or uniform"))),
    };
    let share = link.share(a.queues);
    if share.is_zero() {
        return Err(bad(format!("{} queues on {link} leave less than 1 bit/s per queue", a.queues)));
    }
    let mean = sizes.mean();
    let gap = mean_gap_for_overload(mean, share, a.overload)
        .ok_or_else(|| bad("overload gives no finite inter-packet delay"))?;
    let pps_queue = 1.0 / gap.as_secs_f64();
    // Integer nanoseconds keep 1e6 queues / 10 us exactly 1e11.
    let fills_per_s = a.queues as f64 * 1e9 / period.as_nanos() as f64;
    let tokens_per_fill = share.bits_per_sec() as f64 / 8.0 * period.as_secs_f64();
    let alpha = parse_size(&a.alpha).map_err(|e| bad(format!("--alpha {:?}: {e}", a.alpha)))?;
    let cap = match &a.cap {
        Some(c) => parse_size(c).map_err(|e| bad(format!("--cap {c:?}: {e}")))?,
        None => alpha,
    };
    if a.cores == 0 || a.cores > a.queues {
        return Err(bad(format!("--cores {}: expected 1 to --queues ({})", a.cores, a.queues)));
    }
    if alpha > cap {
        return Err(bad(format!("--alpha {alpha} B exceeds --cap {cap} B")));
    }
    let gaps = match a.arrivals.as_str() {
        "constant" => Gaps::Constant,
        "exponential" => Gaps::Exponential,
        other => return Err(bad(format!("--arrivals {other:?}: expected constant or exponential"))),
    };
    let stochastic = {
        {
            let q = solve_queue(&QueueModel {
                sizes: sizes.to_runs(),
                t_int_s: gap.as_secs_f64(),
                gaps,
                bw_bytes_per_s: share.bits_per_sec() as f64 / 8.0,
                alpha_bytes: alpha as f64,
                cap_bytes: cap as f64,
                max_steps: 1_000_000,
            });
            let m = a.queues as f64 / a.cores as f64;
            let h = HeapSize::for_queues(&q, m);
            let hr = HeapSize::for_queues_renewal(&q, m);
            Some((q, h, hr))
        }
    };
    let mut rows = vec![
        ("per_queue_rate", share.bits_per_sec() as f64, "bit/s", "link / queues"),
        ("mean_packet_size", mean, "B", if a.sizes == "imix" { "kim Table I" } else { "uniform 40-1500 B" }),
        ("mean_interpacket_delay", gap.as_nanos() as f64, "ns", "kim eq 16 solved for the delay"),
        ("packets_per_s_per_queue", pps_queue, "1/s", "1 / delay"),
        ("packets_per_s_total", pps_queue * a.queues as f64, "1/s", "queues / delay"),
        ("periodic_fills_per_s", fills_per_s, "1/s", "kim section 1: queues / fill period"),
        ("periodic_fill_accesses_per_s", 2.0 * fills_per_s, "1/s", "one read-modify-write per fill"),
        ("tokens_per_fill", tokens_per_fill, "B", "kim section 1: rate x period"),
    ];
    let mut offchip_rows = Vec::new();
    if let Some((q, h, hr)) = &stochastic {
        let resch_renewal = q.renewal_reschedules_per_s * a.queues as f64;
        for (name, l) in [
            ("offchip_accesses_per_s_2KB", 2048.0),
            ("offchip_accesses_per_s_4KB", 4096.0),
            ("offchip_accesses_per_s_8KB", 8192.0),
        ] {
            offchip_rows.push((name, resch_renewal * offchip_per_reschedule(hr, l / 8.0)));
        }
        rows.extend([
            ("arrivals_per_schedulable_period", q.mean_n, "1", "E(N), section 3.2.1"),
            ("probability_in_heap", q.mean_y, "1", "E(Y), eq 11"),
            ("heap_mean_per_core", h.mean, "nodes", "eq 13"),
            ("heap_p999_per_core", h.quantile(0.999), "nodes", "eq 13, normal quantile"),
            ("heap_p999_bytes_per_core", h.quantile(0.999) * 8.0, "B", "8-byte nodes"),
            ("reschedules_per_s", q.reschedules_per_s * a.queues as f64, "1/s", "E(M) x queues, eq 8"),
            ("renewal_heap_mean_per_core", hr.mean, "nodes", "ours: renewal-reward variant of eq 11"),
            ("renewal_heap_p999_per_core", hr.quantile(0.999), "nodes", "ours: renewal variant, normal quantile"),
            ("renewal_reschedules_per_s", resch_renewal, "1/s", "ours: 1 / (E[N] T + E[U]) x queues"),
        ]);
        for (name, v) in &offchip_rows {
            rows.push((name, *v, "1/s", "ours: renewal variant x heap access pattern (offchip_per_op)"));
        }
    }
    if a.json {
        let m: serde_json::Map<String, serde_json::Value> =
            rows.iter().map(|(k, v, u, s)| (k.to_string(), json!({"value": v, "unit": u, "source": s}))).collect();
        outln!(
            w,
            "{}",
            serde_json::to_string_pretty(
                &json!({"model": "kim", "queues": a.queues, "link": link.to_string(), "overload": a.overload, "sizes": a.sizes,
                    "arrivals": a.arrivals, "cores": a.cores, "alpha_bytes": alpha, "cap_bytes": cap, "fill_period": period.to_string(),
                    "truncated": stochastic.as_ref().map(|s| s.0.truncated), "results": m})
            )?
        );
    } else {
        outln!(w,
            "kim sizing: {} queues on {link}, {} cores, overload {}, {} sizes, {} arrivals, alpha {alpha} B, cap {cap} B, fill period {period}",
            a.queues, a.cores, a.overload, a.sizes, a.arrivals
        );
        for (k, v, u, s) in rows {
            outln!(w, "  {k:<30} {:>16} {u:<6} ({s})", num(v));
        }
        if let Some((q, _, _)) = &stochastic {
            if q.truncated > 1e-6 {
                outln!(w,
                    "  warning: the model's recursion stopped with {:.2e} of P(N) left (overload near or below 1): heap figures are lower bounds",
                    q.truncated
                );
            }
        }
        if gaps == Gaps::Exponential {
            outln!(w, "  (exponential gaps: our extension of the paper's model; eq 9 takes the schedulable time as N x T_int)");
        }
    }
    Ok(())
}

/// dqs sizing: eq 5 memory and the expected AFM search costs (Theorems 1-2 as printed, and the
/// exact random-BST expectations) for `l` active flows over each slot count.
fn dqs(a: &ModelArgs, w: &mut dyn Write) -> Result<()> {
    use npqos_core::flowmap::theory as t;
    if a.slots.is_empty() || a.slots.contains(&0) {
        return Err(bad("npqos model dqs: --slots must be positive"));
    }
    let l = a.active_flows;
    let n = a.physical_queues.unwrap_or(l).max(1);
    let brute = t::brute_force_bits(a.in_progress);
    let mut points = Vec::new();
    for &m in &a.slots {
        let w = t::afm_memory_bits(m, l, n, a.flow_bits);
        let rows: Vec<(&str, f64, &str, &str)> = vec![
            ("afm_memory", w as f64, "bits", "dqs eq 5"),
            ("search_theorem1_as_printed", t::theorem1(l, m), "nodes", "dqs Theorem 1 (eq 3): slot average"),
            (
                "search_exact_per_flow",
                t::successful_search_flow_weighted(l, m),
                "nodes",
                "ours: Lemma 1 over the searched flow's slot",
            ),
            ("new_flow_theorem2_bound", t::theorem2(l, m), "nodes", "dqs Theorem 2 (eq 4)"),
            ("new_flow_exact", t::unsuccessful_search_exact(l, m), "nodes", "ours: 2(H_{k+1} - 1) over eq 2"),
            ("p_slot_more_than_1", 1.0 - t::p_k(l, m, 0) - t::p_k(l, m, 1), "probability", "eq 2"),
        ];
        points.push((m, rows));
    }
    if a.json {
        let pts: Vec<serde_json::Value> = points
            .iter()
            .map(|(m, rows)| {
                let r: serde_json::Map<String, serde_json::Value> = rows
                    .iter()
                    .map(|(k, v, u, s)| (k.to_string(), json!({"value": v, "unit": u, "source": s})))
                    .collect();
                json!({"slots": m, "results": r})
            })
            .collect();
        outln!(
            w,
            "{}",
            serde_json::to_string_pretty(&json!({"model": "dqs", "active_flows": l, "physical_queues": n,
                "flow_bits": a.flow_bits, "in_progress": a.in_progress, "brute_force_pointer_bits": brute, "points": pts}))?
        );
    } else {
        outln!(w, "dqs sizing: {l} active flows, {n} physical queues, {}-bit flow ids", a.flow_bits);
        for (m, rows) in &points {
            outln!(w, " M = {m} slots");
            for (k, v, u, s) in rows {
                outln!(w, "  {k:<30} {:>16} {u:<11} ({s})", num(*v));
            }
        }
        outln!(
            w,
            " brute force for {} flows in progress: {} bits of head/tail pointers (dqs section 1: 2 F log2 F)",
            a.in_progress,
            num(brute as f64)
        );
    }
    Ok(())
}

/// qcache sizing: per subsystem, Table 5 latencies from Table 1, the memory-bound peak at a hit
/// rate, the thread-bound rate `n / T̄`, the threads needed to reach the peak, and the
/// single-queue (worst-case) rate `1 / S̄` (docs/qcache.md).
fn qcache(a: &ModelArgs, w: &mut dyn Write) -> Result<()> {
    use npqos_core::queues::model::serial_ns;
    use npqos_core::queues::timing::{Op, Subsystem, TABLE1};
    if a.threads == 0 {
        return Err(bad("npqos model qcache: --threads must be at least 1"));
    }
    if !(0.0..=1.0).contains(&a.hit_rate) {
        return Err(bad(format!("--hit-rate {}: expected a fraction in 0..1", a.hit_rate)));
    }
    if !(a.memory_mhz > 0.0 && a.memory_mhz.is_finite()) {
        return Err(bad(format!("--memory-mhz {}: expected a positive number", a.memory_mhz)));
    }
    // The timing, threads and memory clock: a qcache scenario's, or Table 1 and the flags.
    let (t, threads, memory_mhz, source) = match &a.scenario {
        None => (TABLE1, a.threads, a.memory_mhz, "Table 1 timing".to_string()),
        Some(path) => {
            let (_, sc) = super::run::load(path)?;
            let Some(q) = sc.spec_as::<npqos_sim::models::qcache::scenario::QcacheSpec>() else {
                return Err(wrong_model(
                    path,
                    sc.model(),
                    "qcache",
                    "reads the [queuing] and [timing] of a \"qcache\"",
                ));
            };
            (
                q.sim.timing,
                q.sim.threads as u64,
                q.sim.memory_mhz,
                format!("timing, threads and memory clock of {}", path.display()),
            )
        }
    };
    let n = threads as f64;
    let mut rows = Vec::new();
    for sub in Subsystem::ALL {
        let h = if sub.cached() { a.hit_rate } else { 0.0 };
        let mean = |f: &dyn Fn(Op, bool) -> f64| {
            [Op::Enqueue, Op::Dequeue].iter().map(|&op| h * f(op, true) + (1.0 - h) * f(op, false)).sum::<f64>() / 2.0
        };
        let t_op = mean(&|op, hit| t.latency_ns(sub, op, hit));
        // One queue always hits once its descriptor is cached.
        let s_one =
            [Op::Enqueue, Op::Dequeue].iter().map(|&op| serial_ns(&t, sub, op, sub.cached())).sum::<f64>() / 2.0;
        let refs = if sub.cached() { 1.0 + 2.0 * (1.0 - h) } else { 3.0 };
        let memory = memory_mhz / refs;
        let threads_bound = n / t_op * 1e3;
        rows.push(json!({
            "subsystem": sub.label(),
            "hit_rate": h,
            "latency_ns": {
                "enqueue_hit": t.latency_ns(sub, Op::Enqueue, true), "enqueue_miss": t.latency_ns(sub, Op::Enqueue, false),
                "dequeue_hit": t.latency_ns(sub, Op::Dequeue, true), "dequeue_miss": t.latency_ns(sub, Op::Dequeue, false),
            },
            "mean_op_ns": t_op,
            "offchip_refs_per_op": refs,
            "memory_bound_mops": memory,
            "thread_bound_mops": threads_bound,
            "distinct_queues_mops": memory.min(threads_bound),
            "threads_to_memory_bound": (memory * t_op / 1e3).ceil(),
            "one_queue_mops": 1e3 / s_one,
        }));
    }
    if a.json {
        outln!(
            w,
            "{}",
            serde_json::to_string_pretty(
                &json!({"model": "qcache", "threads": threads, "memory_mhz": memory_mhz, "timing": source, "subsystems": rows})
            )?
        );
        return Ok(());
    }
    outln!(
        w,
        "qcache sizing: {} threads, memory {} MHz (one reference per cycle), hit rate {} ({source}; docs/qcache.md)",
        threads,
        memory_mhz,
        a.hit_rate
    );
    outln!(
        w,
        " {:<4} {:>22} {:>22} {:>10} {:>9} {:>12} {:>12} {:>14} {:>10} {:>11}",
        "sub",
        "enqueue hit/miss (ns)",
        "dequeue hit/miss (ns)",
        "mean (ns)",
        "refs/op",
        "memory M/s",
        "threads M/s",
        "distinct q M/s",
        "threads",
        "1 queue M/s"
    );
    for r in &rows {
        let l = &r["latency_ns"];
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        outln!(
            w,
            " {:<4} {:>22} {:>22} {:>10} {:>9} {:>12} {:>12} {:>14} {:>10} {:>11}",
            r["subsystem"].as_str().unwrap_or("?"),
            format!("{} / {}", l["enqueue_hit"], l["enqueue_miss"]),
            format!("{} / {}", l["dequeue_hit"], l["dequeue_miss"]),
            num(f("mean_op_ns")),
            num(f("offchip_refs_per_op")),
            num(f("memory_bound_mops")),
            num(f("thread_bound_mops")),
            num(f("distinct_queues_mops")),
            num(f("threads_to_memory_bound")),
            num(f("one_queue_mops")),
        );
    }
    outln!(w, " distinct q = min(memory, threads): every operation on its own queue; threads = those needed to reach the memory bound;");
    outln!(w, " 1 queue = every operation on one queue, always a hit (1 / time the queue is held). Contention in between: npqos reproduce qcache-model.");
    Ok(())
}

/// The fq part of `--scenario` (fq or efq-lap), or the paper's 32 flows on one processor.
fn fq_spec(a: &ModelArgs) -> Result<npqos_sim::models::predictive::scenario::FqSpec> {
    use npqos_sim::models::predictive::scenario::SwitchSpec;
    use npqos_sim::models::predictive::scenario::{FlowEntry, FqSpec};
    let Some(path) = &a.scenario else {
        let names = npqos_sim::models::predictive::scenario::app_names();
        let flows = npqos_sim::models::predictive::paper_flows()
            .into_iter()
            .map(|spec| FlowEntry { name: format!("{}-{}", names[spec.app], spec.len), spec })
            .collect();
        return Ok(FqSpec { processors: 1, discipline: npqos_core::sched::fq::Discipline::Efq, load: 1.0, flows });
    };
    let (_, sc) = super::run::load(path)?;
    if let Some(f) = sc.spec_as::<FqSpec>() {
        Ok(f.clone())
    } else if let Some(e) = sc.spec_as::<SwitchSpec>() {
        Ok(FqSpec {
            processors: e.processors,
            discipline: npqos_core::sched::fq::Discipline::Efq,
            load: e.calm_load,
            flows: e.flows.clone(),
        })
    } else {
        Err(wrong_model(path, sc.model(), "predictive", "sizes the flows of an \"fq\" or \"efq-lap\""))
    }
}

fn predictive(a: &ModelArgs, w: &mut dyn Write) -> Result<()> {
    let f = fq_spec(a)?;
    let rows = npqos_sim::models::predictive::scenario::fq_sizing(&f);
    let reserved: f64 = rows.iter().map(|r| r.share).sum();
    let processing: f64 = rows.iter().map(|r| r.processing).sum();
    if a.json {
        outln!(
            w,
            "{}",
            serde_json::to_string_pretty(&json!({
                "model": "predictive", "processors": f.processors, "load": f.load,
                "reserved": reserved, "processing": processing, "flows": rows,
            }))?
        );
        return Ok(());
    }
    outln!(w,
        "predictive sizing: {} flows on {} processor(s) at 2 GHz, each offered {} x its reservation (Table 1 / 10; docs/predictive.md)",
        rows.len(),
        f.processors,
        f.load
    );
    outln!(
        w,
        " {:<18} {:>6} {:>7} {:>10} {:>9} {:>11} {:>12} {:>11} {:>14} {:>14}",
        "flow",
        "size",
        "share",
        "t_e (us)",
        "V (us)",
        "packets/s",
        "in (Mbps)",
        "P_j (eq 4)",
        "SFQ eq13 (us)",
        "EFQ eq18 (us)"
    );
    for r in &rows {
        outln!(
            w,
            " {:<18} {:>6} {:>7} {:>10} {:>9} {:>11} {:>12} {:>11} {:>14} {:>14}",
            r.name,
            r.size,
            num(r.share),
            num(r.t_e_ns / 1e3),
            num(r.v_max_ns / 1e3),
            num(r.packets_per_second),
            num(r.bandwidth_bps / 1e6),
            num(r.processing),
            num(r.sfq_bound_ns / 1e3),
            num(r.efq_bound_ns / 1e3),
        );
    }
    let verdict =
        if processing <= f.processors as f64 * (1.0 + 1e-9) { "admitted" } else { "REFUSED: more than the processors" };
    outln!(
        w,
        " reserved shares sum to {} of {} processor(s); eq 4 processing at this load: {} processors ({verdict}).",
        num(reserved),
        f.processors,
        num(processing)
    );
    outln!(w, " V = the largest estimation error (Table 1's variation); bounds: the worst misordering against the WF2Q+ oracle for one flow.");
    Ok(())
}

fn everest(a: &ModelArgs, w: &mut dyn Write) -> Result<()> {
    let Some(path) = &a.scenario else {
        return Err(bad(
            "npqos model everest: --scenario FILE is required (an everest scenario: its services and traffic)",
        ));
    };
    let (_, sc) = super::run::load(path)?;
    let Some(e) = sc.spec_as::<npqos_sim::models::everest::scenario::EverestSpec>() else {
        return Err(wrong_model(path, sc.model(), "everest", "sizes the services of an \"everest\""));
    };
    let seed = a.seed.unwrap_or(sc.seed);
    let rows = npqos_sim::models::everest::scenario::sizing(&sc, seed).map_err(|e| bad(e.to_string()))?;
    let total: u32 = rows.iter().map(|r| r.n_max).sum();
    if a.json {
        outln!(
            w,
            "{}",
            serde_json::to_string_pretty(&json!({
                "model": "everest", "processors": e.processors, "duration_ns": sc.duration.as_nanos(),
                "seed": seed, "n_max_sum": total, "services": rows,
            }))?
        );
        return Ok(());
    }
    outln!(
        w,
        "everest sizing: {} services, N_p = {}, {} of the scenario's traffic (seed {seed}; eq 7, docs/everest.md)",
        rows.len(),
        e.processors,
        sc.duration
    );
    outln!(
        w,
        " {:<16} {:>10} {:>10} {:>10} {:>10} {:>7} {:>9} {:>12} {:>7}",
        "service",
        "t_pkt (us)",
        "D (us)",
        "packets",
        "mean load",
        "N_max",
        "G (eq 7)",
        "G x N_p",
        "whole"
    );
    for r in &rows {
        outln!(
            w,
            " {:<16} {:>10} {:>10} {:>10} {:>10} {:>7} {:>9} {:>12} {:>7}",
            r.name,
            num(r.t_pkt_ns as f64 / 1e3),
            num(r.tolerance_ns as f64 / 1e3),
            r.packets,
            num(r.mean_load),
            format!("{}{}", r.n_max, if r.n_max_capped { "+" } else { "" }),
            num(r.guarantee),
            num(r.guaranteed_processors),
            r.whole_processors,
        );
    }
    outln!(w,
        " N_max: fewest dedicated processors (FIFO, no context switch) finishing every packet within D; sum {total} against N_p = {} ({}).",
        e.processors,
        if total <= e.processors { "every service can be guaranteed its N_max at once" } else { "the guarantees are shares of an overcommitted N_p" }
    );
    Ok(())
}
