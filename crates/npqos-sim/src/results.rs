//! The in-memory result of a run: named scalars, time series and histograms, plus whether the
//! run completed. The CLI writes these to `summary.json`, `results.sqlite`, CSV and plots; this
//! module does no I/O.

use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scalar {
    pub name: String,
    pub value: f64,
    pub unit: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    pub name: String,
    pub x_unit: String,
    pub unit: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Histogram {
    pub name: String,
    pub unit: String,
    /// (lower edge, upper edge, count); edges in `unit`.
    pub bins: Vec<(f64, f64, u64)>,
}

/// One run (one replication, or one point of an experiment).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunResult {
    /// Short label, unique within its output (`rep0`, `overload=1.29`, ...).
    pub label: String,
    /// The parameters that distinguish this run.
    pub params: BTreeMap<String, serde_json::Value>,
    pub scalars: Vec<Scalar>,
    pub series: Vec<Series>,
    pub histograms: Vec<Histogram>,
    pub complete: bool,
    pub stop_reason: String,
    pub events: u64,
    pub sim_time_ns: u64,
    /// The names of the drop reasons of `flows` and `classes` rows, in their order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drop_reasons: Vec<String>,
    /// Per-flow counters (`flows.csv`, table `flows`; docs/pipeline.md), when the model
    /// keeps them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowRecord>,
    /// Per-class counters (`classes.csv`, table `classes`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassRecord>,
    /// What the services' packet functions detected (`detections.csv`, table `detections`;
    /// docs/everest.md, "The prototype's services"), in the order found.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub detections: Vec<DetectionRecord>,
}

/// One report of a service's packet function: the class (service) whose processor found it,
/// what (`port_scan`, `syn_flood`), who (the scanning source or the flooded destination), when
/// (the packet that crossed the threshold, ns from the run's start), the window it counted
/// from, and the count at that packet (distinct ports or hosts, or half-open connections).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DetectionRecord {
    pub class: String,
    pub what: String,
    pub who: String,
    pub at_ns: u64,
    pub window_start_ns: u64,
    pub count: u32,
}

impl DetectionRecord {
    /// The pipeline's reports as records, classes named from `services`.
    pub fn from_found(found: &[npqos_core::pipeline::router::Found], services: &[String]) -> Vec<Self> {
        found
            .iter()
            .map(|f| DetectionRecord {
                class: services[f.service as usize].clone(),
                what: f.detection.what.into(),
                who: f.detection.who_text(),
                at_ns: f.detection.at_ns,
                window_start_ns: f.detection.window_start_ns,
                count: f.detection.count,
            })
            .collect()
    }
}

/// Counters of one flow or class, in tc's vocabulary (sent, dropped, overlimits, backlog).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CountRow {
    pub offered_packets: u64,
    pub offered_bytes: u64,
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub dropped_packets: u64,
    /// By reason, in the order of [`RunResult::drop_reasons`].
    pub dropped: Vec<u64>,
    pub overlimits: u64,
    pub backlog_packets: u64,
    pub backlog_bytes: u64,
    pub delay_mean_ns: f64,
    pub delay_max_ns: f64,
}

impl CountRow {
    /// Adds `o`'s counts to these (the mean delay weighted by the packets sent, the largest
    /// delay the larger).
    pub fn add(&mut self, o: &CountRow) {
        let sent = self.sent_packets + o.sent_packets;
        if sent > 0 {
            self.delay_mean_ns =
                (self.delay_mean_ns * self.sent_packets as f64 + o.delay_mean_ns * o.sent_packets as f64) / sent as f64;
        }
        self.offered_packets += o.offered_packets;
        self.offered_bytes += o.offered_bytes;
        self.sent_packets = sent;
        self.sent_bytes += o.sent_bytes;
        self.dropped_packets += o.dropped_packets;
        self.dropped.resize(self.dropped.len().max(o.dropped.len()), 0);
        for (a, b) in self.dropped.iter_mut().zip(&o.dropped) {
            *a += b;
        }
        self.overlimits += o.overlimits;
        self.backlog_packets += o.backlog_packets;
        self.backlog_bytes += o.backlog_bytes;
        self.delay_max_ns = self.delay_max_ns.max(o.delay_max_ns);
    }
}

impl<const R: usize> From<&npqos_core::pipeline::Counts<R>> for CountRow {
    fn from(c: &npqos_core::pipeline::Counts<R>) -> Self {
        CountRow {
            offered_packets: c.offered_packets,
            offered_bytes: c.offered_bytes,
            sent_packets: c.sent_packets,
            sent_bytes: c.sent_bytes,
            dropped_packets: c.dropped_packets(),
            dropped: c.dropped.to_vec(),
            overlimits: c.overlimits,
            backlog_packets: c.backlog_packets(),
            backlog_bytes: c.backlog_bytes(),
            delay_mean_ns: c.delay_mean_ns(),
            delay_max_ns: c.delay_max_ns as f64,
        }
    }
}

