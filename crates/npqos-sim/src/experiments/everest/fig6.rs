//! everest Figure 6 (section 6): the IXP2400 prototype's four microengines multiplexed between a
//! port-scan detector and a TCP-SYN-flood detector while a traffic generator changes the mix;
//! during an overload (2.2 to 4 s) the processors go by proportional share, equal for the two
//! services. Here: the same two services on our model, under Everest, Static and Quantum, on
//! one phased workload ([`PhasedTraffic`]) whose rates are ours ([`PROFILE`]; the paper draws
//! the shape of its workload, not its numbers).
//!
//! What the paper lets us compare: the equal split during the overload, 2 of the 4 processors
//! per service ([`PAPER_FIG6`]). Everything else (processors per phase, late packets) is ours
//! with no paper number.

use super::*;
use crate::models::everest::{Phase, PhasedTraffic, Timeline};
use crate::results::Series;
use npqos_core::alloc::ServiceSpec;

/// The prototype's processors: eight microengines, two for receive and transmit, two for
/// classification, four multiplexed between the services (section 6).
pub const FIG6_PROCESSORS: u32 = 4;
/// t_pkt of both detectors (ours: the paper gives none for them; Table 2's range is 1.78-18.22
/// us). With one value, a processor's worth of work is 100,000 packets/s for either service.
pub const FIG6_T_PKT: Duration = Duration::from_micros(10);
/// The two services, in the order of every table and plot.
pub const FIG6_SERVICES: [&str; 2] = ["portscan", "syn-flood"];
/// The schedulers compared on the same traffic.
const FIG6_SCHEDS: [Sched; 3] = [Sched::Everest, Sched::Static, Sched::Quantum(5)];
/// Width of the windows of the time series.
const WINDOW: Duration = Duration::from_millis(10);

/// The phases of the full run: name, end (s), offered work per service in processors (rate x
/// t_pkt; x 100,000 packets/s). Each service in turn dominates (2.5 of 4 processors, needing 3,
/// the other 0.5, needing 1); then the overload of the paper's 2.2-4 s, 4.2 processors of work:
/// the port-scan detector offered 2.8 (more than its equal share) and the SYN-flood detector
/// 1.4 (within its share, but needing both of its processors), so an allocation by need (3 for
/// one, 1 for the other) and the paper's equal share (2 each) differ; then a quieter phase in
/// which the backlog the overload left drains. docs/everest.md ("Figure 6") says why.
pub const PROFILE: [(&str, f64, [f64; 2]); 4] = [
    ("portscan-heavy", 1.1, [2.5, 0.5]),
    ("syn-flood-heavy", 2.2, [0.5, 2.5]),
    ("overload", 4.0, [2.8, 1.4]),
    ("quiet", 6.0, [1.0, 0.5]),
];
/// The phase of the paper's overload.
const OVERLOAD: &str = "overload";

/// The paper's statement for the overload: proportional share, equal for both services, of 4
/// microengines.
#[rustfmt::skip]
pub const PAPER_FIG6: &[PaperValue] = &[
    PaperValue::new("mean_processors", &[("scheduler", At::Text("everest")), ("phase", At::Text(OVERLOAD))], 2.0, FIG6_SOURCE),
];
const FIG6_SOURCE: &str = "section 6, Fig. 6: during overload (2.2-4 s) the 4 MEs go by proportional share, equal for both services (4 / 2 each)";

/// Figure 6's grid: the schedulers, on the profile at a time scale (quick: every phase 5x
/// shorter, 1.2 s in all).
pub fn fig6_grid(quick: bool) -> Grid {
    Grid::one("runs").axis("scheduler", "", FIG6_SCHEDS.iter().map(Sched::label)).axis(
        "time_scale",
        "1",
        [if quick { 0.2 } else { 1.0 }],
    )
}

/// The workload of [`PROFILE`] with every phase's length times `scale`.
pub fn fig6_traffic(scale: f64) -> PhasedTraffic {
    let per_processor = 1e9 / FIG6_T_PKT.as_nanos() as f64;
    let phases = PROFILE
        .iter()
        .map(|&(name, until, work)| Phase {
            name: name.into(),
            until: Duration::from_nanos((until * scale * 1e9).round() as u64),
            rate_pps: work.iter().map(|w| w * per_processor).collect(),
        })
        .collect();
    PhasedTraffic::new(phases).expect("the profile is a valid schedule")
}

