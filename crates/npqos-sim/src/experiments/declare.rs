//! What an experiment declares besides its code: the grid it sweeps and the numbers its paper
//! states, with where the paper states them.
//!
//! The grid runner ([`super::run`]) builds an experiment's [`Grid`] and hands it to the
//! experiment's per-point code, which reads its sweep values from it, so the grid `npqos list ID`
//! shows is the one that runs. The paper's numbers live only in [`PaperValue`] tables: experiment
//! code writes our numbers with `paper: None`, and the runner fills in the paper's number and
//! source for each compared quantity a declaration matches. The one exception is a bound the
//! paper gives as a formula (eq 13, eq 18), which the experiment evaluates for its own flows and
//! sets itself; its source names the equation.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// A parameter value in a [`PaperValue`]'s setting.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum At {
    Int(i64),
    Num(f64),
    Text(&'static str),
}

impl At {
    /// Whether a compared quantity's parameter value is this one.
    fn matches(&self, v: &Value) -> bool {
        match self {
            At::Int(i) => v.as_i64() == Some(*i) || v.as_f64() == Some(*i as f64),
            At::Num(x) => v.as_f64() == Some(*x),
            At::Text(s) => v.as_str() == Some(s),
        }
    }
    /// The value as JSON.
    pub fn json(&self) -> Value {
        match self {
            At::Int(i) => Value::from(*i),
            At::Num(x) => Value::from(*x),
            At::Text(s) => Value::from(*s),
        }
    }
}

/// One number the paper states: the quantity (`metric`, as in comparison.json), the setting it
/// is stated for (parameters a compared quantity must have; it may have more), the value (in the
/// unit of the compared quantity) and where the paper says it.
#[derive(Clone, Copy, Debug)]
pub struct PaperValue {
    pub metric: &'static str,
    pub at: &'static [(&'static str, At)],
    pub value: f64,
    pub source: &'static str,
    pub compared: Compared,
}

/// When a [`PaperValue`] is set beside one of our numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compared {
    /// In quick and full runs.
    Always,
    /// Only in full runs: the `--quick` setting differs from the paper's (fewer queues, shorter
    /// runs) even where the parameters shown coincide.
    FullRuns,
    /// Never: a number we have no counterpart for (the paper's GEM5 cycles, for example),
    /// shown for reference in the experiment's tables.
    Reference,
}

impl PaperValue {
    /// A value compared in quick and full runs.
    pub const fn new(
        metric: &'static str,
        at: &'static [(&'static str, At)],
        value: f64,
        source: &'static str,
    ) -> Self {
        PaperValue { metric, at, value, source, compared: Compared::Always }
    }
    /// A value compared only in full runs.
    pub const fn full(
        metric: &'static str,
        at: &'static [(&'static str, At)],
        value: f64,
        source: &'static str,
    ) -> Self {
        PaperValue { metric, at, value, source, compared: Compared::FullRuns }
    }
    /// A value shown for reference, never compared.
    pub const fn reference(
        metric: &'static str,
        at: &'static [(&'static str, At)],
        value: f64,
        source: &'static str,
    ) -> Self {
        PaperValue { metric, at, value, source, compared: Compared::Reference }
    }
    /// Whether this is the paper's number for `metric` at `params`.
    pub fn matches(&self, metric: &str, params: &BTreeMap<String, Value>) -> bool {
        self.metric == metric && self.at.iter().all(|(k, a)| params.get(*k).is_some_and(|v| a.matches(v)))
    }
    /// The setting as JSON (for `npqos list --json`).
    pub fn at_json(&self) -> BTreeMap<String, Value> {
        self.at.iter().map(|(k, a)| (k.to_string(), a.json())).collect()
    }
}

/// The paper's number to set beside ours for `metric` at `params` among `table`, if it states
/// one (`quick`: not those compared only in full runs; never reference values). Panics if two
/// declarations match: the table is wrong.
pub fn lookup<'a>(
    table: &'a [PaperValue],
    metric: &str,
    params: &BTreeMap<String, Value>,
    quick: bool,
) -> Option<&'a PaperValue> {
    let wanted = |p: &PaperValue| match p.compared {
        Compared::Always => true,
        Compared::FullRuns => !quick,
        Compared::Reference => false,
    };
    one(table.iter().filter(|p| wanted(p) && p.matches(metric, params)), metric, params)
}

/// The paper's number for `metric` at `params`, whether compared or not (for drawing the
/// paper's values beside ours in a plot or a table).
pub fn stated(table: &[PaperValue], metric: &str, params: &BTreeMap<String, Value>) -> Option<f64> {
    one(table.iter().filter(|p| p.matches(metric, params)), metric, params).map(|p| p.value)
}