/// One row of `flows.csv`: a flow of the exact table (`kind` "exact"), one of the heaviest
/// flows past it ("heavy": only `offered_bytes`, an over-estimate by at most
/// `offered_bytes_error`, and `offered_packets`, a lower bound, are known), or every flow past
/// the table together ("other", flow "*").
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowRecord {
    pub flow: String,
    pub class: String,
    pub kind: &'static str,
    pub counts: CountRow,
    pub offered_bytes_error: u64,
}

impl FlowRecord {
    /// A run's flow rows from its [`npqos_core::pipeline::FlowIndex`] (docs/pipeline.md, "Flow
    /// and class counters"), the same for every driver: the exact table's flows in the order
    /// first seen (`exact(row)` their counts), the sketch's heaviest flows past it, then every
    /// flow past it together when any was counted (`other`); `class` names a class, `reasons`
    /// is the number of drop reasons.
    pub fn table(
        index: &npqos_core::pipeline::FlowIndex,
        exact: impl Fn(usize) -> CountRow,
        other: CountRow,
        reasons: usize,
        class: impl Fn(u32) -> String,
    ) -> Vec<FlowRecord> {
        let mut flows = Vec::new();
        for (row, (key, c)) in index.rows().iter().enumerate() {
            let (flow, class, counts) = (key.to_string(), class(*c), exact(row));
            flows.push(FlowRecord { flow, class, kind: "exact", counts, offered_bytes_error: 0 });
        }
        for h in index.heavy() {
            let counts = CountRow {
                offered_packets: h.packets,
                offered_bytes: h.bytes,
                dropped: vec![0; reasons],
                ..Default::default()
            };
            let (flow, class) = (h.key.to_string(), class(h.class));
            flows.push(FlowRecord { flow, class, kind: "heavy", counts, offered_bytes_error: h.error });
        }
        if other.offered_packets > 0 {
            let (flow, class) = ("*".into(), "*".into());
            flows.push(FlowRecord { flow, class, kind: "other", counts: other, offered_bytes_error: 0 });
        }
        flows
    }
}

/// One row of `classes.csv`: a class (a service of the router) with its delay percentiles.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassRecord {
    pub class: String,
    pub counts: CountRow,
    pub delay_p50_ns: f64,
    pub delay_p99_ns: f64,
}

impl RunResult {
    pub fn scalar(&mut self, name: &str, value: f64, unit: &str) {
        self.scalars.push(Scalar { name: name.into(), value, unit: unit.into() });
    }
    pub fn get(&self, name: &str) -> Option<f64> {
        self.scalars.iter().find(|s| s.name == name).map(|s| s.value)
    }
}

/// One compared quantity of a reproduction (a row of `comparison.json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub metric: String,
    pub params: BTreeMap<String, serde_json::Value>,
    pub ours: f64,
    /// The paper's number, `None` where the paper gives none.
    pub paper: Option<f64>,
    pub unit: String,
    /// Where in the paper (table, figure, equation).
    pub source: String,
}

impl Comparison {
    pub fn new(
        metric: &str,
        params: BTreeMap<String, serde_json::Value>,
        ours: f64,
        paper: Option<f64>,
        unit: &str,
        source: &str,
    ) -> Self {
        Comparison { metric: metric.into(), params, ours, paper, unit: unit.into(), source: source.into() }
    }
}

/// What a plot of an experiment shows (drawn by the CLI).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PlotSpec {
    /// File stem of the SVG.
    pub name: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// (legend, points)
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
    pub kind: PlotKind,
    /// Logarithmic x axis (x values must be positive).
    pub log_x: bool,
    /// Logarithmic y axis (points with y <= 0 are not drawn).
    pub log_y: bool,
    /// Where the paper's numbers for compared quantities go on this plot ([`PlotSpec::mark`]),
    /// resolved into `paper` once the numbers are known ([`Output::place_paper_values`]).
    pub marks: Vec<PaperMark>,
    /// The paper's values drawn on this plot: (label of the curve, (x, y)) as hollow diamonds
    /// in the curve's colour. A compared quantity whose `ours` is exactly one plotted point is
    /// drawn there without being listed here.
    pub paper: Vec<(String, Vec<(f64, f64)>)>,
    /// A categorical x axis: `x_categories[i]` names x = i (schedulers, traffic mixes).
    pub x_categories: Vec<String>,
}

