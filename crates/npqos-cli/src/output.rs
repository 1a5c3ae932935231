//! Writes a results directory (DESIGN "Results layout"): `scenario.resolved.toml`,
//! `summary.json` (deterministic), `run.json` (wall clock, host: not deterministic),
//! `results.sqlite`, CSV exports, SVG plots, `report.md` and, for reproductions,
//! `comparison.json`. Every file is written to a temporary name and renamed into place, so a
//! crash never leaves a half-written file that looks complete.

use crate::plots;
use anyhow::{Context, Result};
use npqos_sim::results::{ClassRecord, CountRow, FlowRecord, Output, PlotKind, PlotSpec, RunResult};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `dir/name` atomically (temporary file in the same directory, then rename).
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let dst = dir.join(name);
    fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, &dst).with_context(|| format!("renaming {} to {}", tmp.display(), dst.display()))?;
    Ok(())
}

/// What kind of output directory this is, with the context its files need.
pub struct Meta {
    /// `run`, `reproduce` or `sweep-point`.
    pub kind: &'static str,
    pub seed: u64,
    /// Body of `scenario.resolved.toml` (without the meta table), if a scenario was run.
    pub resolved: Option<toml::Table>,
    /// Extra deterministic fields for summary.json.
    pub extra: serde_json::Map<String, Value>,
    /// Non-deterministic run metadata for run.json.
    pub run_info: serde_json::Map<String, Value>,
    pub seeds: Vec<u64>,
}

pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}
pub fn git_commit() -> &'static str {
    env!("NPQOS_GIT_COMMIT")
}

/// The deterministic summary of an output.
pub fn summary_json(out: &Output, meta: &Meta) -> Value {
    let mut scalars = serde_json::Map::new();
    for (name, mean, ci, unit) in &out.aggregate {
        scalars.insert(name.clone(), json!({"value": finite(*mean), "ci95": finite(*ci), "unit": unit}));
    }
    let runs: Vec<Value> = out
        .runs
        .iter()
        .zip(meta.seeds.iter().chain(std::iter::repeat(&meta.seed)))
        .map(|(r, seed)| {
            let sc: serde_json::Map<String, Value> = r.scalars.iter().map(|s| (s.name.clone(), finite(s.value))).collect();
            json!({"label": r.label, "seed": seed, "params": r.params, "complete": r.complete, "stop_reason": r.stop_reason,
                   "events": r.events, "sim_time_ns": r.sim_time_ns, "scalars": sc})
        })
        .collect();
    let mut m = serde_json::Map::new();
    m.insert("npqos_version".into(), json!(version()));
    m.insert("kind".into(), json!(meta.kind));
    m.insert("id".into(), json!(out.id));
    m.insert("seed".into(), json!(meta.seed));
    m.insert("complete".into(), json!(out.complete()));
    for (k, v) in &meta.extra {
        m.insert(k.clone(), v.clone());
    }
    m.insert("scalars".into(), Value::Object(scalars));
    m.insert("runs".into(), Value::Array(runs));
    Value::Object(m)
}

fn finite(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

/// Writes the whole results directory for `out` into `dir`.
pub fn write_all(dir: &Path, out: &Output, meta: &Meta) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating output directory {}", dir.display()))?;
    if let Some(resolved) = &meta.resolved {
        let mut t = resolved.clone();
        let mut m = toml::Table::new();
        if let Some(Value::String(name)) = meta.extra.get("scenario") {
            m.insert("scenario".into(), name.clone().into());
        }
        m.insert("seed".into(), (meta.seed as i64).into());
        m.insert("npqos_version".into(), version().into());
        m.insert("git_commit".into(), git_commit().into());
        t.insert("meta".into(), m.into());
        let text = format!(
            "# Every parameter of this run with defaults filled in (written by npqos).\n{}",
            toml::to_string(&t)?
        );
        write_atomic(dir, "scenario.resolved.toml", text.as_bytes())?;
    }
    let summary = summary_json(out, meta);
    write_atomic(dir, "summary.json", format!("{}\n", serde_json::to_string_pretty(&summary)?).as_bytes())?;
    let mut info = meta.run_info.clone();
    info.insert("npqos_version".into(), json!(version()));
    info.insert("git_commit".into(), json!(git_commit()));
    if !out.timings.is_empty() {
        info.insert("timings".into(), json!(out.timings));
    }
    write_atomic(dir, "run.json", format!("{}\n", serde_json::to_string_pretty(&Value::Object(info))?).as_bytes())?;
    if !out.comparisons.is_empty() || meta.kind == "reproduce" {
        let c = json!({"id": out.id, "comparisons": out.comparisons, "assumptions": out.assumptions});
        write_atomic(dir, "comparison.json", format!("{}\n", serde_json::to_string_pretty(&c)?).as_bytes())?;
    }
    write_sqlite(dir, out, meta)?;
    write_csvs(dir, out)?;
    let plot_files = write_plots(dir, out)?;
    write_atomic(dir, "report.md", report_md(out, meta, &plot_files).as_bytes())?;
    crate::report::write_html(dir)
}

