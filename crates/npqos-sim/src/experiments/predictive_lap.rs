//! Reproductions of the predictive paper's section 5: LAP against FCFS and T-Opt on processors
//! whose instruction cache holds one application (Figures 9-12).

use super::declare::{At, Grid, PaperValue};
use super::RunOptions;
use crate::models::predictive::efq_lap::{self, Bursts, Mode, SwitchParams};
use crate::models::predictive::lap::{mean_te_ns, params, run, stream, LapParams, LapResult, Mix, StreamPacket, IMIX};
use crate::models::predictive::paper_flows;
use crate::results::{Comparison, Output, Place, PlotKind, PlotSpec, RunResult, Table};
use npqos_core::sched::lap::Policy;
use serde_json::json;
use std::collections::BTreeMap;

const PROCESSORS: u32 = 16;

fn assumptions(apps: usize, packets: usize) -> Vec<String> {
    let pen: Vec<String> = (0..3)
        .map(|a| {
            format!("{} {:.1} us (t_e mean {:.1} us)", params(a).name, params(a).cold_penalty_us, mean_te_ns(a) * 1e-3)
        })
        .collect();
    vec![
        format!("{packets} packets, {apps} applications: the payload applications of Table 1 (encryption, compression, FEC) replicated under new ids (section 5.2.2), {PROCESSORS} processors, one application in a processor's instruction cache."),
        format!("Processing time: t_e(a, l) from Table 1 / 10 (the 2 GHz processor of section 4.2.1) x (1 + U(-v, v)), v = 5 / 20 / 5 %, plus pi_a / 10 when the cache is cold: {}.", pen.join(", ")),
        format!("Packet sizes: simple IMIX {:?} (size B, weight) for every application; the paper's measured traces are not available.", IMIX),
        "Backlogged: queue memory holds q packets; the scheduler sees them and the next packet of the stream enters as one is dispatched. T-Opt sees the whole stream and never leaves an application with packets. Throughput = bytes / time to finish the stream.".into(),
        "LAP: eq 19 with each f_a n rounded to the nearest integer; a free processor keeps its application unless the application has no packet visible or its group is over target while another is under; estimates are t_e (no cold penalty).".into(),
        "Delay variation: standard deviation over packets of (position in dispatch order - position in arrival order), in packets.".into(),
    ]
}

fn run_result(label: String, policy: Policy, q: Option<usize>, r: &LapResult) -> RunResult {
    let mut rr = RunResult {
        label,
        params: BTreeMap::from([("scheduler".into(), json!(policy.label())), ("q".into(), json!(q))]),
        complete: true,
        events: r.packets,
        sim_time_ns: r.makespan_ns as u64,
        ..Default::default()
    };
    rr.scalar("packets", r.packets as f64, "packets");
    rr.scalar("throughput_gbps", r.throughput_gbps(), "Gbit/s");
    rr.scalar("cold_fraction", r.cold_fraction(), "fraction");
    rr.scalar("order_std", r.order_std, "packets");
    rr.scalar("order_max", r.order_max as f64, "packets");
    rr.scalar("penalty_share", r.penalty_ns / (r.makespan_ns * PROCESSORS as f64), "fraction");
    rr
}

/// Figure 9's stream: 3 applications, equal processing, then 80/10/10 from packet `CHANGE`.
const CHANGE: usize = 10_000;

/// predictive Fig. 9: processors per application over packets 8,000-12,000, FCFS and LAP,
/// 3 applications, 16 processors, 64 packets visible; the load changes at packet 10,000.
/// Fig. 9's grid: FCFS and LAP, 14,000 packets with 64 visible.
pub fn fig9_grid(_quick: bool) -> Grid {
    Grid::one("runs").axis("scheduler", "", ["fcfs", "lap"]).axis("packets", "packets", [14_000usize]).axis(
        "q",
        "packets",
        [64usize],
    )
}