/// Where a compared quantity's paper number goes on a plot.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PaperMark {
    /// The curve it belongs to (its legend label).
    pub curve: String,
    pub metric: String,
    pub params: BTreeMap<String, serde_json::Value>,
    pub place: Place,
    /// The plot's unit per unit of the comparison (100 where a fraction is plotted in %).
    pub scale: f64,
}

/// How a paper number becomes a point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// The number is a y value at this x (a value at a setting).
    AtX(f64),
    /// The number is an x position at this y (where a curve crosses a level: the thread count
    /// reaching 95% of the peak, the largest weight still at line rate).
    AtY(f64),
}

impl PlotSpec {
    /// Draws the paper's number for the compared quantity `metric` at `params`, if the
    /// comparison has one, on curve `curve` at `place`.
    pub fn mark(&mut self, curve: &str, metric: &str, params: &BTreeMap<String, serde_json::Value>, place: Place) {
        self.mark_scaled(curve, metric, params, place, 1.0);
    }
    /// [`PlotSpec::mark`] for a plot that shows the quantity times `scale` (a fraction in %).
    pub fn mark_scaled(
        &mut self,
        curve: &str,
        metric: &str,
        params: &BTreeMap<String, serde_json::Value>,
        place: Place,
        scale: f64,
    ) {
        let (curve, metric, params) = (curve.into(), metric.into(), params.clone());
        self.marks.push(PaperMark { curve, metric, params, place, scale });
    }
}

/// How a plot draws its points.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlotKind {
    /// Lines through the points (time series, sweeps).
    #[default]
    Lines,
    /// Markers only (discrete categories such as packet sizes).
    Points,
    /// A histogram: bar `i` spans from the previous point's x to its own x.
    Bars,
}

/// Everything a model or experiment produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Output {
    pub id: String,
    pub runs: Vec<RunResult>,
    /// Aggregated scalars over runs (mean and 95% CI half-width), name -> (mean, ci, unit).
    /// Only for runs that are replications of one configuration; experiments whose runs are
    /// different points leave it empty (the report then lists the runs).
    pub aggregate: Vec<(String, f64, f64, String)>,
    pub comparisons: Vec<Comparison>,
    pub assumptions: Vec<String>,
    pub plots: Vec<PlotSpec>,
    /// The report's notes, in order: paragraphs (analysis, differences from the paper) and
    /// tables, rendered in one place (`npqos_cli::output`).
    pub notes: Vec<Note>,
    /// Wall-clock measurements (e.g. ns per heap operation on this machine). Not deterministic,
    /// so they go to `run.json` and the report, never to `summary.json` or `comparison.json`.
    pub timings: Vec<Timing>,
}

impl Output {
    /// Resolves every plot's [`PaperMark`]s against the comparisons: a mark whose comparison
    /// has a paper number becomes a point of [`PlotSpec::paper`]. Panics on a mark that names no
    /// comparison: the experiment is wrong (caught by its quick test).
    pub fn place_paper_values(&mut self) {
        for spec in &mut self.plots {
            for m in std::mem::take(&mut spec.marks) {
                let c = self.comparisons.iter().find(|c| c.metric == m.metric && c.params == m.params).unwrap_or_else(
                    || panic!("plot {} marks {} at {:?}: no such comparison", spec.name, m.metric, m.params),
                );
                let Some(p) = c.paper else { continue };
                let point = match m.place {
                    Place::AtX(x) => (x, p * m.scale),
                    Place::AtY(y) => (p * m.scale, y),
                };
                match spec.paper.iter_mut().find(|(l, _)| *l == m.curve) {
                    Some((_, pts)) => pts.push(point),
                    None => spec.paper.push((m.curve, vec![point])),
                }
            }
        }
    }
}

/// A note of a report: a Markdown paragraph or a table.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Note {
    Text(String),
    Table(Table),
}

impl Note {
    /// The note as Markdown.
    pub fn markdown(&self) -> String {
        match self {
            Note::Text(t) => t.clone(),
            Note::Table(t) => t.markdown(),
        }
    }
}

impl From<String> for Note {
    fn from(s: String) -> Self {
        Note::Text(s)
    }
}
impl From<&str> for Note {
    fn from(s: &str) -> Self {
        Note::Text(s.to_string())
    }
}
impl From<Table> for Note {
    fn from(t: Table) -> Self {
        Note::Table(t)
    }
}

