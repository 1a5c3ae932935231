//! everest-scale: 60 M packets (UNC-10's size) through 16 processors, 6 services, every
//! scheduler, with the wall-clock time per run.

use super::*;

/// Scale: 60 M packets (the size of the paper's UNC-10 trace, everest Table 3) through 16
/// processors and 6 services for every scheduler, at UNC-2.5's packet rate (85 s of traffic;
/// UNC-10's own rate would be 4x what 16 processors can process). Wall-clock time per
/// scheduler goes to `timings` (run.json and the report; not summary.json).
/// everest-scale's grid: one synthetic workload of 60 M packets (quick: 1 M) x every scheduler.
pub fn scale_grid(quick: bool) -> Grid {
    Grid::one("runs").axis("packets", "packets", [if quick { 1e6 } else { 60e6 }]).axis(
        "scheduler",
        "",
        SCHEDS.iter().map(Sched::label),
    )
}

pub fn scale(opts: RunOptions, grid: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let packets: f64 = grid.value("runs", "packets");
    let secs = packets / crate::models::everest::UNC25_PPS;
    let s = SyntheticTraffic::unc25_like(Duration::from_nanos((secs * 1e9) as u64), SOURCES);
    let ws = vec![Workload {
        name: "synthetic",
        expected_packets: packets as u64,
        description: format!("synthetic as in the other everest experiments, {secs:.1} s (about {packets:.0} packets)"),
        traffic: Traffic::Synthetic(s),
    }];
    out.assumptions.push(format!("Workload {}", ws[0].description));
    out.assumptions.extend(common_assumptions());
    let points: Vec<Point> =
        SCHEDS.iter().map(|&sched| Point { w: 0, sched, processors: PROCESSORS, t_sw: T_SW, d: D }).collect();
    let t0 = std::time::Instant::now();
    let g = guarantees(&ws, &points, opts);
    let g_secs = t0.elapsed().as_secs_f64();
    out.notes.push(Note::from(guarantee_note(&ws, &g)));
    let rs = crate::experiments::par_map(
        opts.threads,
        &points,
        |p, prog| {
            let params = point_run_params(p, &g);
            let t = std::time::Instant::now();
            let r = run(&params, ws[0].traffic.stream(opts.seed), ws[0].expected_packets, prog).expect("valid");
            (r, t.elapsed().as_secs_f64())
        },
        progress,
    );
    let mut t = Table::new(["scheduler", "packets", "late %", "switches", "seconds", "ns / packet"]).captioned(format!("Wall-clock seconds per run on this machine (two runs at a time on 2 cores), and the N_max analysis pass ({g_secs:.1} s for all services)."));
    for (p, (r, secs)) in points.iter().zip(&rs) {
        out.runs.push(result_run(&ws, p, r));
        let params =
            BTreeMap::from([("scheduler".into(), json!(p.sched.label())), ("packets".into(), json!(r.packets))]);
        out.timings.push(Timing { name: "run_seconds".into(), params: params.clone(), value: *secs, unit: "s".into() });
        out.timings.push(Timing {
            name: "ns_per_packet".into(),
            params,
            value: secs * 1e9 / r.packets.max(1) as f64,
            unit: "ns".into(),
        });
        t.row([
            p.sched.label().to_string(),
            r.packets.to_string(),
            fmt_val(r.late_percent()).to_string(),
            r.stats.switches.to_string(),
            format!("{secs:.1}"),
            format!("{:.0}", secs * 1e9 / r.packets.max(1) as f64),
        ]);
    }
    out.timings.push(Timing { name: "n_max_seconds".into(), params: BTreeMap::new(), value: g_secs, unit: "s".into() });
    out.notes.push(t.into());
    out
}