fn fig6_params(sched: Sched) -> EverestParams {
    let services = FIG6_SERVICES
        .iter()
        .map(|&name| ServiceSpec { name: name.into(), t_pkt: FIG6_T_PKT, tolerance: D, guarantee: 0.5 })
        .collect();
    EverestParams {
        processors: FIG6_PROCESSORS,
        t_sw: T_SW,
        delta: T_SW,
        policy: sched.policy(T_SW),
        services,
        sample_every: Duration::from_micros(100),
        check_invariants: false,
        timeline: Some(WINDOW),
    }
}

/// What one scheduler did in one phase, per service.
struct PhaseStats {
    processors: [f64; 2],
    offered: [u64; 2],
    late: [u64; 2],
    switches: u64,
}

fn phase_stats(tl: &Timeline, (a, b): (u64, u64)) -> PhaseStats {
    let per = |f: fn(&Timeline, usize, usize) -> u64| [0, 1].map(|s| tl.sum(a, b, s, f));
    PhaseStats {
        processors: [0, 1].map(|s| tl.mean_processors(a, b, s)),
        offered: per(Timeline::arrivals),
        late: per(Timeline::late),
        switches: per(Timeline::switches).iter().sum(),
    }
}

/// The run's time series: offered rate (while packets arrive, to `end_ns`), processors and late
/// packets per service by window.
fn series(tl: &Timeline, end_ns: u64) -> Vec<Series> {
    let w_s = tl.window_ns as f64 / 1e9;
    let offered = tl.windows().min(end_ns.div_ceil(tl.window_ns) as usize);
    let mut out = Vec::new();
    for (s, name) in FIG6_SERVICES.iter().enumerate() {
        let pts = |n: usize, f: &dyn Fn(usize) -> f64| (0..n).map(|w| (tl.start_ns(w) as f64 / 1e9, f(w))).collect();
        let series = |metric: &str, unit: &str, points| Series {
            name: format!("{metric}_{name}"),
            x_unit: "s".into(),
            unit: unit.into(),
            points,
        };
        out.push(series("offered_rate", "packets/s", pts(offered, &|w| tl.arrivals(w, s) as f64 / w_s)));
        out.push(series("processors", "processors", pts(tl.windows(), &|w| tl.processors(w, s))));
        out.push(series("late_packets", "packets per window", pts(tl.windows(), &|w| tl.late(w, s) as f64)));
    }
    out
}

fn profile_table(tr: &PhasedTraffic) -> Table {
    let mut t = Table::new([
        "phase",
        "from (s)",
        "to (s)",
        "portscan (packets/s)",
        "syn-flood (packets/s)",
        "offered work (processors)",
        "of 4 processors",
    ])
    .captioned("The workload (ours; the paper shows its shape only). Poisson packets at each phase's rates; t_pkt = 10 us for both services, so 100,000 packets/s is one processor's work.");
    for (i, p) in tr.phases.iter().enumerate() {
        let (a, b) = tr.span_ns(i);
        let work: f64 = p.rate_pps.iter().map(|r| r * FIG6_T_PKT.as_nanos() as f64 * 1e-9).sum();
        t.row([
            p.name.clone(),
            format!("{:.2}", a as f64 * 1e-9),
            format!("{:.2}", b as f64 * 1e-9),
            format!("{:.0}", p.rate_pps[0]),
            format!("{:.0}", p.rate_pps[1]),
            format!("{work:.1}"),
            format!("{:.0}%", 100.0 * work / FIG6_PROCESSORS as f64),
        ]);
    }
    t
}