fn write_sqlite(dir: &Path, out: &Output, meta: &Meta) -> Result<()> {
    let tmp = dir.join(".results.sqlite.tmp");
    let _ = fs::remove_file(&tmp);
    {
        let mut db = Connection::open(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        create_schema(&db)?;
        let tx = db.transaction()?;
        insert_output(&tx, out, meta, &Value::Null)?;
        tx.commit()?;
    }
    fs::rename(&tmp, dir.join("results.sqlite"))?;
    Ok(())
}

/// Creates the results schema (shared by run, reproduce and sweep databases).
pub fn create_schema(db: &Connection) -> Result<()> {
    db.execute_batch(
        "CREATE TABLE runs (run_id INTEGER PRIMARY KEY, experiment TEXT NOT NULL, label TEXT NOT NULL, params TEXT NOT NULL,
                            seed INTEGER NOT NULL, complete INTEGER NOT NULL, stop_reason TEXT NOT NULL, events INTEGER NOT NULL,
                            sim_time_ns INTEGER NOT NULL, point TEXT);
         CREATE TABLE scalars (run_id INTEGER NOT NULL REFERENCES runs(run_id), name TEXT NOT NULL, value REAL, unit TEXT NOT NULL);
         CREATE TABLE series (run_id INTEGER NOT NULL REFERENCES runs(run_id), name TEXT NOT NULL, x REAL NOT NULL, y REAL,
                              x_unit TEXT NOT NULL, unit TEXT NOT NULL);
         CREATE TABLE histograms (run_id INTEGER NOT NULL REFERENCES runs(run_id), name TEXT NOT NULL, lo REAL NOT NULL,
                                  hi REAL NOT NULL, count INTEGER NOT NULL, unit TEXT NOT NULL);
         CREATE TABLE comparisons (experiment TEXT NOT NULL, metric TEXT NOT NULL, params TEXT NOT NULL, ours REAL, paper REAL,
                                   unit TEXT NOT NULL, source TEXT NOT NULL);
         CREATE TABLE flows (run_id INTEGER NOT NULL REFERENCES runs(run_id), flow TEXT NOT NULL, class TEXT NOT NULL,
                             kind TEXT NOT NULL, offered_packets INTEGER NOT NULL, offered_bytes INTEGER NOT NULL,
                             offered_bytes_error INTEGER NOT NULL, sent_packets INTEGER NOT NULL, sent_bytes INTEGER NOT NULL,
                             dropped_packets INTEGER NOT NULL, dropped_by_reason TEXT NOT NULL, overlimits INTEGER NOT NULL,
                             backlog_packets INTEGER NOT NULL, backlog_bytes INTEGER NOT NULL, delay_mean_ns REAL,
                             delay_max_ns REAL);
         CREATE TABLE classes (run_id INTEGER NOT NULL REFERENCES runs(run_id), class TEXT NOT NULL,
                               offered_packets INTEGER NOT NULL, offered_bytes INTEGER NOT NULL, sent_packets INTEGER NOT NULL,
                               sent_bytes INTEGER NOT NULL, dropped_packets INTEGER NOT NULL, dropped_by_reason TEXT NOT NULL,
                               overlimits INTEGER NOT NULL, backlog_packets INTEGER NOT NULL, backlog_bytes INTEGER NOT NULL,
                               delay_mean_ns REAL, delay_max_ns REAL, delay_p50_ns REAL, delay_p99_ns REAL);
         CREATE TABLE detections (run_id INTEGER NOT NULL REFERENCES runs(run_id), class TEXT NOT NULL, what TEXT NOT NULL,
                                  who TEXT NOT NULL, at_ns INTEGER NOT NULL, window_start_ns INTEGER NOT NULL,
                                  count INTEGER NOT NULL);
         CREATE INDEX scalars_by_name ON scalars(name);",
    )?;
    Ok(())
}