pub fn fig9(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let packets: usize = g.value("runs", "packets");
    let q: usize = g.value("runs", "q");
    let mix = Mix::Processing(vec![(0, vec![1.0; 3]), (CHANGE, vec![0.8, 0.1, 0.1])]);
    let st = stream(3, packets, &mix, opts.seed);
    out.assumptions = assumptions(3, packets);
    out.assumptions.push(format!(
        "Figure 9 load: equal processing for the 3 applications, then 80/10/10 from packet {CHANGE}; an application is drawn with probability proportional to share / mean t_e. The 'offered' line is share x {PROCESSORS}."
    ));
    let policies: Vec<Policy> = g.values::<String>("runs", "scheduler").iter().map(|s| policy(s)).collect();
    let rs = super::par_map(
        opts.threads,
        &policies,
        |&pol, _| {
            run(
                &LapParams { policy: pol, processors: PROCESSORS, apps: 3, visible: Some(q), record: 8_000..12_000 },
                &st,
            )
        },
        progress,
    );
    let mut table = Table::new([
        "scheduler",
        "app 1 mean, 8,000-10,000",
        "app 1 mean, 11,000-12,000",
        "app 1 std dev, 11,000-12,000",
        "group changes per 1,000 packets",
        "cold fraction",
        "packets until app 1's 64-packet mean first reaches 90 % of its new level",
    ])
    .captioned("Processors per application (group sizes) around the load change at packet 10,000 (dispatch index).");
    for (pol, r) in policies.iter().zip(&rs) {
        let g1 = |lo: usize, hi: usize| -> Vec<f64> {
            r.groups.iter().filter(|(k, _)| (lo..hi).contains(k)).map(|(_, g)| g[0] as f64).collect()
        };
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let (before, after) = (g1(8_000, CHANGE), g1(11_000, 12_000));
        let (mb, ma) = (mean(&before), mean(&after));
        let sd = (after.iter().map(|x| (x - ma).powi(2)).sum::<f64>() / after.len().max(1) as f64).sqrt();
        let changes = r.groups.windows(2).filter(|w| w[0].1 != w[1].1).count() as f64 / 4.0;
        let series = g1(CHANGE, 12_000);
        let lag = series.windows(64).position(|w| mean(w) >= 0.9 * ma).map(|i| i as f64).unwrap_or(f64::NAN);
        table.row([
            pol.label().to_string(),
            format!("{mb:.2}"),
            format!("{ma:.2}"),
            format!("{sd:.2}"),
            format!("{changes:.0}"),
            format!("{:.3}", r.cold_fraction()),
            format!("{lag:.0}"),
        ]);
        let mut rr = run_result(pol.label().into(), *pol, Some(q), r);
        rr.scalar("app1_group_mean_before", mb, "processors");
        rr.scalar("app1_group_mean_after", ma, "processors");
        rr.scalar("app1_group_std_after", sd, "processors");
        rr.scalar("group_changes_per_1000", changes, "per 1000 packets");
        rr.scalar("adaptation_lag_packets", lag, "packets");
        out.runs.push(rr);
        let params = BTreeMap::from([("scheduler".into(), json!(pol.label()))]);
        out.comparisons.push(Comparison::new(
            "adaptation_lag",
            params.clone(),
            lag,
            None,
            "packets",
            "section 5.2.3: LAP 'within a few hundred packets (3 to 4 times q)'",
        ));
        out.comparisons.push(Comparison::new(
            "app1_processors_after_change",
            params,
            ma,
            None,
            "processors",
            "Fig. 9(b): 80 % of 16 = 12.8",
        ));
        let mut lines: Vec<(String, Vec<(f64, f64)>)> = (0..3)
            .map(|a| {
                (format!("app {}", a + 1), r.groups.iter().map(|(k, g)| (*k as f64, g[a] as f64)).collect::<Vec<_>>())
            })
            .collect();
        lines.push((
            "offered (app 1)".into(),
            vec![(8_000.0, 16.0 / 3.0), (CHANGE as f64, 16.0 / 3.0), (CHANGE as f64, 12.8), (12_000.0, 12.8)],
        ));
        out.plots.push(PlotSpec {
            name: format!("fig9-{}", pol.label()),
            title: format!("Fig. 9: processors per application, {} (q = {q})", pol.label().to_uppercase()),
            x_label: "packet (dispatch order)".into(),
            y_label: "processors".into(),
            lines,
            kind: PlotKind::Lines,
            log_x: false,
            log_y: false,
            ..Default::default()
        });
    }
    out.notes.push(table.into());
    out
}

/// One point of Figures 10-12.
struct Point {
    policy: Policy,
    q: Option<usize>,
}

/// The policy of a grid's scheduler label.
fn policy(label: &str) -> Policy {
    [Policy::TOpt, Policy::Fcfs, Policy::Lap].into_iter().find(|p| p.label() == label).expect("a LAP-model policy")
}

