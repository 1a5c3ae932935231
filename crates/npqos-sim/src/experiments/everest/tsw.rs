//! everest Figs 4 and 5: the percentage of late packets and the mean delay against t_sw / D,
//! and where `everest-adaptive` stands against the better of Everest and Everest-AE (the
//! envelope and crossover tables). The workloads, grid and rendering helpers are in [`super`].

use super::*;
use crate::results::Table;

pub(super) fn ratios(quick: bool) -> Vec<f64> {
    if quick {
        vec![0.05, 0.5, 2.0]
    } else {
        vec![0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 4.0]
    }
}

/// Fig. 4's grid: one sweep per D (500 us, 2 ms), each the workloads x t_sw / D x every scheduler.
pub fn fig4_grid(quick: bool) -> Grid {
    let mut g = Grid::default();
    for d in ["D=0.5ms", "D=2ms"] {
        g.sweeps.extend(sweep_grid("t_sw_over_D", "1", ratios(quick)).sweeps.into_iter().map(|mut s| {
            s.name = d.into();
            s
        }));
    }
    g
}

/// Fig. 5's grid: the workloads x t_sw / D x every scheduler at D = 2 ms.
pub fn fig5_grid(quick: bool) -> Grid {
    sweep_grid("t_sw_over_D", "1", ratios(quick))
}

/// everest Fig. 4: percentage late vs t_sw / D for D = 500 us and 2 ms; where
/// `everest-adaptive` stands against the better of Everest and Everest-AE.
pub fn fig4(opts: RunOptions, grid: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let ds = [0.5, 2.0];
    // One grid per D (the x axis is the ratio).
    let mut grids = Vec::new();
    for (k, &d) in ds.iter().enumerate() {
        let xs: Vec<f64> = grid.values(&format!("D={d}ms"), "t_sw_over_D");
        let mut sub = Output::default();
        let g = Runs::new(
            opts,
            &mut sub,
            &xs,
            &SCHEDS,
            |w, sched, ratio| Point { w, sched, processors: PROCESSORS, t_sw: ms(d * ratio), d: ms(d) },
            &mut |x| progress((k as f64 + x) / ds.len() as f64),
        );
        let fig = format!("Fig. 4 D={}us", (d * 1000.0) as u64);
        g.table_and_plots(
            &mut sub,
            "late_percent",
            "%",
            "t_sw_over_D",
            &fig,
            |r, _| r.late_percent(),
            true,
            true,
            &fig,
        );
        if k == 0 {
            out.assumptions = sub.assumptions.clone();
        }
        out.runs.extend(sub.runs);
        out.notes.extend(sub.notes);
        out.plots.extend(sub.plots);
        out.comparisons.extend(sub.comparisons);
        grids.push((d, g));
    }
    adaptive_envelope(&mut out, &grids);
    crossover_rows(&mut out, &grids);
    out
}

/// Everest-adaptive against min(Everest, Everest-AE) at every point of both sweeps.
fn adaptive_envelope(out: &mut Output, grids: &[(f64, Runs)]) {
    let mut t = Table::new(["workload", "D", "t_sw / D", "Everest", "Everest-AE", "adaptive", "adaptive / best", "within 10%"]).captioned("everest-adaptive against the lower envelope of Everest and Everest-AE (percentage late). 'within 10%': adaptive <= 1.1 x best, or within 0.001 percentage points of it when the best is near zero.");
    let (mut n, mut ok) = (0, 0);
    for (d, g) in grids {
        for w in 0..g.ws.len() {
            for (xi, x) in g.xs.iter().enumerate() {
                let e = g.get(w, Sched::Everest, xi).late_percent();
                let a = g.get(w, Sched::EverestAe, xi).late_percent();
                let ad = g.get(w, Sched::Adaptive, xi).late_percent();
                let best = e.min(a);
                let ratio = if best > 0.0 {
                    ad / best
                } else if ad == 0.0 {
                    1.0
                } else {
                    f64::INFINITY
                };
                let within = ad <= 1.1 * best || ad - best <= 0.001;
                n += 1;
                ok += within as usize;
                t.row([
                    g.ws[w].name.to_string(),
                    format!("{} us", (d * 1000.0) as u64),
                    x.to_string(),
                    fmt_val(e).to_string(),
                    fmt_val(a).to_string(),
                    fmt_val(ad).to_string(),
                    if ratio.is_finite() { fmt_val(ratio) } else { "inf".into() }.to_string(),
                    if within { "yes" } else { "**no**" }.to_string(),
                ]);
                let params = BTreeMap::from([
                    ("workload".into(), json!(g.ws[w].name)),
                    ("d_us".into(), json!(d * 1000.0)),
                    ("t_sw_over_D".into(), json!(x)),
                ]);
                out.comparisons.push(Comparison::new(
                    "adaptive_minus_best_late_percent",
                    params,
                    ad - best,
                    None,
                    "percentage points",
                    "section 7 (open problem)",
                ));
            }
        }
    }
    out.notes.push(t.into());
    out.notes.push(format!("Within 10% at {ok} of {n} points.").into());
}

/// Where Everest-AE stops beating Everest (the paper: AE better at small t_sw / D, about 0.1
/// and below, Everest at large).
fn crossover_rows(out: &mut Output, grids: &[(f64, Runs)]) {
    let mut cols = vec!["workload".to_string(), "D".to_string()];
    cols.extend(grids[0].1.xs.iter().map(|x| x.to_string()));
    let mut t = Table::new(cols).captioned(
        "Which of Everest and Everest-AE has fewer late packets (paper: Everest-AE at small t_sw / D, Everest at large).",
    );
    for (d, g) in grids {
        for w in 0..g.ws.len() {
            let mut row = vec![g.ws[w].name.to_string(), format!("{} us", (d * 1000.0) as u64)];
            for xi in 0..g.xs.len() {
                let e = g.get(w, Sched::Everest, xi).late;
                let a = g.get(w, Sched::EverestAe, xi).late;
                let who = if a < e {
                    "AE"
                } else if e < a {
                    "Everest"
                } else {
                    "tie"
                };
                row.push(who.to_string());
            }
            t.row(row);
        }
    }
    out.notes.push(t.into());
}

/// everest Fig. 5: mean delay vs t_sw / D at D = 2 ms.
pub fn fig5(opts: RunOptions, grid: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let xs: Vec<f64> = grid.values("runs", "t_sw_over_D");
    let g = Runs::new(
        opts,
        &mut out,
        &xs,
        &SCHEDS,
        |w, sched, ratio| Point { w, sched, processors: PROCESSORS, t_sw: ms(2.0 * ratio), d: D },
        progress,
    );
    g.table_and_plots(
        &mut out,
        "mean_delay",
        "us",
        "t_sw_over_D",
        "Fig. 5",
        |r, _| r.mean_delay_us(),
        true,
        true,
        "Fig. 5",
    );
    out
}