/// Inserts every run of `out`; `point` (sweep parameters) is stored with each run.
pub fn insert_output(db: &Connection, out: &Output, meta: &Meta, point: &Value) -> Result<()> {
    let point_s = if point.is_null() { None } else { Some(point.to_string()) };
    for (i, r) in out.runs.iter().enumerate() {
        let seed = meta.seeds.get(i).copied().unwrap_or(meta.seed);
        db.execute(
            "INSERT INTO runs (experiment, label, params, seed, complete, stop_reason, events, sim_time_ns, point) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
            params![out.id, r.label, serde_json::to_string(&r.params)?, seed as i64, r.complete, r.stop_reason, r.events as i64, r.sim_time_ns as i64, point_s],
        )?;
        let id = db.last_insert_rowid();
        let mut st = db.prepare_cached("INSERT INTO scalars VALUES (?1,?2,?3,?4)")?;
        for s in &r.scalars {
            st.execute(params![id, s.name, s.value, s.unit])?;
        }
        let mut st = db.prepare_cached("INSERT INTO series VALUES (?1,?2,?3,?4,?5,?6)")?;
        for s in &r.series {
            for (x, y) in &s.points {
                st.execute(params![id, s.name, x, y, s.x_unit, s.unit])?;
            }
        }
        let mut st = db.prepare_cached("INSERT INTO histograms VALUES (?1,?2,?3,?4,?5,?6)")?;
        for h in &r.histograms {
            for (lo, hi, c) in &h.bins {
                st.execute(params![id, h.name, lo, hi, *c as i64, h.unit])?;
            }
        }
        insert_tables(db, id, r)?;
    }
    let mut st = db.prepare_cached("INSERT INTO comparisons VALUES (?1,?2,?3,?4,?5,?6,?7)")?;
    for c in &out.comparisons {
        st.execute(params![out.id, c.metric, serde_json::to_string(&c.params)?, c.ours, c.paper, c.unit, c.source])?;
    }
    Ok(())
}

/// A count row's drops by reason as a JSON object, in the run's order of reasons.
fn drops_json(r: &RunResult, c: &CountRow) -> String {
    let m: serde_json::Map<String, Value> =
        r.drop_reasons.iter().zip(&c.dropped).map(|(k, v)| (k.clone(), json!(v))).collect();
    Value::Object(m).to_string()
}

/// A count row's columns of the `flows` and `classes` tables, from `offered_packets` to
/// `delay_max_ns`.
fn count_values(r: &RunResult, c: &CountRow) -> [SqlValue; 11] {
    let n = |x: u64| SqlValue::Integer(x as i64);
    [
        n(c.offered_packets),
        n(c.offered_bytes),
        n(c.sent_packets),
        n(c.sent_bytes),
        n(c.dropped_packets),
        SqlValue::Text(drops_json(r, c)),
        n(c.overlimits),
        n(c.backlog_packets),
        n(c.backlog_bytes),
        SqlValue::Real(c.delay_mean_ns),
        SqlValue::Real(c.delay_max_ns),
    ]
}