/// everest Fig. 6: processors per service over time as the offered mix changes, with an
/// overload phase, under Everest, Static and Quantum on the same traffic.
pub fn fig6(opts: RunOptions, grid: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let scale: f64 = grid.value("runs", "time_scale");
    let labels: Vec<String> = grid.values("runs", "scheduler");
    let scheds: Vec<Sched> =
        labels.iter().map(|l| *FIG6_SCHEDS.iter().find(|s| s.label() == *l).expect("a fig6 scheduler")).collect();
    let tr = fig6_traffic(scale);
    let expected = tr.expected_packets() as u64;
    let rs = crate::experiments::par_map(
        opts.threads,
        &scheds,
        |&s, prog| run(&fig6_params(s), tr.stream(opts.seed), expected, prog).expect("valid everest parameters"),
        progress,
    );
    let mut out = Output::default();
    out.notes.push(profile_table(&tr).into());
    let mut by_phase =
        Table::new(["scheduler", "phase", "processors portscan", "processors syn-flood", "late portscan", "late syn-flood", "offered portscan", "offered syn-flood", "switches"])
            .captioned("Per phase: mean processors held (time-weighted), packets later than D and packets offered (counted in the phase they arrived in), switches started.");
    let mut late_plot = PlotSpec {
        name: "fig6-late".into(),
        title: "Fig. 6 workload: late packets per service, by phase".into(),
        x_label: "phase".into(),
        y_label: "packets later than D".into(),
        kind: PlotKind::Points,
        x_categories: PROFILE.iter().map(|p| p.0.to_string()).collect(),
        ..Default::default()
    };
    for (&sched, r) in scheds.iter().zip(&rs) {
        let tl = r.timeline.as_ref().expect("the run keeps a timeline");
        let mut run =
            RunResult { label: sched.label(), complete: true, stop_reason: "drained".into(), ..Default::default() };
        run.params = BTreeMap::from([
            ("scheduler".into(), json!(sched.label())),
            ("processors".into(), json!(FIG6_PROCESSORS)),
            ("t_sw_us".into(), json!(T_SW.as_nanos() as f64 / 1e3)),
            ("d_us".into(), json!(D.as_nanos() as f64 / 1e3)),
            ("time_scale".into(), json!(scale)),
        ]);
        r.write_scalars(FIG6_PROCESSORS, &mut run);
        let mut late_lines = [Vec::new(), Vec::new()];
        let mut plot = processors_plot(sched, tl);
        for (i, phase) in tr.phases.iter().enumerate() {
            let (a, b) = tr.span_ns(i);
            let st = phase_stats(tl, (a, b));
            for (s, svc) in FIG6_SERVICES.iter().enumerate() {
                let params = BTreeMap::from([
                    ("scheduler".into(), json!(sched.label())),
                    ("phase".into(), json!(phase.name)),
                    ("service".into(), json!(svc)),
                ]);
                run.scalar(&format!("processors_{}_{svc}", phase.name), st.processors[s], "processors");
                run.scalar(&format!("late_packets_{}_{svc}", phase.name), st.late[s] as f64, "packets");
                run.scalar(&format!("offered_packets_{}_{svc}", phase.name), st.offered[s] as f64, "packets");
                if phase.name == OVERLOAD {
                    plot.mark(svc, "mean_processors", &params, Place::AtX((a + b) as f64 * 0.5e-9));
                }
                out.comparisons.push(Comparison::new(
                    "mean_processors",
                    params.clone(),
                    st.processors[s],
                    None,
                    "processors",
                    "Fig. 6 (our run)",
                ));
                out.comparisons.push(Comparison::new(
                    "late_packets",
                    params,
                    st.late[s] as f64,
                    None,
                    "packets",
                    "Fig. 6 workload (ours; the paper reports no lateness for it)",
                ));
                late_lines[s].push((i as f64, st.late[s] as f64));
            }
            run.scalar(&format!("switches_{}", phase.name), st.switches as f64, "switches");
            by_phase.row([
                sched.label(),
                phase.name.clone(),
                format!("{:.2}", st.processors[0]),
                format!("{:.2}", st.processors[1]),
                st.late[0].to_string(),
                st.late[1].to_string(),
                st.offered[0].to_string(),
                st.offered[1].to_string(),
                st.switches.to_string(),
            ]);
        }
        for (s, pts) in late_lines.into_iter().enumerate() {
            late_plot.lines.push((format!("{} {}", sched.label(), FIG6_SERVICES[s]), pts));
        }
        run.series = series(tl, tr.duration().as_nanos());
        out.runs.push(run);
        out.plots.push(plot);
    }
    out.plots.insert(0, offered_plot(&out.runs[0].series));
    out.plots.push(late_plot);
    out.notes.push(by_phase.into());
    out.notes.push(reading(&out, &scheds).into());
    out.assumptions = fig6_assumptions(scale);
    out
}

/// The paper's top graph: the offered rate of each service over time, from a run's series (the
/// traffic is the same for every scheduler).
fn offered_plot(series: &[Series]) -> PlotSpec {
    let lines = FIG6_SERVICES
        .iter()
        .map(|svc| {
            let s = series.iter().find(|s| s.name == format!("offered_rate_{svc}")).expect("an offered-rate series");
            (svc.to_string(), s.points.clone())
        })
        .collect();
    PlotSpec {
        name: "fig6-offered".into(),
        title: "Fig. 6 (top): offered rate per service (100,000 packets/s = one processor's work)".into(),
        x_label: "time (s)".into(),
        y_label: "offered rate (packets/s)".into(),
        lines,
        kind: PlotKind::Lines,
        ..Default::default()
    }
}