/// Sections 5.2.4-5.2.5 on FCFS, at every q: throughput about 85% of T-Opt (Fig. 10) and about
/// 96% of packets on a cold cache (Fig. 11).
#[rustfmt::skip]
pub const PAPER_FIG10_12: &[PaperValue] = &[
    PaperValue::new("throughput_vs_topt", &[("scheduler", At::Text("fcfs"))], 0.85, "section 5.2.4, Fig. 10 (FCFS 'about 85%')"),
    PaperValue::new("cold_fraction", &[("scheduler", At::Text("fcfs"))], 0.96, "section 5.2.5, Fig. 11 (FCFS 'about 96%')"),
];

/// Figs. 10-12's grid: T-Opt once, then FCFS and LAP at each number of visible packets q, over
/// 100,000 packets of 30 applications (quick: 20,000 packets, four q).
pub fn fig10_12_grid(quick: bool) -> Grid {
    let (packets, qs): (usize, Vec<usize>) =
        if quick { (20_000, vec![1, 16, 128, 512]) } else { (100_000, vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512]) };
    Grid::one("oracle")
        .axis("scheduler", "", ["t-opt"])
        .axis("packets", "packets", [packets])
        .sweep("by q")
        .axis("q", "packets", qs)
        .axis("scheduler", "", ["fcfs", "lap"])
        .axis("packets", "packets", [packets])
}