/// The run's `flows` and `classes` rows (docs/pipeline.md).
fn insert_tables(db: &Connection, id: i64, r: &RunResult) -> Result<()> {
    let mut st = db.prepare_cached(
        "INSERT INTO flows (run_id, flow, class, kind, offered_bytes_error, offered_packets, offered_bytes, sent_packets,
                            sent_bytes, dropped_packets, dropped_by_reason, overlimits, backlog_packets, backlog_bytes,
                            delay_mean_ns, delay_max_ns) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)",
    )?;
    for f in &r.flows {
        let head = [
            SqlValue::Integer(id),
            SqlValue::Text(f.flow.clone()),
            SqlValue::Text(f.class.clone()),
            SqlValue::Text(f.kind.into()),
            SqlValue::Integer(f.offered_bytes_error as i64),
        ];
        st.execute(params_from_iter(head.into_iter().chain(count_values(r, &f.counts))))?;
    }
    let mut st = db.prepare_cached(
        "INSERT INTO classes (run_id, class, delay_p50_ns, delay_p99_ns, offered_packets, offered_bytes, sent_packets,
                              sent_bytes, dropped_packets, dropped_by_reason, overlimits, backlog_packets, backlog_bytes,
                              delay_mean_ns, delay_max_ns) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)",
    )?;
    for k in &r.classes {
        let head = [
            SqlValue::Integer(id),
            SqlValue::Text(k.class.clone()),
            SqlValue::Real(k.delay_p50_ns),
            SqlValue::Real(k.delay_p99_ns),
        ];
        st.execute(params_from_iter(head.into_iter().chain(count_values(r, &k.counts))))?;
    }
    let mut st = db.prepare_cached("INSERT INTO detections VALUES (?1,?2,?3,?4,?5,?6,?7)")?;
    for d in &r.detections {
        st.execute(params![id, d.class, d.what, d.who, d.at_ns as i64, d.window_start_ns as i64, d.count])?;
    }
    Ok(())
}

/// Reads back the runs a results directory's `results.sqlite` holds (labels, parameters,
/// scalars, series, histograms, in the order they were written) and their aggregate: what a
/// sweep needs of a point that finished earlier. NULL values (NaN when written) read as NaN.
pub fn read_output(dir: &Path) -> Result<Output> {
    let path = dir.join("results.sqlite");
    let db = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut out = Output::default();
    let mut ids = Vec::new();
    {
        let mut st = db.prepare(
            "SELECT run_id, experiment, label, params, complete, stop_reason, events, sim_time_ns FROM runs ORDER BY run_id",
        )?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            ids.push(r.get::<_, i64>(0)?);
            out.id = r.get(1)?;
            let params: String = r.get(3)?;
            out.runs.push(npqos_sim::results::RunResult {
                label: r.get(2)?,
                params: serde_json::from_str(&params).with_context(|| format!("{}: runs.params", path.display()))?,
                complete: r.get(4)?,
                stop_reason: r.get(5)?,
                events: r.get::<_, i64>(6)? as u64,
                sim_time_ns: r.get::<_, i64>(7)? as u64,
                ..Default::default()
            });
        }
    }
    let nan = |v: Option<f64>| v.unwrap_or(f64::NAN);
    for (id, run) in ids.iter().zip(out.runs.iter_mut()) {
        let mut st = db.prepare_cached("SELECT name, value, unit FROM scalars WHERE run_id = ?1 ORDER BY rowid")?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            run.scalars.push(npqos_sim::results::Scalar { name: r.get(0)?, value: nan(r.get(1)?), unit: r.get(2)? });
        }
        let mut st =
            db.prepare_cached("SELECT name, x, y, x_unit, unit FROM series WHERE run_id = ?1 ORDER BY rowid")?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            let name: String = r.get(0)?;
            let point = (r.get::<_, f64>(1)?, nan(r.get(2)?));
            match run.series.last_mut() {
                Some(s) if s.name == name => s.points.push(point),
                _ => run.series.push(npqos_sim::results::Series {
                    name,
                    x_unit: r.get(3)?,
                    unit: r.get(4)?,
                    points: vec![point],
                }),
            }
        }
        let mut st =
            db.prepare_cached("SELECT name, lo, hi, count, unit FROM histograms WHERE run_id = ?1 ORDER BY rowid")?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            let name: String = r.get(0)?;
            let bin = (r.get(1)?, r.get(2)?, r.get::<_, i64>(3)? as u64);
            match run.histograms.last_mut() {
                Some(h) if h.name == name => h.bins.push(bin),
                _ => run.histograms.push(npqos_sim::results::Histogram { name, unit: r.get(4)?, bins: vec![bin] }),
            }
        }
        read_tables(&db, *id, run).with_context(|| format!("{}: flows and classes", path.display()))?;
    }
    out.aggregate_runs();
    Ok(out)
}