/// The paper's figure for one scheduler: processors held per service over time.
fn processors_plot(sched: Sched, tl: &Timeline) -> PlotSpec {
    let lines = (0..2)
        .map(|s| {
            let pts = (0..tl.windows()).map(|w| (tl.start_ns(w) as f64 / 1e9, tl.processors(w, s))).collect();
            (FIG6_SERVICES[s].to_string(), pts)
        })
        .collect();
    PlotSpec {
        name: format!("fig6-processors-{}", sched.label()),
        title: format!("Fig. 6: processors per service over time ({}, 4 processors)", sched.label()),
        x_label: "time (s)".into(),
        y_label: "processors (mean per 10 ms)".into(),
        lines,
        kind: PlotKind::Lines,
        ..Default::default()
    }
}

/// What the runs show, computed from their numbers.
fn reading(out: &Output, scheds: &[Sched]) -> String {
    let get = |sched: Sched, name: String| {
        out.runs.iter().find(|r| r.label == sched.label()).and_then(|r| r.get(&name)).unwrap_or(f64::NAN)
    };
    let procs = |sched, phase: &str| {
        FIG6_SERVICES.map(|svc| get(sched, format!("processors_{phase}_{svc}"))).map(|x| format!("{x:.2}")).join(" / ")
    };
    let late = |sched, phase: &str| {
        FIG6_SERVICES.iter().map(|svc| get(sched, format!("late_packets_{phase}_{svc}"))).sum::<f64>()
    };
    let mut t = String::from("Reading (processors portscan / syn-flood, Everest):");
    for (name, ..) in PROFILE {
        t.push_str(&format!(" {name} {};", procs(Sched::Everest, name)));
    }
    t.push_str(" late packets that arrived during the overload:");
    for &s in scheds {
        t.push_str(&format!(" {} {:.0};", s.label(), late(s, OVERLOAD)));
    }
    t.pop();
    t.push('.');
    let by_service = |sched| {
        FIG6_SERVICES.map(|svc| format!("{:.0}", get(sched, format!("late_packets_{OVERLOAD}_{svc}")))).join(" / ")
    };
    t.push_str(&format!(
        " By service (portscan / syn-flood): Everest {}, Static {}. In the overload both give each service 2 processors; what differs is the backlog each brings into it (a queue Static's fixed 2 could not keep up with in the phase before) and, for Everest, the switches that move it there.",
        by_service(Sched::Everest),
        by_service(Sched::Static)
    ));
    t
}

fn fig6_assumptions(scale: f64) -> Vec<String> {
    let mut a = vec![
        "Two services, the port-scan and the TCP-SYN-flood detector of section 6, each with one FIFO queue; t_pkt = 10 us for both (the paper gives no per-packet time for them; Table 2's NAT-PT services take 1.78-18.22 us), D = 2 ms (section 5.2's default), no queue limit.".into(),
        "4 processors (section 6: of the IXP2400's 8 microengines, 2 run the receive and transmit drivers and 2 classify, 4 are multiplexed); t_sw = 2 ms (section 5.2: the IXP2400's switch time); Delta = t_sw; G = 0.5 for each service (section 6: 'we chose the share to be equal'), so Static holds 2 and 2 throughout and Everest's overload control guarantees 2 each.".into(),
        "Workload (ours; the paper plots its shape, not its rates): Poisson packets, rates constant within a phase: portscan-dominant (offered work 2.5 / 0.5 processors) to 1.1 s, SYN-flood-dominant (0.5 / 2.5) to 2.2 s, overload (2.8 / 1.4, 105% of the 4 processors) from 2.2 to 4 s as in the paper, quiet (1.0 / 0.5) to 6 s. In the overload the port-scan detector wants more than its share and the SYN-flood detector needs all of its share, so the equal split (2 / 2) and a split by need (3 / 1) differ.".into(),
        "Processors per service = processors allocated to it (serving, idle, marked for release, or switching toward it), time-weighted over 10 ms windows and over each phase. Late and offered packets count in the window and phase the packet arrived in.".into(),
        "Quantum: Q = 5 t_sw = 10 ms. Every processor starts loaded with Static's shares (2 / 2) and idle; all but Static's start marked.".into(),
        "Not modelled: the detectors' own code, the receive / transmit / classification microengines, the XScale thread that runs Everest (its polling and the IXP2400's checkpoint and migration mechanisms are folded into t_sw).".into(),
    ];
    if scale != 1.0 {
        a.push(format!("--quick: every phase {}x as long (the same rates), 1.2 s in all.", scale));
    }
    a
}