/// [`stated`] with the setting given as pairs.
pub fn stated_at(table: &[PaperValue], metric: &str, at: &[(&str, Value)]) -> Option<f64> {
    stated(table, metric, &at.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
}

fn one<'a>(
    mut hits: impl Iterator<Item = &'a PaperValue>,
    metric: &str,
    params: &BTreeMap<String, Value>,
) -> Option<&'a PaperValue> {
    let first = hits.next();
    assert!(hits.next().is_none(), "two paper values declared for {metric} at {params:?}");
    first
}

/// One swept parameter: its name (as in the runs' `params`), unit and values in sweep order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Axis {
    pub name: String,
    pub unit: String,
    pub values: Vec<Value>,
}

/// One sweep of an experiment: every combination of its axes is a point (an experiment with a
/// single computation has one sweep with no axes: one point).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sweep {
    pub name: String,
    pub axes: Vec<Axis>,
}

impl Sweep {
    pub fn points(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }
}

/// An experiment's grid: its sweeps.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Grid {
    pub sweeps: Vec<Sweep>,
}

impl Grid {
    /// A grid of one sweep named `name` with no axes yet.
    pub fn one(name: &str) -> Self {
        Grid::default().sweep(name)
    }
    /// Adds a sweep named `name`; following [`Grid::axis`] calls add to it.
    pub fn sweep(mut self, name: &str) -> Self {
        self.sweeps.push(Sweep { name: name.into(), axes: Vec::new() });
        self
    }
    /// Adds an axis to the last sweep.
    pub fn axis<T: Serialize>(mut self, name: &str, unit: &str, values: impl IntoIterator<Item = T>) -> Self {
        let values = values.into_iter().map(|v| serde_json::to_value(v).expect("plain values")).collect();
        let s = self.sweeps.last_mut().expect("Grid::sweep before Grid::axis");
        s.axes.push(Axis { name: name.into(), unit: unit.into(), values });
        self
    }
    /// Points over all sweeps.
    pub fn points(&self) -> usize {
        self.sweeps.iter().map(Sweep::points).sum()
    }
    /// The values of axis `axis` of sweep `sweep`, as `T`. Panics when the experiment asks for
    /// an axis its grid does not declare (a defect of the experiment, caught by its quick test).
    pub fn values<T: serde::de::DeserializeOwned>(&self, sweep: &str, axis: &str) -> Vec<T> {
        let s = self.sweeps.iter().find(|s| s.name == sweep).unwrap_or_else(|| panic!("no sweep {sweep:?}"));
        let a = s.axes.iter().find(|a| a.name == axis).unwrap_or_else(|| panic!("no axis {axis:?} in {sweep:?}"));
        a.values.iter().map(|v| serde_json::from_value(v.clone()).expect("axis values of the asked type")).collect()
    }
    /// The single value of a one-value axis.
    pub fn value<T: serde::de::DeserializeOwned>(&self, sweep: &str, axis: &str) -> T {
        let mut v = self.values(sweep, axis);
        assert_eq!(v.len(), 1, "axis {axis:?} of {sweep:?} has one value");
        v.pop().expect("one value")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_paper_value_matches_its_setting_and_no_other() {
        const T: &[PaperValue] = &[
            PaperValue::full("offchip", &[("queues", At::Int(1000)), ("locked", At::Text("2KB"))], 5.0, "Table II"),
            PaperValue::new("offchip", &[("queues", At::Int(1000)), ("locked", At::Text("4KB"))], 4.0, "Table II"),
            PaperValue::new("ratio", &[("overload", At::Num(1.29))], 2.7, "Table X"),
        ];
        let p = |pairs: &[(&str, Value)]| pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let two = p(&[("queues", json!(1000)), ("locked", json!("2KB")), ("seed", json!(3))]);
        assert_eq!(lookup(T, "offchip", &two, false).unwrap().value, 5.0);
        assert!(lookup(T, "offchip", &two, true).is_none(), "full-only values are not compared in quick runs");
        let four = p(&[("queues", json!(1000.0)), ("locked", json!("4KB"))]);
        assert_eq!(lookup(T, "offchip", &four, true).unwrap().value, 4.0);
        assert!(lookup(T, "offchip", &p(&[("queues", json!(1000))]), false).is_none(), "a missing key never matches");
        assert!(lookup(T, "ratio", &p(&[("overload", json!(1.3))]), false).is_none());
        assert!(lookup(T, "other", &four, false).is_none());
        const R: &[PaperValue] = &[PaperValue::reference("cycles", &[], 32.0, "Table IV")];
        assert!(lookup(R, "cycles", &p(&[]), false).is_none(), "reference values are never compared");
        assert_eq!(stated(R, "cycles", &p(&[])), Some(32.0));
    }

    #[test]
    fn a_grid_gives_back_its_values() {
        let g = Grid::one("runs").axis("queues", "1", [1000u32, 10000]).axis("period_us", "us", [100u64]).sweep("b");
        assert_eq!(g.values::<u32>("runs", "queues"), vec![1000, 10000]);
        assert_eq!(g.value::<u64>("runs", "period_us"), 100);
        assert_eq!(g.points(), 3, "two points and one with no axes");
    }
}