/// A count row as [`count_values`] stored it, from column `at` on; the drops by reason in the
/// order of `reasons`.
fn read_counts(r: &rusqlite::Row<'_>, at: usize, reasons: &mut Vec<String>) -> Result<CountRow> {
    let n = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(at + i)? as u64) };
    let by_reason: serde_json::Map<String, Value> = serde_json::from_str(&r.get::<_, String>(at + 5)?)?;
    if reasons.is_empty() {
        reasons.extend(by_reason.keys().cloned());
    }
    let dropped = reasons.iter().map(|k| by_reason.get(k).and_then(Value::as_u64).unwrap_or(0)).collect();
    let real = |i: usize| -> rusqlite::Result<f64> { Ok(r.get::<_, Option<f64>>(at + i)?.unwrap_or(f64::NAN)) };
    Ok(CountRow {
        offered_packets: n(0)?,
        offered_bytes: n(1)?,
        sent_packets: n(2)?,
        sent_bytes: n(3)?,
        dropped_packets: n(4)?,
        dropped,
        overlimits: n(6)?,
        backlog_packets: n(7)?,
        backlog_bytes: n(8)?,
        delay_mean_ns: real(9)?,
        delay_max_ns: real(10)?,
    })
}

/// Reads back the run's `flows` and `classes` rows (a sweep collects its points so).
fn read_tables(db: &Connection, id: i64, run: &mut RunResult) -> Result<()> {
    const COUNTS: &str =
        "offered_packets, offered_bytes, sent_packets, sent_bytes, dropped_packets, dropped_by_reason, \
                          overlimits, backlog_packets, backlog_bytes, delay_mean_ns, delay_max_ns";
    let mut reasons = Vec::new();
    let mut st = db.prepare_cached(&format!(
        "SELECT flow, class, kind, offered_bytes_error, {COUNTS} FROM flows WHERE run_id = ?1 ORDER BY rowid"
    ))?;
    let mut rows = st.query([id])?;
    while let Some(r) = rows.next()? {
        let kind: String = r.get(2)?;
        run.flows.push(FlowRecord {
            flow: r.get(0)?,
            class: r.get(1)?,
            kind: ["exact", "heavy", "other"].into_iter().find(|k| *k == kind).context("flows.kind")?,
            offered_bytes_error: r.get::<_, i64>(3)? as u64,
            counts: read_counts(r, 4, &mut reasons)?,
        });
    }
    let mut st = db.prepare_cached(&format!(
        "SELECT class, delay_p50_ns, delay_p99_ns, {COUNTS} FROM classes WHERE run_id = ?1 ORDER BY rowid"
    ))?;
    let mut rows = st.query([id])?;
    while let Some(r) = rows.next()? {
        run.classes.push(ClassRecord {
            class: r.get(0)?,
            delay_p50_ns: r.get::<_, Option<f64>>(1)?.unwrap_or(f64::NAN),
            delay_p99_ns: r.get::<_, Option<f64>>(2)?.unwrap_or(f64::NAN),
            counts: read_counts(r, 3, &mut reasons)?,
        });
    }
    run.drop_reasons = reasons;
    // Databases written before packet functions have no such table.
    let has: i64 =
        db.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'detections'", [], |r| {
            r.get(0)
        })?;
    if has > 0 {
        let mut st = db.prepare_cached(
            "SELECT class, what, who, at_ns, window_start_ns, count FROM detections WHERE run_id = ?1 ORDER BY rowid",
        )?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            run.detections.push(npqos_sim::results::DetectionRecord {
                class: r.get(0)?,
                what: r.get(1)?,
                who: r.get(2)?,
                at_ns: r.get::<_, i64>(3)? as u64,
                window_start_ns: r.get::<_, i64>(4)? as u64,
                count: r.get(5)?,
            });
        }
    }
    Ok(())
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn write_csvs(dir: &Path, out: &Output) -> Result<()> {
    let mut sc = String::from("run,label,name,value,unit\n");
    let mut se = String::from("run,label,name,x,y,x_unit,unit\n");
    let mut hi = String::from("run,label,name,lo,hi,count,unit\n");
    for (i, r) in out.runs.iter().enumerate() {
        let l = csv_field(&r.label);
        for s in &r.scalars {
            let _ = writeln!(sc, "{i},{l},{},{},{}", csv_field(&s.name), s.value, csv_field(&s.unit));
        }
        for s in &r.series {
            for (x, y) in &s.points {
                let _ = writeln!(se, "{i},{l},{},{x},{y},{},{}", csv_field(&s.name), s.x_unit, s.unit);
            }
        }
        for h in &r.histograms {
            for (lo, hh, c) in &h.bins {
                let _ = writeln!(hi, "{i},{l},{},{lo},{hh},{c},{}", csv_field(&h.name), h.unit);
            }
        }
    }
    write_atomic(dir, "scalars.csv", sc.as_bytes())?;
    write_atomic(dir, "series.csv", se.as_bytes())?;
    write_atomic(dir, "histograms.csv", hi.as_bytes())?;
    write_tables_csv(dir, out)?;
    if !out.comparisons.is_empty() {
        let mut c = String::from("metric,params,ours,paper,unit,source\n");
        for r in &out.comparisons {
            let p = r.paper.map(|p| p.to_string()).unwrap_or_default();
            let _ = writeln!(
                c,
                "{},{},{},{p},{},{}",
                csv_field(&r.metric),
                csv_field(&serde_json::to_string(&r.params)?),
                r.ours,
                csv_field(&r.unit),
                csv_field(&r.source)
            );
        }
        write_atomic(dir, "comparison.csv", c.as_bytes())?;
    }
    Ok(())
}

