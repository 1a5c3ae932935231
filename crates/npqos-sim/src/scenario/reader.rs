//! [`Reader`]: typed values from one TOML table of a scenario, with every problem recorded under
//! its key path and every key nobody read reported as unknown.

use super::Problem;
use crate::units::{parse_duration, parse_fine_duration, parse_frequency, parse_rate, parse_size};
use npqos_core::{Duration, Rate};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Reads typed values from one TOML table, recording problems and the keys it consumed.
pub(crate) struct Reader<'a> {
    prefix: String,
    table: Option<&'a toml::Table>,
    used: BTreeSet<String>,
}

pub(crate) fn show(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

impl<'a> Reader<'a> {
    pub(crate) fn new(root: &'a toml::Table, name: &str, probs: &mut Vec<Problem>) -> Self {
        let table = match root.get(name) {
            None => None,
            Some(toml::Value::Table(t)) => Some(t),
            Some(v) => {
                probs.push(Problem {
                    key: name.into(),
                    value: Some(show(v)),
                    message: "expected a table ([section])".into(),
                });
                None
            }
        };
        Reader { prefix: name.into(), table, used: BTreeSet::new() }
    }
    /// A reader over section `name` of `parent`, which is the file itself (`outer` = None) or
    /// its table `outer` (`[reverse]`): problems name the key as `outer.name.key`.
    pub(crate) fn new_in(parent: &'a toml::Table, outer: Option<&str>, name: &str, probs: &mut Vec<Problem>) -> Self {
        let Some(o) = outer else { return Reader::new(parent, name, probs) };
        let prefix = format!("{o}.{name}");
        match parent.get(name) {
            None => Reader { prefix, table: None, used: BTreeSet::new() },
            Some(toml::Value::Table(t)) => Reader::from_table(t, prefix),
            Some(v) => {
                probs.push(Problem {
                    key: prefix.clone(),
                    value: Some(show(v)),
                    message: "expected a table ([section])".into(),
                });
                Reader { prefix, table: None, used: BTreeSet::new() }
            }
        }
    }
    /// A reader over a table that is not a top-level section (an entry of `[[services]]`),
    /// with `prefix` naming it in problems (`services[2]`).
    pub(crate) fn from_table(table: &'a toml::Table, prefix: String) -> Self {
        Reader { prefix, table: Some(table), used: BTreeSet::new() }
    }
    /// A string value (any string).
    pub(crate) fn string(&mut self, key: &str, default: &str, probs: &mut Vec<Problem>) -> String {
        self.string_with(key, default.to_string(), probs, "a string", |s| Ok(s.to_string()))
    }
    pub(crate) fn path(&self, key: &str) -> String {
        format!("{}.{key}", self.prefix)
    }
    fn raw(&mut self, key: &str) -> Option<&'a toml::Value> {
        self.used.insert(key.into());
        self.table.and_then(|t| t.get(key))
    }
    fn string_with<T>(
        &mut self,
        key: &str,
        default: T,
        probs: &mut Vec<Problem>,
        expected: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> T
    where
        T: Clone,
    {
        match self.raw(key) {
            None => default,
            Some(toml::Value::String(s)) => match parse(s) {
                Ok(v) => v,
                Err(m) => {
                    probs.push(Problem { key: self.path(key), value: Some(format!("{s:?}")), message: m });
                    default
                }
            },
            Some(v) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: format!("expected {expected} as a quoted string"),
                });
                default
            }
        }
    }
    pub(crate) fn duration(&mut self, key: &str, default: Duration, probs: &mut Vec<Problem>) -> Duration {
        self.string_with(key, default, probs, "a duration such as \"2ms\"", |s| parse_duration(s).map_err(|e| e.0))
    }
    /// A duration to the picosecond, in nanoseconds (hardware timing such as `"2.5ns"`).
    pub(crate) fn fine_duration(&mut self, key: &str, default_ns: f64, probs: &mut Vec<Problem>) -> f64 {
        self.string_with(key, default_ns, probs, "a duration such as \"2.5ns\"", |s| {
            parse_fine_duration(s).map_err(|e| e.0)
        })
    }
    /// A frequency in MHz (`"200MHz"`); it must be positive.
    pub(crate) fn frequency(&mut self, key: &str, default_mhz: f64, probs: &mut Vec<Problem>) -> f64 {
        self.string_with(key, default_mhz, probs, "a frequency such as \"200MHz\"", |s| match parse_frequency(s) {
            Ok(f) if f > 0.0 => Ok(f),
            Ok(_) => Err("expected a frequency above 0".into()),
            Err(e) => Err(e.0),
        })
    }
    pub(crate) fn rate(&mut self, key: &str, default: Rate, probs: &mut Vec<Problem>) -> Rate {
        self.string_with(key, default, probs, "a rate such as \"10Gbps\"", |s| parse_rate(s).map_err(|e| e.0))
    }
    pub(crate) fn size(&mut self, key: &str, default: u64, probs: &mut Vec<Problem>) -> u64 {
        self.string_with(key, default, probs, "a size such as \"1500B\"", |s| parse_size(s).map_err(|e| e.0))
    }
    pub(crate) fn choice(&mut self, key: &str, default: &str, allowed: &[&str], probs: &mut Vec<Problem>) -> String {
        let list = allowed.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", ");
        self.string_with(key, default.to_string(), probs, &format!("one of {list}"), |s| {
            if allowed.contains(&s) {
                Ok(s.to_string())
            } else {
                Err(format!("expected one of {list}"))
            }
        })
    }
    /// One of the names of `T` (`npqos_core::names::Named`), `default` when absent.
    pub(crate) fn named<T: npqos_core::names::Named>(&mut self, key: &str, default: T, probs: &mut Vec<Problem>) -> T {
        let names: Vec<&str> = T::ALL.iter().map(|v| v.name()).collect();
        let name = self.choice(key, default.name(), &names, probs);
        T::named(&name).unwrap_or(default)
    }
    pub(crate) fn int(&mut self, key: &str, default: i64, min: i64, max: i64, probs: &mut Vec<Problem>) -> i64 {
        match self.raw(key) {
            None => default,
            Some(toml::Value::Integer(i)) if (min..=max).contains(i) => *i,
            Some(v @ toml::Value::Integer(_)) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: format!("expected an integer from {min} to {max}"),
                });
                default
            }
            Some(v) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: "expected an integer".into(),
                });
                default
            }
        }
    }
    /// `"auto"` (`None`, also when absent) or an integer from `min` to `max`.
    pub(crate) fn int_or_auto(&mut self, key: &str, min: i64, max: i64, probs: &mut Vec<Problem>) -> Option<i64> {
        match self.raw(key) {
            None => None,
            Some(toml::Value::String(s)) if s == "auto" => None,
            Some(toml::Value::Integer(i)) if (min..=max).contains(i) => Some(*i),
            Some(v) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: format!("expected \"auto\" or an integer from {min} to {max}"),
                });
                None
            }
        }
    }
    pub(crate) fn float(
        &mut self,
        key: &str,
        default: f64,
        probs: &mut Vec<Problem>,
        ok: impl Fn(f64) -> bool,
        expected: &str,
    ) -> f64 {
        let v = match self.raw(key) {
            None => return default,
            Some(toml::Value::Float(f)) => *f,
            Some(toml::Value::Integer(i)) => *i as f64,
            Some(v) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: format!("expected a number {expected}"),
                });
                return default;
            }
        };
        if v.is_finite() && ok(v) {
            v
        } else {
            probs.push(Problem {
                key: self.path(key),
                value: Some(v.to_string()),
                message: format!("expected a number {expected}"),
            });
            default
        }
    }
    pub(crate) fn boolean(&mut self, key: &str, default: bool, probs: &mut Vec<Problem>) -> bool {
        match self.raw(key) {
            None => default,
            Some(toml::Value::Boolean(b)) => *b,
            Some(v) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: "expected true or false".into(),
                });
                default
            }
        }
    }
    /// A required non-empty array of existing trace files, relative to `base_dir`.
    pub(crate) fn files(&mut self, key: &str, base_dir: &Path, probs: &mut Vec<Problem>) -> Vec<PathBuf> {
        let mut files = Vec::new();
        match self.raw(key) {
            Some(toml::Value::Array(a)) if !a.is_empty() => {
                for (i, v) in a.iter().enumerate() {
                    match v {
                        toml::Value::String(s) if base_dir.join(s).is_dir() => {
                            // A directory stands for its captures, sorted by name.
                            let d = base_dir.join(s);
                            let mut found: Vec<PathBuf> = std::fs::read_dir(&d)
                                .map(|rd| {
                                    rd.filter_map(|e| e.ok().map(|e| e.path()))
                                        .filter(|p| {
                                            p.is_file()
                                                && p.extension()
                                                    .is_some_and(|x| x == "pcap" || x == "pcapng" || x == "cap")
                                        })
                                        .collect()
                                })
                                .unwrap_or_default();
                            found.sort();
                            if found.is_empty() {
                                probs.push(Problem {
                                    key: format!("{}[{i}]", self.path(key)),
                                    value: Some(format!("{s:?}")),
                                    message: format!("no .pcap, .pcapng or .cap file in directory {}", d.display()),
                                });
                            }
                            files.extend(found);
                        }
                        toml::Value::String(s) => {
                            let p = base_dir.join(s);
                            if !p.is_file() {
                                probs.push(Problem {
                                    key: format!("{}[{i}]", self.path(key)),
                                    value: Some(format!("{s:?}")),
                                    message: format!("no such file ({})", p.display()),
                                });
                            }
                            files.push(p);
                        }
                        other => probs.push(Problem {
                            key: format!("{}[{i}]", self.path(key)),
                            value: Some(show(other)),
                            message: "expected a file path string".into(),
                        }),
                    }
                }
            }
            Some(v) => probs.push(Problem {
                key: self.path(key),
                value: Some(show(v)),
                message: "expected a non-empty array of pcap/pcapng paths".into(),
            }),
            None => probs.push(Problem {
                key: self.path(key),
                value: None,
                message: "required here: an array of pcap/pcapng paths".into(),
            }),
        }
        files
    }
    /// The raw value of `key`, marked as read (for values a caller parses itself).
    pub(crate) fn value(&mut self, key: &str) -> Option<&'a toml::Value> {
        self.raw(key)
    }
    pub(crate) fn present(&self, key: &str) -> bool {
        self.table.is_some_and(|t| t.contains_key(key))
    }
    /// A list of choices from `allowed` (each may appear once).
    pub(crate) fn choices(
        &mut self,
        key: &str,
        default: &[&str],
        allowed: &[&str],
        probs: &mut Vec<Problem>,
    ) -> Vec<String> {
        let list = allowed.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", ");
        match self.raw(key) {
            None => default.iter().map(|s| s.to_string()).collect(),
            Some(toml::Value::Array(a)) => {
                let mut out: Vec<String> = Vec::new();
                for v in a {
                    match v.as_str() {
                        Some(s) if allowed.contains(&s) && !out.iter().any(|o| o == s) => out.push(s.into()),
                        _ => probs.push(Problem {
                            key: self.path(key),
                            value: Some(show(v)),
                            message: format!("expected an array of distinct values from {list}"),
                        }),
                    }
                }
                out
            }
            Some(v) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: format!("expected an array of values from {list}"),
                });
                default.iter().map(|s| s.to_string()).collect()
            }
        }
    }
    /// A list of numbers that each pass `ok` (`None` when the key is absent).
    pub(crate) fn floats(
        &mut self,
        key: &str,
        probs: &mut Vec<Problem>,
        ok: impl Fn(f64) -> bool,
        expected: &str,
    ) -> Option<Vec<f64>> {
        let v = self.raw(key)?;
        let bad = |probs: &mut Vec<Problem>| {
            probs.push(Problem {
                key: self.path(key),
                value: Some(show(v)),
                message: format!("expected an array of numbers {expected}"),
            })
        };
        let Some(a) = v.as_array() else {
            bad(probs);
            return None;
        };
        let xs: Vec<f64> = a.iter().filter_map(|x| x.as_float().or_else(|| x.as_integer().map(|i| i as f64))).collect();
        if xs.len() != a.len() || xs.iter().any(|&x| !(x.is_finite() && ok(x))) {
            bad(probs);
            return None;
        }
        Some(xs)
    }
    /// Marks `key` as known without reading it (a key that belongs to another choice, checked
    /// with [`present`](Self::present)).
    pub(crate) fn consume(&mut self, key: &str) {
        self.used.insert(key.into());
    }
    /// Keys that belong to another choice (`why`, as `source = "trace"`): each is consumed, and
    /// each one present is a problem "does not apply to `why`".
    pub(crate) fn not_applicable<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k str>,
        why: &str,
        probs: &mut Vec<Problem>,
    ) {
        for k in keys {
            self.consume(k);
            if self.present(k) {
                probs.push(Problem { key: self.path(k), value: None, message: format!("does not apply to {why}") });
            }
        }
    }
    /// A duration that must be positive: zero is reported as a problem (and returned).
    pub(crate) fn positive_duration(&mut self, key: &str, default: Duration, probs: &mut Vec<Problem>) -> Duration {
        let d = self.duration(key, default, probs);
        if d.is_zero() {
            probs.push(Problem {
                key: self.path(key),
                value: Some(format!("\"{d}\"")),
                message: "expected a positive duration".into(),
            });
        }
        d
    }
    /// Reports keys of the table that nobody read.
    pub(crate) fn finish(self, probs: &mut Vec<Problem>) {
        if let Some(t) = self.table {
            for (k, v) in t {
                if !self.used.contains(k) {
                    let known = self.used.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
                    probs.push(Problem {
                        key: self.path(k),
                        value: Some(show(v)),
                        message: format!("unknown key (known keys here: {known})"),
                    });
                }
            }
        }
    }
}

/// Refuses `run.duration` and `run.warmup` for a model whose run length is set by its own
/// stream (`model`, and the keys that set it, name the remedy in the message).
pub(crate) fn no_run_length(root: &toml::Table, model: &str, set_by: &str, probs: &mut Vec<Problem>) {
    let Some(r) = root.get("run").and_then(|r| r.as_table()) else { return };
    for k in ["duration", "warmup"] {
        if r.contains_key(k) {
            probs.push(Problem {
                key: format!("run.{k}"),
                value: None,
                message: format!("does not apply to model = {model:?}: {set_by} the run's length"),
            });
        }
    }
}