/// predictive Figs. 10-12: throughput relative to T-Opt, cold-cache fraction and delay
/// variation against the packets visible, 30 applications, 16 processors.
pub fn fig10_12(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let apps = 30;
    let packets: usize = g.value("by q", "packets");
    let qs: Vec<usize> = g.values("by q", "q");
    let by_q: Vec<Policy> = g.values::<String>("by q", "scheduler").iter().map(|s| policy(s)).collect();
    let st: Vec<StreamPacket> = stream(apps, packets, &Mix::EqualBandwidth, opts.seed);
    out.assumptions = assumptions(apps, packets);
    let mut points = vec![Point { policy: policy(&g.value::<String>("oracle", "scheduler")), q: None }];
    for &q in &qs {
        points.extend(by_q.iter().map(|&policy| Point { policy, q: Some(q) }));
    }
    let rs = super::par_map(
        opts.threads,
        &points,
        |p, _| run(&LapParams { policy: p.policy, processors: PROCESSORS, apps, visible: p.q, record: 0..0 }, &st),
        progress,
    );
    let topt = rs[0].throughput_gbps();
    let mut table = Table::new([
        "scheduler",
        "q",
        "throughput (Gbit/s)",
        "relative to T-Opt",
        "cold fraction",
        "order std dev (packets)",
    ]);
    let mut lines: BTreeMap<&str, [Vec<(f64, f64)>; 3]> = BTreeMap::new();
    let mut marked = Vec::new();
    for (p, r) in points.iter().zip(&rs) {
        let rel = r.throughput_gbps() / topt;
        let qs = p.q.map_or("all".to_string(), |q| q.to_string());
        table.row([
            p.policy.label().to_string(),
            qs.to_string(),
            format!("{:.3}", r.throughput_gbps()),
            format!("{rel:.4}"),
            format!("{:.4}", r.cold_fraction()),
            format!("{:.1}", r.order_std),
        ]);
        let label = match p.q {
            Some(q) => format!("{}-q{q}", p.policy.label()),
            None => p.policy.label().to_string(),
        };
        let mut rr = run_result(label, p.policy, p.q, r);
        rr.scalar("throughput_vs_topt", rel, "fraction");
        out.runs.push(rr);
        let Some(q) = p.q else { continue };
        let l = lines.entry(p.policy.label()).or_default();
        l[0].push((q as f64, rel));
        l[1].push((q as f64, r.cold_fraction()));
        l[2].push((q as f64, r.order_std));
        let params = BTreeMap::from([("scheduler".into(), json!(p.policy.label())), ("q".into(), json!(q))]);
        marked.push((p.policy.label(), q as f64, params.clone()));
        out.comparisons.push(Comparison::new(
            "throughput_vs_topt",
            params.clone(),
            rel,
            None,
            "fraction",
            "section 5.2.4, Fig. 10 (FCFS 'about 85%')",
        ));
        out.comparisons.push(Comparison::new(
            "cold_fraction",
            params.clone(),
            r.cold_fraction(),
            None,
            "fraction",
            "section 5.2.5, Fig. 11 (FCFS 'about 96%')",
        ));
        out.comparisons.push(Comparison::new("order_std", params, r.order_std, None, "packets", "Fig. 12"));
    }
    // T-Opt does not depend on q: a flat line at 1 (throughput) and at its cold fraction.
    let tl = [1.0, rs[0].cold_fraction()];
    let span = |v: f64| vec![(1.0, v), (*qs.last().expect("q values") as f64, v)];
    for (k, (name, title, y)) in [
        ("fig10", "Fig. 10: throughput relative to T-Opt", "throughput / T-Opt"),
        ("fig11", "Fig. 11: cold-cache fraction", "fraction of packets with a cold cache"),
        ("fig12", "Fig. 12: delay variation", "std dev of order displacement (packets)"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut ls: Vec<(String, Vec<(f64, f64)>)> = lines.iter().map(|(n, v)| (n.to_string(), v[k].clone())).collect();
        if k < 2 {
            ls.push(("t-opt".into(), span(tl[k])));
        }
        let mut plot = PlotSpec {
            name: name.into(),
            title: format!("{title} ({apps} applications, {PROCESSORS} processors)"),
            x_label: "packets visible in queue memory (q)".into(),
            y_label: y.into(),
            lines: ls,
            kind: PlotKind::Lines,
            log_x: true,
            log_y: false,
            ..Default::default()
        };
        for (curve, q, params) in marked.iter().filter(|_| k < 2) {
            plot.mark(curve, ["throughput_vs_topt", "cold_fraction"][k], params, Place::AtX(*q));
        }
        out.plots.push(plot);
    }
    out.notes.push(table.into());
    out
}

/// The section 6 scenario's parameters.
fn switch_params(mode: Mode, secs: u64, seed: u64) -> SwitchParams {
    SwitchParams {
        mode,
        processors: SWITCH_PROCESSORS,
        flows: paper_flows(),
        calm_load: SWITCH_CALM,
        bursts: Bursts { apps: vec![2], factor: SWITCH_BURST, every_ns: 1_500_000_000, len_ns: 200_000_000 },
        duration_ns: secs * 1_000_000_000,
        calm_below_ns: SWITCH_LO_NS,
        seed,
    }
}

const SWITCH_PROCESSORS: u32 = 4;
/// Every flow at half its reservation outside bursts.
const SWITCH_CALM: f64 = 0.5;
/// The 8 compression flows at 3x their reservation for 200 ms every 1.5 s.
const SWITCH_BURST: f64 = 3.0;
/// Back to EFQ below 10 ms of estimated queued work (and "calm" below it), to LAP at 20 ms.
const SWITCH_LO_NS: f64 = 10e6;
const SWITCH_HI_NS: f64 = 20e6;

/// predictive section 6: EFQ, EFQ preferring warm processors, LAP, and the combination that
/// switches to LAP above a threshold of estimated queued work and back below another.
/// Section 6's grid: the four modes, 12 s of arrivals (quick: 3 s).
pub fn switch_grid(quick: bool) -> Grid {
    Grid::one("runs").axis("mode", "", SWITCH_MODES.iter().map(|m| m.label())).axis(
        "duration_s",
        "s",
        [if quick { 3u64 } else { 12 }],
    )
}

const SWITCH_MODES: [Mode; 4] =
    [Mode::Efq, Mode::EfqWarm, Mode::Lap, Mode::Combined { hi_ns: SWITCH_HI_NS, lo_ns: SWITCH_LO_NS }];

pub fn switch(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let modes: Vec<Mode> = g
        .values::<String>("runs", "mode")
        .iter()
        .map(|l| *SWITCH_MODES.iter().find(|m| m.label() == l).expect("a section 6 mode"))
        .collect();
    let secs: u64 = g.value("runs", "duration_s");
    let p0 = switch_params(Mode::Efq, secs, opts.seed);
    out.assumptions = vec![
        format!("The 32 reserved flows of section 4.2.1 (4 applications x 8 sizes, 1/32 each) on {SWITCH_PROCESSORS} processors at 2 GHz (Table 1 / 10) with one-application instruction caches: a packet on a processor that last ran another application takes pi_a / 10 longer. Variation as in section 4.2."),
        format!("Load: every flow periodic at {SWITCH_CALM} of its reservation; the 8 compression flows at {SWITCH_BURST}x theirs for 200 ms every 1.5 s; arrivals for {} s, then the backlog drains.", p0.duration_ns as f64 * 1e-9),
        format!("EFQ estimates are t_e (warm). The combination switches to LAP when the estimated queued work reaches {} ms and back to EFQ (preferring warm idle processors) below {} ms. A packet is 'calm' if the estimated queued work at its arrival is below {} ms (the same test for every mode), else 'overloaded'; 'overloaded time' is the time spent at or above it.", SWITCH_HI_NS * 1e-6, SWITCH_LO_NS * 1e-6, SWITCH_LO_NS * 1e-6),
        "Goodput while overloaded = estimated (warm) processing time of the packets completed during overloaded time / that time, in processors' worth (at most 4): the throughput that cold caches take away.".into(),
        "The thresholds, burst pattern and processor count are ours; section 6 gives the policy, not numbers.".into(),
    ];
    let rs = super::par_map(opts.threads, &modes, |&m, _| efq_lap::run(&switch_params(m, secs, opts.seed)), progress);
    let mut table = Table::new(["mode", "conforming calm p99 / max (ms)", "conforming overloaded p99 / max (ms)", "bursting p99 (ms)", "cold fraction", "overloaded time (ms)", "goodput while overloaded (processors)", "max backlog (ms)", "switches to LAP", "time in LAP (ms)"])
        .captioned("Delays of the conforming flows (all but compression) by whether the system was calm when they arrived, and what overload costs.");
    for (m, r) in modes.iter().zip(&rs) {
        table.row([
            m.label().to_string(),
            format!("{:.2} / {:.2}", r.conforming_calm.quantile(0.99) * 1e-6, r.conforming_calm.max() * 1e-6),
            format!(
                "{:.2} / {:.2}",
                r.conforming_overloaded.quantile(0.99) * 1e-6,
                r.conforming_overloaded.max() * 1e-6
            ),
            format!("{:.2}", r.bursting.quantile(0.99) * 1e-6),
            format!("{:.3}", r.cold_fraction()),
            format!("{:.0}", r.overloaded_ns * 1e-6),
            format!("{:.3}", r.overloaded_goodput()),
            format!("{:.1}", r.max_backlog_ns * 1e-6),
            r.switches.to_string(),
            format!("{:.0}", r.lap_ns * 1e-6),
        ]);
        let mut rr = RunResult {
            label: m.label().into(),
            params: BTreeMap::from([("mode".into(), json!(m.label()))]),
            complete: true,
            events: r.packets,
            sim_time_ns: r.end_ns,
            ..Default::default()
        };
        rr.scalar("packets", r.packets as f64, "packets");
        rr.scalar("conforming_calm_p99_ms", r.conforming_calm.quantile(0.99) * 1e-6, "ms");
        rr.scalar("conforming_calm_max_ms", r.conforming_calm.max() * 1e-6, "ms");
        rr.scalar("conforming_calm_packets", r.conforming_calm.count() as f64, "packets");
        rr.scalar("conforming_overloaded_p99_ms", r.conforming_overloaded.quantile(0.99) * 1e-6, "ms");
        rr.scalar("conforming_overloaded_max_ms", r.conforming_overloaded.max() * 1e-6, "ms");
        rr.scalar("bursting_p99_ms", r.bursting.quantile(0.99) * 1e-6, "ms");
        rr.scalar("cold_fraction", r.cold_fraction(), "fraction");
        rr.scalar("overloaded_ms", r.overloaded_ns * 1e-6, "ms");
        rr.scalar("overloaded_goodput", r.overloaded_goodput(), "processors");
        rr.scalar("penalty_share", r.penalty_ns / r.busy_ns.max(1.0), "fraction");
        rr.scalar("max_backlog_ms", r.max_backlog_ns * 1e-6, "ms");
        rr.scalar("switches", r.switches as f64, "switches");
        rr.scalar("lap_ms", r.lap_ns * 1e-6, "ms");
        out.runs.push(rr);
        let params = BTreeMap::from([("mode".into(), json!(m.label()))]);
        for (metric, v, unit) in [
            ("conforming_calm_p99", r.conforming_calm.quantile(0.99) * 1e-6, "ms"),
            ("conforming_overloaded_p99", r.conforming_overloaded.quantile(0.99) * 1e-6, "ms"),
            ("overloaded_goodput", r.overloaded_goodput(), "processors"),
            ("overloaded_time", r.overloaded_ns * 1e-6, "ms"),
        ] {
            out.comparisons.push(Comparison::new(
                metric,
                params.clone(),
                v,
                None,
                unit,
                "section 6 (no numbers in the paper)",
            ));
        }
    }
    out.notes.push(table.into());
    out.plots.push(PlotSpec {
        name: "backlog".into(),
        title: "Estimated queued processing time under bursts".into(),
        x_label: "time (ms)".into(),
        y_label: "queued work (ms of one processor)".into(),
        lines: modes.iter().zip(&rs).map(|(m, r)| (m.label().to_string(), r.backlog.clone())).collect(),
        kind: PlotKind::Lines,
        log_x: false,
        log_y: false,
        ..Default::default()
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(out: &Output, label: &str, name: &str) -> f64 {
        out.run_scalar(label, name).unwrap_or_else(|| panic!("{label} {name}"))
    }

    #[test]
    fn fig9_quick_lap_follows_the_load_change_smoothly() {
        let out = crate::experiments::quick_output("predictive-fig9");
        let s = |p: &str, n: &str| scalar(out, p, n);
        // Both end up giving application 1 most processors (80 % of the work)...
        for p in ["fcfs", "lap"] {
            assert!((4.0..6.7).contains(&s(p, "app1_group_mean_before")), "{p} {}", s(p, "app1_group_mean_before"));
            assert!(s(p, "app1_group_mean_after") > 10.5, "{p} {}", s(p, "app1_group_mean_after"));
        }
        // ...LAP smoothly (far fewer group changes and cold caches), within a few hundred packets.
        assert!(s("lap", "group_changes_per_1000") * 3.0 < s("fcfs", "group_changes_per_1000"));
        assert!(s("lap", "cold_fraction") * 3.0 < s("fcfs", "cold_fraction"));
        assert!(s("lap", "app1_group_std_after") < s("fcfs", "app1_group_std_after"));
        let lag = s("lap", "adaptation_lag_packets");
        assert!(lag < 600.0, "lap lag {lag}");
    }

    #[test]
    fn fig10_12_quick_lap_between_fcfs_and_topt_and_converging() {
        let out = crate::experiments::quick_output("predictive-fig10-12");
        let s = |l: &str, n: &str| scalar(out, l, n);
        // FCFS: locality-blind, nearly every cache cold (1 in 30 warm), well below T-Opt.
        assert!(s("fcfs-q128", "cold_fraction") > 0.9);
        assert!(s("fcfs-q128", "throughput_vs_topt") < 0.92);
        assert_eq!(s("fcfs-q512", "order_std"), 0.0);
        // LAP with one packet visible is FCFS; with more it climbs towards T-Opt.
        assert_eq!(s("lap-q1", "throughput_vs_topt"), s("fcfs-q1", "throughput_vs_topt"));
        assert!(s("lap-q16", "throughput_vs_topt") > s("fcfs-q16", "throughput_vs_topt") + 0.03);
        assert!(s("lap-q512", "throughput_vs_topt") > 0.97);
        assert!(s("lap-q512", "cold_fraction") < s("lap-q16", "cold_fraction"));
        // The price: delay variation grows with q.
        assert!(s("lap-q512", "order_std") > s("lap-q16", "order_std"));
        assert!(s("t-opt", "cold_fraction") < 0.01);
    }

    #[test]
    fn switch_quick_combination_keeps_efq_when_calm_and_drains_overload_faster() {
        let out = crate::experiments::quick_output("predictive-switch");
        let s = |l: &str, n: &str| scalar(out, l, n);
        // Calm: the combination serves as EFQ does; LAP alone does not isolate the flows.
        let efq = s("efq", "conforming_calm_p99_ms");
        assert!(s("efq+lap", "conforming_calm_p99_ms") < 1.2 * efq, "{efq}");
        assert!(s("lap", "conforming_calm_p99_ms") > 2.0 * efq, "{efq}");
        // Overloaded: EFQ still protects the conforming flows; LAP and the combination do not
        // (section 6: "the original QoS guarantees can not be met anymore")...
        assert!(s("efq+lap", "conforming_overloaded_p99_ms") > 3.0 * s("efq", "conforming_overloaded_p99_ms"));
        // ...but they do more useful work, so the overload ends sooner.
        assert!(s("efq+lap", "overloaded_goodput") > s("efq", "overloaded_goodput"));
        assert!(s("efq+lap", "overloaded_ms") < 0.85 * s("efq", "overloaded_ms"));
        assert!(s("efq+lap", "switches") >= 1.0);
        // LAP inside EFQ: preferring warm idle processors lowers the cold-cache fraction.
        assert!(s("efq-warm", "cold_fraction") < s("efq", "cold_fraction"));
    }
}