/// `flows.csv` and `classes.csv` when a run kept flow or class counters: one row per flow or
/// class and run, the drops by reason as `dropped_<reason>` columns (the first run's reasons);
/// `detections.csv` when a packet function reported.
fn write_tables_csv(dir: &Path, out: &Output) -> Result<()> {
    let Some(first) = out.runs.iter().find(|r| !r.flows.is_empty() || !r.classes.is_empty()) else {
        return write_detections_csv(dir, out);
    };
    let reasons: String = first.drop_reasons.iter().map(|r| format!(",dropped_{r}")).collect();
    let counts = |c: &CountRow| {
        let drops: String = c.dropped.iter().map(|d| format!(",{d}")).collect();
        format!(
            "{},{},{},{},{}{drops},{},{},{},{},{}",
            c.offered_packets,
            c.offered_bytes,
            c.sent_packets,
            c.sent_bytes,
            c.dropped_packets,
            c.overlimits,
            c.backlog_packets,
            c.backlog_bytes,
            c.delay_mean_ns,
            c.delay_max_ns
        )
    };
    let head = format!("offered_packets,offered_bytes,sent_packets,sent_bytes,dropped_packets{reasons},overlimits,backlog_packets,backlog_bytes,delay_mean_ns,delay_max_ns");
    let mut fl = format!("run,label,flow,class,kind,{head},offered_bytes_error\n");
    let mut cl = format!("run,label,class,{head},delay_p50_ns,delay_p99_ns\n");
    for (i, r) in out.runs.iter().enumerate() {
        let l = csv_field(&r.label);
        for f in &r.flows {
            let _ = writeln!(
                fl,
                "{i},{l},{},{},{},{},{}",
                csv_field(&f.flow),
                csv_field(&f.class),
                f.kind,
                counts(&f.counts),
                f.offered_bytes_error
            );
        }
        for k in &r.classes {
            let _ = writeln!(
                cl,
                "{i},{l},{},{},{},{}",
                csv_field(&k.class),
                counts(&k.counts),
                k.delay_p50_ns,
                k.delay_p99_ns
            );
        }
    }
    if out.runs.iter().any(|r| !r.flows.is_empty()) {
        write_atomic(dir, "flows.csv", fl.as_bytes())?;
    }
    if out.runs.iter().any(|r| !r.classes.is_empty()) {
        write_atomic(dir, "classes.csv", cl.as_bytes())?;
    }
    write_detections_csv(dir, out)
}

/// `detections.csv` when a run's packet functions reported anything: one row per report.
fn write_detections_csv(dir: &Path, out: &Output) -> Result<()> {
    if out.runs.iter().all(|r| r.detections.is_empty()) {
        return Ok(());
    }
    let mut d = String::from("run,label,class,what,who,at_ns,window_start_ns,count\n");
    for (i, r) in out.runs.iter().enumerate() {
        for x in &r.detections {
            let _ = writeln!(
                d,
                "{i},{},{},{},{},{},{},{}",
                csv_field(&r.label),
                csv_field(&x.class),
                x.what,
                x.who,
                x.at_ns,
                x.window_start_ns,
                x.count
            );
        }
    }
    write_atomic(dir, "detections.csv", d.as_bytes())
}