/// A table of a report: a caption, column headers and rows of formatted cells. Experiments
/// fill tables; how a table is drawn (Markdown in report.md) is decided in one place.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Table {
    /// Text above the table (may be empty).
    pub caption: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = S>) -> Self {
        Table { caption: String::new(), columns: columns.into_iter().map(Into::into).collect(), rows: Vec::new() }
    }
    /// The table with a caption above it.
    pub fn captioned(mut self, caption: impl Into<String>) -> Self {
        self.caption = caption.into();
        self
    }
    /// Appends a row of cells (as many as the columns).
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let r: Vec<String> = cells.into_iter().map(Into::into).collect();
        debug_assert_eq!(r.len(), self.columns.len(), "a row of {} cells in a table of {:?}", r.len(), self.columns);
        self.rows.push(r);
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    /// The table in Markdown: the caption and a blank line if there is one, the header, the
    /// separator, one line per row.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        if !self.caption.is_empty() {
            s.push_str(&self.caption);
            s.push_str("\n\n");
        }
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        s.push_str(&line(&self.columns));
        s.push_str(&format!("|{}\n", "---|".repeat(self.columns.len())));
        for r in &self.rows {
            s.push_str(&line(r));
        }
        s
    }
}

/// One wall-clock measurement of an experiment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timing {
    pub name: String,
    pub params: BTreeMap<String, serde_json::Value>,
    pub value: f64,
    pub unit: String,
}

impl Output {
    pub fn complete(&self) -> bool {
        self.runs.iter().all(|r| r.complete)
    }

    /// Scalar `name` of the run labelled `label`.
    pub fn run_scalar(&self, label: &str, name: &str) -> Option<f64> {
        self.runs.iter().find(|r| r.label == label).and_then(|r| r.get(name))
    }

    /// Fills `aggregate` with the mean and Student-t 95% confidence half-width of every
    /// scalar over the runs (half-width 0 for a single run).
    pub fn aggregate_runs(&mut self) {
        self.aggregate.clear();
        let Some(first) = self.runs.first() else {
            return;
        };
        for s in &first.scalars {
            let vals: Vec<f64> = self.runs.iter().filter_map(|r| r.get(&s.name)).collect();
            let n = vals.len() as f64;
            let mean = vals.iter().sum::<f64>() / n;
            let ci = if vals.len() > 1 {
                let var = vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
                t95(vals.len() - 1) * (var / n).sqrt()
            } else {
                0.0
            };
            self.aggregate.push((s.name.clone(), mean, ci, s.unit.clone()));
        }
    }
}

/// Two-sided 95% Student-t quantile for `df` degrees of freedom.
pub fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => T[df - 1],
        _ => 1.96 + 2.4 / df as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_marks_become_points_where_the_comparison_has_a_paper_number() {
        let at = |v: i64| BTreeMap::from([("n".to_string(), serde_json::json!(v))]);
        let mut out = Output {
            comparisons: vec![
                Comparison::new("ratio", at(1), 4.0, Some(5.0), "x", "Fig. 1"),
                Comparison::new("ratio", at(2), 6.0, None, "x", "Fig. 1"),
                Comparison::new("threads", at(1), 12.0, Some(18.0), "threads", "text"),
                Comparison::new("hit", at(1), 0.31, Some(0.3), "", "text"),
            ],
            plots: vec![PlotSpec { name: "p".into(), lines: vec![("c".into(), vec![])], ..Default::default() }],
            ..Default::default()
        };
        let p = &mut out.plots[0];
        p.mark("c", "ratio", &at(1), Place::AtX(1.0));
        p.mark("c", "ratio", &at(2), Place::AtX(2.0)); // no paper number: nothing drawn
        p.mark("c", "threads", &at(1), Place::AtY(60.0));
        p.mark_scaled("d", "hit", &at(1), Place::AtX(32.0), 100.0);
        out.place_paper_values();
        let p = &out.plots[0];
        assert!(p.marks.is_empty());
        assert_eq!(
            p.paper,
            vec![("c".to_string(), vec![(1.0, 5.0), (18.0, 60.0)]), ("d".to_string(), vec![(32.0, 30.0)])]
        );
    }

    #[test]
    #[should_panic(expected = "no such comparison")]
    fn a_mark_naming_no_comparison_is_a_defect() {
        let mut out = Output { plots: vec![PlotSpec::default()], ..Default::default() };
        out.plots[0].mark("c", "nothing", &BTreeMap::new(), Place::AtX(1.0));
        out.place_paper_values();
    }

    #[test]
    fn a_table_renders_as_markdown_with_its_caption() {
        let mut t = Table::new(["scheduler", "late %"]).captioned("Late packets.");
        t.row(["Everest".to_string(), format!("{:.2}", 1.234)]);
        t.row(["Static", "7"]);
        assert_eq!(
            t.markdown(),
            "Late packets.\n\n| scheduler | late % |\n|---|---|\n| Everest | 1.23 |\n| Static | 7 |\n"
        );
        assert_eq!(Note::from(Table::new(["a"])).markdown(), "| a |\n|---|\n");
        assert_eq!(Note::from("text").markdown(), "text");
    }
}