/// Draws the experiment's own plots, one per time series and one per histogram (up to eight
/// runs each). Returns (file, title); a plot of zeros only has no file (its title says so).
fn write_plots(dir: &Path, out: &Output) -> Result<Vec<(String, String)>> {
    let mut specs: Vec<PlotSpec> = out.plots.clone();
    let shown: Vec<_> = out.runs.iter().take(8).collect();
    if let Some(first) = shown.first() {
        for s in &first.series {
            let lines = shown
                .iter()
                .filter_map(|r| r.series.iter().find(|x| x.name == s.name).map(|x| (r.label.clone(), x.points.clone())))
                .collect();
            // Series and histograms are named for code (`egress_backlog`); plots say it in words.
            let words = s.name.replace('_', " ");
            specs.push(PlotSpec {
                name: format!("series-{}", s.name),
                title: format!("{words} over time"),
                x_label: format!("time ({})", s.x_unit),
                y_label: format!("{words} ({})", s.unit),
                lines,
                kind: PlotKind::Lines,
                log_x: false,
                log_y: false,
                ..Default::default()
            });
        }
        for h in &first.histograms {
            if h.bins.is_empty() {
                continue;
            }
            let pts: Vec<(f64, f64)> = h.bins.iter().map(|(_, hi, c)| (*hi, *c as f64)).collect();
            let words = h.name.replace('_', " ");
            specs.push(PlotSpec {
                name: format!("hist-{}", h.name),
                title: format!("{words} distribution ({})", first.label),
                x_label: format!("{words} ({})", h.unit),
                y_label: "count".into(),
                lines: vec![(first.label.clone(), pts)],
                kind: PlotKind::Bars,
                log_x: true,
                log_y: false,
                ..Default::default()
            });
        }
    }
    let (mut specs, mut order, panels) = plots::arrange(specs);
    let mut style = plots::Style::new(&specs, &out.comparisons);
    for (name, span) in panels {
        style.set_span(&name, span);
    }
    if let Some(spec) = plots::agreement(&out.id, &out.comparisons) {
        style.set_guides(&spec.name, &plots::AGREEMENT_GUIDES);
        order.push(Ok(specs.len()));
        specs.push(spec);
    }
    let mut files = Vec::new();
    for entry in order {
        let spec = match entry {
            Ok(i) => &specs[i],
            Err(line) => {
                files.push((String::new(), line));
                continue;
            }
        };
        let name = format!("{}.svg", spec.name);
        let svg = plots::render_styled(spec, &style)?;
        write_atomic(dir, &name, svg.as_bytes())?;
        let mut title = spec.title.clone();
        let n = style.paper_points(&spec.name);
        if n > 0 {
            title = format!("{title} (hollow diamonds: the paper's {n} value{})", if n == 1 { "" } else { "s" });
        }
        files.push((name, title));
    }
    Ok(files)
}

/// Formats a number for tables: integers plainly, others with 4 significant digits.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    if v == v.trunc() && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let mag = v.abs().log10().floor() as i32;
    let decimals = (3 - mag).clamp(0, 9) as usize;
    format!("{v:.decimals$}")
}

fn report_md(out: &Output, meta: &Meta, plots: &[(String, String)]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# npqos {}: {}\n", meta.kind, out.id);
    let _ = writeln!(
        s,
        "npqos {} (commit {}), seed {}. Complete: **{}**.\n",
        version(),
        git_commit(),
        meta.seed,
        out.complete()
    );
    if !out.complete() {
        let _ = writeln!(s, "> **This run was interrupted or hit its event budget: the numbers below cover only the simulated time reached.**\n");
    }
    // Quantities the paper gives a number for come first; our values at the paper's points
    // where it gives none (it draws a curve, or the run is --quick) come after the plots.
    let (with_paper, without): (Vec<_>, Vec<_>) = out.comparisons.iter().partition(|c| c.paper.is_some());
    if !with_paper.is_empty() {
        let _ = writeln!(s, "## Ours beside the paper\n");
        let _ = writeln!(s, "| metric | params | ours | paper | diff | unit | source |\n|---|---|---|---|---|---|---|");
        for c in &with_paper {
            let p = c.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ");
            let (paper, diff) = match c.paper {
                Some(x) if x != 0.0 => (num(x), format!("{:+.1}%", (c.ours - x) / x.abs() * 100.0)),
                Some(x) => (num(x), format!("{:+}", num(c.ours - x))),
                None => ("—".into(), "—".into()),
            };
            let _ =
                writeln!(s, "| {} | {p} | {} | {paper} | {diff} | {} | {} |", c.metric, num(c.ours), c.unit, c.source);
        }
        s.push('\n');
    }
    if !out.aggregate.is_empty() {
        let n = out.runs.len();
        let _ = writeln!(
            s,
            "## Results{}\n",
            if n > 1 { format!(" (mean ± 95% CI over {n} runs)") } else { String::new() }
        );
        let _ = writeln!(s, "| quantity | value | unit |\n|---|---|---|");
        for (name, mean, ci, unit) in &out.aggregate {
            let v = if n > 1 { format!("{} ± {}", num(*mean), num(*ci)) } else { num(*mean) };
            let _ = writeln!(s, "| {name} | {v} | {unit} |");
        }
        s.push('\n');
    }
    if !plots.is_empty() {
        let _ = writeln!(s, "## Plots\n");
        for (f, t) in plots {
            match f.is_empty() {
                // A plot of zeros only: one line instead of an empty frame.
                true => {
                    let _ = writeln!(s, "{t}\n");
                }
                false => {
                    let _ = writeln!(s, "### {t}\n\n![{t}]({f})\n");
                }
            }
        }
    }
    if !out.timings.is_empty() {
        let _ =
            writeln!(s, "## Wall-clock measurements (this machine, this run; not deterministic, also in run.json)\n");
        let _ = writeln!(s, "| measurement | params | value | unit |\n|---|---|---|---|");
        for t in &out.timings {
            let p = t.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ");
            let _ = writeln!(s, "| {} | {p} | {} | {} |", t.name, num(t.value), t.unit);
        }
        s.push('\n');
    }
    if out.aggregate.is_empty() && !out.runs.is_empty() {
        // Runs are different configurations: one row each (after the plots: it can be long).
        let mut names: Vec<&str> = Vec::new();
        for r in &out.runs {
            for sc in &r.scalars {
                if !names.contains(&sc.name.as_str()) {
                    names.push(&sc.name);
                }
            }
        }
        let _ = writeln!(s, "## Runs\n");
        let _ = writeln!(s, "| run | {} |\n|---|{}", names.join(" | "), "---|".repeat(names.len()));
        for r in &out.runs {
            let vals: Vec<String> = names.iter().map(|n| r.get(n).map(num).unwrap_or_default()).collect();
            let _ = writeln!(s, "| {} | {} |", r.label, vals.join(" | "));
        }
        s.push('\n');
    }
    if !without.is_empty() {
        let _ = writeln!(s, "## Ours where the paper gives no number\n");
        let _ = writeln!(
            s,
            "The paper draws these as curves, or states them only at full scale; our values at its points:\n"
        );
        let _ = writeln!(s, "| metric | params | ours | unit | source |\n|---|---|---|---|---|");
        for c in &without {
            let p = c.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ");
            let _ = writeln!(s, "| {} | {p} | {} | {} | {} |", c.metric, num(c.ours), c.unit, c.source);
        }
        s.push('\n');
    }
    if !out.notes.is_empty() {
        let _ = writeln!(s, "## Notes\n");
        for n in &out.notes {
            let _ = writeln!(s, "{}\n", n.markdown());
        }
    }
    if !out.assumptions.is_empty() {
        let _ = writeln!(s, "## Assumptions (choices the paper leaves open)\n");
        for a in &out.assumptions {
            let _ = writeln!(s, "- {a}");
        }
        s.push('\n');
    }
    let _ = writeln!(s, "Files: `summary.json` (deterministic), `run.json` (wall clock, host), `results.sqlite` (tables runs, scalars, series, histograms, comparisons), `*.csv`.");
    s
}

/// The default output directory for a kind and name: `results/<kind>/<name>`.
pub fn default_dir(kind: &str, name: &str) -> PathBuf {
    PathBuf::from("results").join(kind).join(name)
}
