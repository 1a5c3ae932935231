//! End-to-end tests of the `npqos` command: the contract of DESIGN.md.

mod common;
use common::*;
use std::path::Path;

const SMALL: &str = "[run]\nseed = 5\nduration = \"20ms\"\nreplications = 4\n[link]\nrate = \"1Gbps\"\n[queues]\ncount = 32\nbuffer = \"16KiB\"\n[traffic]\noverload = 1.1\narrivals = \"onoff\"\non_mean = \"1ms\"\noff_mean = \"1ms\"\n";

fn write_scenario(dir: &Path, text: &str) -> std::path::PathBuf {
    let p = dir.join("s.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn version_help_and_list() {
    let o = run(&["--version"]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("npqos "));
    for cmd in ["run", "reproduce", "trace", "model", "sweep"] {
        let o = run(&[cmd, "--help"]);
        assert!(o.status.success(), "{cmd}");
        if cmd != "trace" {
            assert!(stdout(&o).contains("Examples"), "{cmd} --help has examples");
        }
    }
    let o = run(&["list"]);
    let out = stdout(&o);
    assert!(out.lines().all(|l| l.split_once('\t').is_some_and(|(id, d)| id.contains('-') && !d.is_empty())), "{out}");
    assert!(out.contains("kim-table1\t"));
    // `npqos list ID`: the declared grid (full and quick) and the paper's numbers.
    let o = run(&["list", "kim-table2"]);
    let out = stdout(&o);
    assert!(out.contains("queues (queues) = 1000, 10000, 100000, 1000000") && out.contains("2273204"), "{out}");
    assert!(out.contains("grid with --quick: 4 points") && out.contains("(full runs only)"), "{out}");
    assert!(out.contains("implied alpha [2 points]"), "the labelled variant's sweep: {out}");
    let o = run(&["list", "kim-nope"]);
    assert_eq!(o.status.code(), Some(2));
    // `npqos models`: every scenario model, one per line, name tab description; each name is
    // accepted as `model = ...` and an unknown one is refused with the list.
    let o = run(&["models"]);
    assert!(o.status.success());
    let out = stdout(&o);
    let names: Vec<&str> = out.lines().map(|l| l.split_once('\t').expect("name\tdescription").0).collect();
    assert!(names.contains(&"link") && names.contains(&"kim"), "{out}");
    let d = tempfile::tempdir().unwrap();
    for name in &names {
        // lap's and qcache's run lengths are their streams': they have no run.duration.
        let run_table = match *name {
            "lap" => "[traffic]\npackets = 100\n",
            "qcache" => "[workload]\noperations = 100\n",
            _ => "[run]\nduration = \"1ms\"\n",
        };
        let s = write_scenario(d.path(), &format!("model = {name:?}\n{run_table}"));
        let o = run(&["run", s.to_str().unwrap(), "--quiet", "--out", d.path().join(name).to_str().unwrap()]);
        assert!(o.status.success(), "model = {name:?}: {}", stderr(&o));
    }
    let s = write_scenario(d.path(), "model = \"nosuch\"\n");
    let o = run(&["run", s.to_str().unwrap(), "--quiet"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("expected one of \"link\", \"kim\""), "{}", stderr(&o));
}

#[test]
fn same_seed_same_bytes_whatever_the_thread_count() {
    let d = tempfile::tempdir().unwrap();
    let s = write_scenario(d.path(), SMALL);
    let mut summaries = vec![];
    for (threads, out) in [("1", "a"), ("1", "b"), ("2", "c")] {
        let out = d.path().join(out);
        let o = run(&["run", s.to_str().unwrap(), "--threads", threads, "--quiet", "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        summaries.push(std::fs::read(out.join("summary.json")).unwrap());
        for f in [
            "scenario.resolved.toml",
            "run.json",
            "results.sqlite",
            "scalars.csv",
            "series.csv",
            "report.md",
            "series-backlog.svg",
            "hist-delay.svg",
        ] {
            assert!(out.join(f).is_file(), "{f} written");
        }
    }
    assert_eq!(summaries[0], summaries[1], "same seed twice");
    assert_eq!(summaries[0], summaries[2], "1 and 2 worker threads");
    let v: serde_json::Value = serde_json::from_slice(&summaries[0]).unwrap();
    assert_eq!(v["complete"], true);
    assert_eq!(v["runs"].as_array().unwrap().len(), 4);
    // A different seed gives different numbers.
    let out = d.path().join("other");
    let o = run(&["run", s.to_str().unwrap(), "--seed", "6", "--quiet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success());
    assert_ne!(std::fs::read(out.join("summary.json")).unwrap(), summaries[0]);
    // summary.json holds no wall-clock time or absolute path; run.json does.
    let text = String::from_utf8(summaries[0].clone()).unwrap();
    assert!(!text.contains(d.path().to_str().unwrap()) && !text.contains("wall_clock"));
    let resolved = std::fs::read_to_string(d.path().join("a/scenario.resolved.toml")).unwrap();
    assert!(
        resolved.contains("seed = 5") && resolved.contains("git_commit") && resolved.contains("npqos_version"),
        "{resolved}"
    );
}

/// A kim scenario runs end to end, and its heap agrees with `npqos model kim` for the same
/// setting (one core's share of 1e6 queues: 10,000 queues at 100 kbps).
#[test]
fn kim_scenario_runs_and_agrees_with_the_model() {
    let d = tempfile::tempdir().unwrap();
    let s = write_scenario(
        d.path(),
        "model = \"kim\"\n[run]\nduration = \"6s\"\nwarmup = \"2s\"\n[link]\nrate = \"1Gbps\"\n[queues]\ncount = 10000\n[traffic]\noverload = 1.29\n[shaper]\ncores = 1\n",
    );
    let out = d.path().join("k");
    let o = run(&["run", s.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let heap = v["runs"][0]["scalars"]["heap_mean_per_core"].as_f64().unwrap();
    let o = run(&[
        "model",
        "kim",
        "--queues",
        "1e4",
        "--link",
        "1Gbps",
        "--cores",
        "1",
        "--overload",
        "1.29",
        "--arrivals",
        "exponential",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let model = m["results"]["renewal_heap_mean_per_core"]["value"].as_f64().unwrap();
    assert!((model / heap - 1.0).abs() < 0.05, "model {model} simulation {heap}");
    assert!(std::fs::read_to_string(out.join("scenario.resolved.toml")).unwrap().contains("[shaper]"));
}

#[test]
fn results_sqlite_is_queryable() {
    let d = tempfile::tempdir().unwrap();
    let s = write_scenario(d.path(), SMALL);
    let out = d.path().join("r");
    assert!(run(&["run", s.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]).status.success());
    let db = rusqlite::Connection::open(out.join("results.sqlite")).unwrap();
    let runs: i64 = db.query_row("SELECT count(*) FROM runs", [], |r| r.get(0)).unwrap();
    assert_eq!(runs, 4);
    let tput: f64 =
        db.query_row("SELECT avg(value) FROM scalars WHERE name = 'utilization'", [], |r| r.get(0)).unwrap();
    assert!(tput > 0.5 && tput <= 1.0, "{tput}");
    let pts: i64 = db.query_row("SELECT count(*) FROM series WHERE name = 'backlog'", [], |r| r.get(0)).unwrap();
    assert_eq!(pts, 4 * 100);
    let bins: i64 = db.query_row("SELECT sum(count) FROM histograms WHERE name = 'delay'", [], |r| r.get(0)).unwrap();
    assert!(bins > 0);
}

/// A router run writes its flow and class counters as flows.csv, classes.csv and the `flows`
/// and `classes` tables, which agree with each other and with the run's scalars.
#[test]
fn router_flows_and_classes_are_written() {
    let d = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/router-synthetic.toml"))
        .unwrap()
        .replace("duration = \"500ms\"", "duration = \"20ms\"");
    let s = write_scenario(d.path(), &format!("{text}\n[stats]\nflows = 50\nheavy_flows = 5\n"));
    let out = d.path().join("r");
    let o = run(&["run", s.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let flows = std::fs::read_to_string(out.join("flows.csv")).unwrap();
    let header: Vec<&str> = flows.lines().next().unwrap().split(',').collect();
    for k in ["flow", "class", "kind", "sent_packets", "dropped_ingress_buffer_full", "overlimits", "backlog_packets"] {
        assert!(header.contains(&k), "flows.csv has {k}: {header:?}");
    }
    assert_eq!(flows.lines().count(), 1 + 50 + 5 + 1, "50 exact rows, 5 heavy, 1 for the rest");
    let classes = std::fs::read_to_string(out.join("classes.csv")).unwrap();
    assert_eq!(classes.lines().count(), 1 + 3, "web, dns, other");
    let db = rusqlite::Connection::open(out.join("results.sqlite")).unwrap();
    let q = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    let offered = q("SELECT CAST(value AS INTEGER) FROM scalars WHERE name = 'offered_packets'");
    assert_eq!(q("SELECT sum(offered_packets) FROM flows WHERE kind != 'heavy'"), offered);
    assert_eq!(q("SELECT sum(offered_packets) FROM classes"), offered);
    assert_eq!(q("SELECT count(*) FROM flows WHERE kind = 'exact'"), 50);
    let json: String = db.query_row("SELECT dropped_by_reason FROM classes LIMIT 1", [], |r| r.get(0)).unwrap();
    assert!(json.contains("\"egress_buffer_full\":"), "{json}");

    // A sweep's top-level results.sqlite collects every point's rows, read back from the
    // point's own database.
    let sw = d.path().join("sw");
    let o =
        run(&["sweep", s.to_str().unwrap(), "--set", "stats.flows=10,20", "--quiet", "--out", sw.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let top = rusqlite::Connection::open(sw.join("results.sqlite")).unwrap();
    let q = |sql: &str| -> i64 { top.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(q("SELECT count(*) FROM flows WHERE kind = 'exact'"), 30);
    assert_eq!(q("SELECT count(*) FROM classes"), 6);
    let point = rusqlite::Connection::open(sw.join("point-0001/results.sqlite")).unwrap();
    let rows = |db: &rusqlite::Connection, sql: &str| -> Vec<String> {
        let mut st = db.prepare(sql).unwrap();
        st.query_map([], |r| r.get::<_, String>(0)).unwrap().map(|r| r.unwrap()).collect()
    };
    let cols =
        "flow || class || kind || offered_packets || sent_packets || dropped_by_reason || overlimits || delay_mean_ns";
    assert_eq!(
        rows(
            &top,
            &format!("SELECT {cols} FROM flows JOIN runs USING (run_id) WHERE point LIKE '%20%' ORDER BY flows.rowid")
        ),
        rows(&point, &format!("SELECT {cols} FROM flows ORDER BY rowid")),
        "the sweep's rows are the point's"
    );
}

#[test]
fn reproduce_quick_writes_comparison_json() {
    let d = tempfile::tempdir().unwrap();
    // Two experiments, not `all`: every quick reproduction runs in npqos-sim's tests, which
    // check every experiment's paper numbers against its declarations
    // (`every_paper_number_comes_from_a_declaration`); this checks what reproduce writes.
    let o = run(&["reproduce", "kim-table1", "kim-table10", "--quick", "--quiet", "--out", d.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let c: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("kim-table1/comparison.json")).unwrap()).unwrap();
    let rows = c["comparisons"].as_array().unwrap();
    assert!(rows.len() >= 12);
    for r in rows {
        for k in ["metric", "params", "ours", "paper", "unit", "source"] {
            assert!(r.get(k).is_some(), "row has {k}: {r}");
        }
    }
    assert!(rows.iter().any(|r| r["paper"].is_null()), "quantities without a paper number carry null");
    assert!(!c["assumptions"].as_array().unwrap().is_empty());
    let report = std::fs::read_to_string(d.path().join("kim-table1/report.md")).unwrap();
    assert!(report.contains("| imix_percent |") && report.contains("Table I"));
    check_paper_values_come_from_the_declarations(d.path());
}

/// Every paper number in the comparison.json of the quick reproductions under `root` is one the
/// experiment declares (`npqos list --json`) for that quantity and setting, with its source;
/// every declared value compared in quick runs is set wherever its setting occurs; and every
/// declared metric occurs in the quick run, except those of the trace workloads when the nDPI
/// corpus is absent. (The same check of every experiment, on the library's output, is
/// npqos-sim's `every_paper_number_comes_from_a_declaration`.)
fn check_paper_values_come_from_the_declarations(root: &Path) {
    let o = run(&["list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let decls: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let matches = |p: &serde_json::Value, row: &serde_json::Value| {
        p["metric"] == row["metric"]
            && p["at"].as_object().unwrap().iter().all(|(k, v)| {
                row["params"].get(k).is_some_and(|x| x == v || x.as_f64().is_some() && x.as_f64() == v.as_f64())
            })
    };
    let (mut set, mut declared) = (0, 0);
    let mut experiments = 0;
    for e in decls.as_array().unwrap() {
        let id = e["id"].as_str().unwrap();
        if !root.join(id).is_dir() {
            continue;
        }
        experiments += 1;
        let c: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join(id).join("comparison.json")).unwrap()).unwrap();
        let rows = c["comparisons"].as_array().unwrap();
        let paper = e["paper"].as_array().unwrap();
        for row in rows.iter().filter(|r| !r["paper"].is_null()) {
            let p = paper
                .iter()
                .find(|p| p["compared"] == "always" && matches(p, row))
                .unwrap_or_else(|| panic!("{id}: a paper number no declaration gives: {row}"));
            assert_eq!((&row["paper"], &row["source"]), (&p["value"], &p["source"]), "{id}: {row}");
            set += 1;
        }
        for p in paper.iter().filter(|p| p["compared"] != "reference") {
            declared += 1;
            let hits: Vec<&serde_json::Value> = rows.iter().filter(|r| matches(p, r)).collect();
            if p["compared"] == "always" {
                assert!(hits.iter().all(|r| r["paper"] == p["value"]), "{id}: {p} not set on {hits:?}");
            }
            let trace = ["ndpi", "edge", "core"].iter().any(|w| p["at"]["workload"] == *w);
            if !trace || npqos_sim::experiments::dqs::ndpi_dir().is_some() {
                // A quantity of that name with every parameter the declaration names (a full-only
                // value's setting may not occur in a quick run, but its parameter names do).
                let keys = p["at"].as_object().unwrap();
                assert!(
                    rows.iter()
                        .any(|r| r["metric"] == p["metric"] && keys.keys().all(|k| r["params"].get(k).is_some())),
                    "{id}: no quantity {} with parameters {:?}",
                    p["metric"],
                    keys.keys().collect::<Vec<_>>()
                );
            }
        }
    }
    assert!(
        experiments >= 2 && set >= 12 && declared >= 12,
        "{experiments} experiments, {set} paper numbers set, {declared} declared"
    );
}

#[test]
fn sweep_runs_the_grid_with_one_row_per_run() {
    let d = tempfile::tempdir().unwrap();
    let s = write_scenario(d.path(), &SMALL.replace("replications = 4", "replications = 1"));
    let out = d.path().join("sw");
    let o = run(&[
        "sweep",
        s.to_str().unwrap(),
        "--set",
        "traffic.overload=0.5,1.5",
        "--set",
        "queues.count=4,8,16",
        "--jobs",
        "2",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let db = rusqlite::Connection::open(out.join("results.sqlite")).unwrap();
    let runs: i64 = db.query_row("SELECT count(*) FROM runs", [], |r| r.get(0)).unwrap();
    assert_eq!(runs, 6);
    let distinct: i64 = db.query_row("SELECT count(DISTINCT point) FROM runs", [], |r| r.get(0)).unwrap();
    assert_eq!(distinct, 6);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["points"].as_array().unwrap().len(), 6);
    assert!(out.join("point-0005/summary.json").is_file());
    assert!(out.join("jobs.json").is_file());
    assert!(out.join("sweep-utilization.svg").is_file());
    // Overload 1.5 must drop, 0.5 must not.
    let low: f64 = db.query_row("SELECT max(value) FROM scalars s JOIN runs r USING(run_id) WHERE name='drop_fraction' AND point LIKE '%\"0.5\"%'", [], |r| r.get(0)).unwrap();
    let high: f64 = db.query_row("SELECT min(value) FROM scalars s JOIN runs r USING(run_id) WHERE name='drop_fraction' AND point LIKE '%\"1.5\"%'", [], |r| r.get(0)).unwrap();
    assert!(low < 0.01 && high > 0.1, "low {low} high {high}");
    // A sweep value that breaks validation is reported with its point.
    let o =
        run(&["sweep", s.to_str().unwrap(), "--set", "queues.count=4,0", "--quiet", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("queues.count=0"), "{}", stderr(&o));
}

#[test]
fn a_resolved_scenario_runs_again_to_the_same_summary() {
    let d = tempfile::tempdir().unwrap();
    let s = write_scenario(d.path(), SMALL);
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let o = run(&["run", s.to_str().unwrap(), "--quiet", "--out", a.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let resolved = a.join("scenario.resolved.toml");
    assert!(std::fs::read_to_string(&resolved).unwrap().contains("scenario = \"s\""));
    let o = run(&["run", resolved.to_str().unwrap(), "--quiet", "--out", b.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Same name (from [meta]), same seed, same bytes.
    assert_eq!(std::fs::read(a.join("summary.json")).unwrap(), std::fs::read(b.join("summary.json")).unwrap());
    // [meta] is checked like every table.
    let text = std::fs::read_to_string(&resolved).unwrap().replace("[meta]", "[meta]\nsenario = \"x\"");
    let s2 = d.path().join("bad.toml");
    std::fs::write(&s2, text).unwrap();
    let o = run(&["run", s2.to_str().unwrap(), "--quiet"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("meta.senario"), "{}", stderr(&o));
}

#[test]
fn a_sweep_run_again_runs_only_its_unfinished_points() {
    let d = tempfile::tempdir().unwrap();
    let s = write_scenario(d.path(), &SMALL.replace("replications = 4", "replications = 1"));
    let out = d.path().join("sw");
    let args = ["sweep", s.to_str().unwrap(), "--set", "queues.count=4,8,16", "--out", out.to_str().unwrap()];
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read(out.join("sweep.csv")).unwrap();
    let mtime = |p: &str| std::fs::metadata(out.join(p).join("summary.json")).unwrap().modified().unwrap();
    let kept = mtime("point-0000");
    // Each point is `npqos run` of its resolved scenario, byte for byte.
    let again = d.path().join("again");
    let o = run(&[
        "run",
        out.join("point-0001/scenario.resolved.toml").to_str().unwrap(),
        "--quiet",
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(again.join("summary.json")).unwrap(),
        std::fs::read(out.join("point-0001/summary.json")).unwrap()
    );
    std::fs::remove_dir_all(out.join("point-0002")).unwrap();
    std::fs::create_dir(out.join(".point-0001.tmp-1-0")).unwrap();
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("2 of 3 points already finished"), "{}", stderr(&o));
    assert_eq!(mtime("point-0000"), kept);
    assert_eq!(std::fs::read(out.join("sweep.csv")).unwrap(), csv);
    assert!(!out.join(".point-0001.tmp-1-0").exists());
    // Another seed is another sweep: nothing is reused.
    let mut with_seed = args.to_vec();
    with_seed.extend(["--seed", "9"]);
    let o = run(&with_seed);
    assert!(o.status.success() && !stderr(&o).contains("already finished"), "{}", stderr(&o));
}

#[test]
fn sweep_dask_without_the_python_package_is_bad_input() {
    let d = tempfile::tempdir().unwrap();
    let s = write_scenario(d.path(), SMALL);
    let o = npqos()
        .args(["sweep", s.to_str().unwrap(), "--set", "queues.count=4,8", "--dask", "tcp://127.0.0.1:8786", "--quiet"])
        .env("NPQOS_PYTHON", "/nonexistent/python3")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--dask runs the sweep through the npqos Python package"), "{}", stderr(&o));
}

/// `npqos` with SIGINT set to `disposition` in the child (whatever this test process inherited:
/// a background job of a shell without job control starts with SIGINT ignored).
#[cfg(target_os = "linux")]
fn npqos_with_sigint(disposition: libc::sighandler_t) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut c = npqos();
    // SAFETY: signal() is async-signal-safe, and the closure touches nothing else.
    unsafe {
        c.pre_exec(move || {
            libc::signal(libc::SIGINT, disposition);
            Ok(())
        });
    }
    c
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_writes_partial_results_marked_incomplete() {
    let d = tempfile::tempdir().unwrap();
    let s =
        write_scenario(d.path(), "[run]\nduration = \"1000s\"\n[queues]\ncount = 1000\n[link]\nrate = \"10Gbps\"\n");
    let out = d.path().join("int");
    let child = npqos_with_sigint(libc::SIG_DFL)
        .args(["run", s.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let ok = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(ok.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130));
    assert!(stderr(&o).contains("interrupted: partial results (complete: false) written to"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["complete"], false);
    assert_eq!(v["runs"][0]["stop_reason"], "interrupted");
    assert!(v["runs"][0]["scalars"]["delivered_packets"].as_f64().unwrap() > 0.0);
    assert!(std::fs::read_dir(&out).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".tmp")));
}

/// Started with SIGINT ignored (as `cmd &` in a script), a run keeps it ignored and finishes.
#[cfg(target_os = "linux")]
#[test]
fn an_inherited_ignored_sigint_stays_ignored() {
    let d = tempfile::tempdir().unwrap();
    let s = write_scenario(d.path(), "[run]\nduration = \"10s\"\n[queues]\ncount = 16\n[link]\nrate = \"10Gbps\"\n");
    let out = d.path().join("ign");
    let mut child = npqos_with_sigint(libc::SIG_IGN)
        .args(["run", s.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // The signal must land while the run is going, or the test shows nothing.
    assert!(child.try_wait().unwrap().is_none(), "the run ended before the signal; lengthen it");
    let ok = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(ok.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["complete"], true);
}

#[test]
fn model_kim_matches_the_papers_worked_numbers() {
    // kim section 1: filling 1,000,000 queues every 10 us is 1e11 fills per second.
    let o = run(&["model", "kim", "--queues", "1000000", "--link", "100Gbps", "--fill-period", "10us", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"]["periodic_fills_per_s"]["value"], 1e11);
    assert_eq!(v["results"]["per_queue_rate"]["value"], 100_000.0);
    // The stochastic model (constant arrivals): a heap mean between 0 and the queues per core,
    // and p99.9 above it.
    let mean = v["results"]["heap_mean_per_core"]["value"].as_f64().unwrap();
    let p999 = v["results"]["heap_p999_per_core"]["value"].as_f64().unwrap();
    assert!(mean > 0.0 && mean < 10_000.0 && p999 > mean, "{mean} {p999}");
    let o = run(&["model", "kim", "--arrivals", "poisson"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["model", "kim", "--queues", "1"]);
    assert_eq!(o.status.code(), Some(2), "more cores than queues is refused");
    // eq 16 with uniform 40-1500 B sizes (mean 770 B) on a 1 Mbps queue at overload 1.
    let o = run(&[
        "model",
        "kim",
        "--queues",
        "1",
        "--cores",
        "1",
        "--link",
        "1Mbps",
        "--sizes",
        "uniform",
        "--overload",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // uniform 40..1500 has mean 770 B: 770*8 / 1e6 s = 6.16 ms
    assert_eq!(v["results"]["mean_interpacket_delay"]["value"], 6_160_000.0);
}

/// A link scenario of four captures recorded years apart (2011-2020): with the default
/// alignment every IP packet of all four is offered (1,896 = the sum `npqos trace stats` gives),
/// and flow multiplication multiplies them; merged by absolute time, the run sees the first
/// file only.
#[test]
fn trace_scenario_offers_every_file_and_flow_multiplication_multiplies() {
    const TEST: &str = "trace_scenario_offers_every_file_and_flow_multiplication_multiplies";
    let Some(ndpi) = ndpi_dir() else {
        skip(TEST, "../shared/traces/ndpi is absent");
        return;
    };
    let names = ["443-chrome.pcap", "bitcoin.pcap", "dropbox.pcap", "quic.pcap"];
    let files: Vec<String> = names.iter().map(|n| ndpi.join(n).to_str().unwrap().to_string()).collect();
    let st = run(&["trace", "stats", "--json", &files[0], &files[1], &files[2], &files[3]]);
    assert!(st.status.success(), "{}", stderr(&st));
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let ip_packets = st.as_array().unwrap().last().unwrap()["ip_packets"].as_f64().unwrap();
    assert_eq!(ip_packets, 1896.0, "the four captures hold 1 + 529 + 848 + 518 IP packets");

    let d = tempfile::tempdir().unwrap();
    let offered = |extra: &str, name: &str| {
        let text = format!(
            "[run]\nduration = \"2s\"\n[link]\nrate = \"100Mbps\"\n[queues]\ncount = 16\n[traffic]\nsource = \"trace\"\nfiles = {files:?}\ntime_scale = 1000.0\n{extra}"
        );
        let s = d.path().join(format!("{name}.toml"));
        std::fs::write(&s, text).unwrap();
        let out = d.path().join(name);
        let o = run(&["run", s.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
        let resolved = std::fs::read_to_string(out.join("scenario.resolved.toml")).unwrap();
        (v["scalars"]["offered_packets"]["value"].as_f64().unwrap(), resolved)
    };
    let (one, resolved) = offered("", "aligned");
    assert_eq!(one, ip_packets, "every IP packet of all four files");
    assert!(resolved.contains("align = \"start\"") && resolved.contains("max_gap = \"1s\""), "{resolved}");
    let (three, _) = offered("flow_multiply = 3\n", "x3");
    assert_eq!(three, 3.0 * ip_packets, "flow multiplication multiplies the packets");
    let (absolute, _) = offered("align = \"absolute\"\n", "absolute");
    assert_eq!(absolute, 529.0, "by absolute time only the 2011 capture (bitcoin.pcap) falls in 2 s x 1000");
}

/// `npqos model dqs` reproduces the paper's eq 5 example and orders the search costs as the
/// theory says; bad slot counts are bad input.
#[test]
fn model_dqs_sizes_the_afm_table() {
    let o = run(&[
        "model",
        "dqs",
        "--slots",
        "256,1024",
        "--active-flows",
        "256",
        "--physical-queues",
        "256",
        "--flow-bits",
        "32",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = v["points"].as_array().unwrap();
    assert_eq!(p[0]["slots"], 256);
    assert_eq!(p[0]["results"]["afm_memory"]["value"], 16640.0);
    let r = |i: usize, k: &str| p[i]["results"][k]["value"].as_f64().unwrap();
    assert!(r(1, "search_exact_per_flow") < r(0, "search_exact_per_flow"));
    assert!(r(0, "new_flow_exact") < r(0, "new_flow_theorem2_bound"));
    assert_eq!(v["brute_force_pointer_bits"], 40_000_000);
    let bad = run(&["model", "dqs", "--slots", "0"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `npqos model qcache`: Table 5's nc latencies, the 66.7 M ops/s memory bound at no hits,
/// qc needing the fewest threads and being best on one queue; a hit rate outside 0..1 is bad
/// input.
#[test]
fn model_qcache_sizes_the_subsystems() {
    let o = run(&["model", "qcache", "--threads", "32", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let subs = v["subsystems"].as_array().unwrap();
    let get = |s: &str, k: &str| subs.iter().find(|x| x["subsystem"] == s).unwrap()[k].as_f64().unwrap();
    let nc = subs.iter().find(|x| x["subsystem"] == "nc").unwrap();
    assert_eq!(nc["latency_ns"]["enqueue_miss"], 170.0);
    assert_eq!(nc["latency_ns"]["dequeue_miss"], 250.0);
    for s in ["nc", "dc", "sqc", "qc"] {
        assert!((get(s, "distinct_queues_mops") - 200.0 / 3.0).abs() < 1e-9, "{s}");
    }
    for s in ["nc", "dc", "sqc"] {
        assert!(get("qc", "threads_to_memory_bound") < get(s, "threads_to_memory_bound"));
        assert!(get("qc", "one_queue_mops") > get(s, "one_queue_mops"));
    }
    let bad = run(&["model", "qcache", "--hit-rate", "1.5"]);
    assert_eq!(bad.status.code(), Some(2));

    // A scenario's own timing, threads and memory clock: memory 80 ns instead of 40 adds 80 ns
    // to nc's enqueue miss (a descriptor read, then the link and descriptor writes in parallel:
    // two serial memory stages, 40 ns more each).
    let d = tempfile::tempdir().unwrap();
    let f = write_scenario(
        d.path(),
        "model = \"qcache\"\n[queuing]\nthreads = 8\n[timing]\nmemory = \"80ns\"\nmemory_clock = \"100MHz\"\n",
    );
    let o = run(&["model", "qcache", "--scenario", f.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["threads"].as_u64(), v["memory_mhz"].as_f64()), (Some(8), Some(100.0)));
    let nc = v["subsystems"].as_array().unwrap().iter().find(|x| x["subsystem"] == "nc").unwrap().clone();
    assert_eq!(nc["latency_ns"]["enqueue_miss"], 250.0);
    assert!((nc["memory_bound_mops"].as_f64().unwrap() - 100.0 / 3.0).abs() < 1e-9, "100 MHz, 3 refs per operation");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/demo.toml");
    let other = run(&["model", "qcache", "--scenario", demo.to_str().unwrap()]);
    assert_eq!(other.status.code(), Some(2), "a link scenario is bad input here");
    let msg = stderr(&other);
    assert!(
        msg.contains("demo.toml") && msg.contains("model = \"link\"") && msg.contains("\"qcache\" scenario"),
        "{msg}"
    );
}

/// `npqos model predictive`: the paper's 32 flows give the forwarding flow's 5.1 us estimate,
/// eq 4's reservations summing to one processor at load 1, and the eq 13 / eq 18 bounds the
/// predictive-fig5-7 reproduction reports (10,456 / 1,127 us, docs/predictive.md); a scenario's
/// own flows are sized. `npqos model everest`: every service of the small example gets an N_max
/// and guarantees that sum to 1; a scenario of another model is bad input.
#[test]
fn model_predictive_and_everest_size_a_scenario() {
    let o = run(&["model", "predictive", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 32);
    let fwd = flows.iter().find(|f| f["name"] == "ip-forwarding-64").unwrap();
    let f = |k: &str| fwd[k].as_f64().unwrap();
    assert!((f("t_e_ns") - 5_100.0).abs() < 1e-6);
    assert!((v["processing"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{}", v["processing"]);
    assert!((f("sfq_bound_ns") / 1e3 - 10_456.0).abs() < 1.0, "{}", f("sfq_bound_ns"));
    assert!((f("efq_bound_ns") / 1e3 - 1_127.0).abs() < 1.0, "{}", f("efq_bound_ns"));
    let example = |n: &str| Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../scenarios/{n}.toml"));
    let o = run(&["model", "predictive", "--scenario", example("fq-small").to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v["flows"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fwd", "vpn", "zip", "fec"]);
    let o = run(&["model", "everest", "--scenario", example("everest-small").to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let services = v["services"].as_array().unwrap();
    assert!(!services.is_empty());
    let g: f64 = services.iter().map(|s| s["guarantee"].as_f64().unwrap()).sum();
    assert!((g - 1.0).abs() < 1e-9, "{g}");
    assert!(services.iter().all(|s| s["n_max"].as_u64().unwrap() >= 1 && s["packets"].as_u64().unwrap() > 0));
    let whole: u64 = services.iter().map(|s| s["whole_processors"].as_u64().unwrap()).sum();
    assert_eq!(whole, v["processors"].as_u64().unwrap());
    for (m, s) in [("everest", "fq-small"), ("predictive", "everest-small")] {
        let o = run(&["model", m, "--scenario", example(s).to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{m} {s}");
        assert!(stderr(&o).contains("sizes the"), "{}", stderr(&o));
    }
    assert_eq!(run(&["model", "everest"]).status.code(), Some(2), "--scenario is required");
}

/// `model = "everest"`: the small example runs and writes the full results directory; two
/// replications give byte-identical summary.json with one and two worker threads; Everest has
/// fewer late packets than Static on it; an unknown table or key is bad input naming it.
#[test]
fn everest_scenario_runs_deterministically_and_refuses_unknown_keys() {
    let d = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/everest-small.toml");
    let text = std::fs::read_to_string(&example)
        .unwrap()
        .replace("duration = \"1s\"", "duration = \"300ms\"\nreplications = 2");
    let s = write_scenario(d.path(), &text);
    let mut summaries = vec![];
    for threads in ["1", "2"] {
        let out = d.path().join(format!("t{threads}"));
        let o = run(&["run", s.to_str().unwrap(), "--threads", threads, "--quiet", "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        for f in ["scenario.resolved.toml", "summary.json", "run.json", "results.sqlite", "report.md"] {
            assert!(out.join(f).is_file(), "{f}");
        }
        summaries.push(std::fs::read(out.join("summary.json")).unwrap());
    }
    assert_eq!(summaries[0], summaries[1], "same bytes with 1 and 2 threads");
    let late = |policy: &str| {
        let t = text.replace("policy = \"everest\"", &format!("policy = {policy:?}"));
        let s = d.path().join(format!("{policy}.toml"));
        std::fs::write(&s, t).unwrap();
        let out = d.path().join(policy);
        let o = run(&["run", s.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
        v["scalars"]["late_percent"]["value"].as_f64().unwrap()
    };
    let (everest, stat) = (late("everest"), late("static"));
    assert!(everest < stat, "everest {everest}% late, static {stat}%");
    for (bad, key) in [("[queues]\ncount = 4\n", "queues"), ("[processors]\ncolour = 1\n", "processors.colour")] {
        let s = write_scenario(d.path(), &format!("model = \"everest\"\n{bad}"));
        let o = run(&["run", s.to_str().unwrap(), "--quiet"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(key), "{key}: {}", stderr(&o));
    }
}

/// Runs `text` (a scenario, written to `dir/name.toml`) with `--threads threads` into
/// `dir/name-t<threads>`; returns summary.json.
fn run_summary(dir: &Path, name: &str, text: &str, threads: &str) -> serde_json::Value {
    let s = dir.join(format!("{name}.toml"));
    std::fs::write(&s, text).unwrap();
    let out = dir.join(format!("{name}-t{threads}"));
    let o = run(&["run", s.to_str().unwrap(), "--threads", threads, "--quiet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{name}: {}", stderr(&o));
    for f in ["scenario.resolved.toml", "summary.json", "run.json", "results.sqlite", "report.md", "scalars.csv"] {
        assert!(out.join(f).is_file(), "{name}: {f}");
    }
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

fn scalar(v: &serde_json::Value, name: &str) -> f64 {
    v["scalars"][name]["value"].as_f64().unwrap_or_else(|| panic!("{name} in {v}"))
}

/// The predictive models' examples (fq, lap, efq-lap), dqs's, qcache's, kim's and the router's: two replications give
/// byte-identical summary.json with one and two threads; an unknown table or key is bad input
/// naming it; each predictive setting and qcache show their paper's qualitative result.
#[test]
fn predictive_scenarios_run_deterministically_show_their_results_and_refuse_unknown_keys() {
    let d = tempfile::tempdir().unwrap();
    let example = |name: &str| {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../scenarios/{name}.toml")))
            .unwrap()
    };
    for (name, model) in [
        ("fq-small", "fq"),
        ("lap-small", "lap"),
        ("efq-lap-small", "efq-lap"),
        ("dqs-small", "dqs"),
        ("qcache-small", "qcache"),
        ("kim-small", "kim"),
        ("router-synthetic", "router"),
    ] {
        let text = example(name)
            .replace("[run]\n", "[run]\nreplications = 2\n")
            .replace("duration = \"3s\"", "duration = \"1s\"");
        let bytes: Vec<Vec<u8>> = ["1", "2"]
            .iter()
            .map(|t| {
                run_summary(d.path(), name, &text, t);
                std::fs::read(d.path().join(format!("{name}-t{t}")).join("summary.json")).unwrap()
            })
            .collect();
        assert_eq!(bytes[0], bytes[1], "{name}: same bytes with 1 and 2 threads");
        let own = if model == "qcache" { "workload" } else { "traffic" };
        let foreign = if model == "kim" { "processors" } else { "queues" };
        for (bad, key) in [
            (format!("[{foreign}]\ncount = 4\n"), foreign.to_string()),
            (format!("[{own}]\ncolour = 1\n"), format!("{own}.colour")),
        ] {
            let s = write_scenario(d.path(), &format!("model = {model:?}\n{bad}"));
            let o = run(&["run", s.to_str().unwrap(), "--quiet"]);
            assert_eq!(o.status.code(), Some(2), "{model} {key}: {}", stderr(&o));
            assert!(stderr(&o).contains(&key), "{model} {key}: {}", stderr(&o));
        }
    }
    // Fair queuing: SFQ orders by start tag, blind to processing time, so the short forwarding
    // packets wait behind long ones; EFQ orders by estimated finish and tracks the oracle.
    let fq = |disc: &str| {
        let t = example("fq-small").replace("discipline = \"efq\"", &format!("discipline = {disc:?}"));
        run_summary(d.path(), &format!("fq-{disc}"), &t, "1")
    };
    let (sfq, efq, wf2q) = (fq("sfq"), fq("efq"), fq("wf2q+"));
    let fwd = |v: &serde_json::Value| scalar(v, "delay_mean.fwd");
    assert!(fwd(&efq) < 0.8 * fwd(&sfq), "efq {} sfq {}", fwd(&efq), fwd(&sfq));
    assert!((fwd(&efq) / fwd(&wf2q) - 1.0).abs() < 0.05, "efq {} wf2q+ {}", fwd(&efq), fwd(&wf2q));
    // LAP: locality buys throughput over FCFS; T-Opt (the whole stream visible) bounds it.
    let lap = |policy: &str| {
        let mut t = example("lap-small").replace("policy = \"lap\"", &format!("policy = {policy:?}"));
        if policy == "t-opt" {
            t = t.replace("visible = 64", "");
        }
        scalar(&run_summary(d.path(), &format!("lap-{policy}"), &t, "1"), "throughput")
    };
    let (fcfs, l, topt) = (lap("fcfs"), lap("lap"), lap("t-opt"));
    assert!(fcfs < l && l < topt, "fcfs {fcfs} lap {l} t-opt {topt} Gbit/s");
    // EFQ+LAP: EFQ's delays while calm, LAP's goodput while overloaded.
    let sw = |mode: &str| {
        let mut t = example("efq-lap-small").replace("mode = \"efq+lap\"", &format!("mode = {mode:?}"));
        if mode != "efq+lap" {
            t = t.replace("lap_above = \"20ms\"", "").replace("efq_below = \"10ms\"", "");
        }
        run_summary(d.path(), &format!("sw-{mode}"), &t, "1")
    };
    let (efq, lap, both) = (sw("efq"), sw("lap"), sw("efq+lap"));
    let calm = |v: &serde_json::Value| scalar(v, "delay_p99.conforming_calm");
    let good = |v: &serde_json::Value| scalar(v, "overloaded_goodput");
    assert!(calm(&both) < 0.5 * calm(&lap), "calm p99: efq+lap {} lap {}", calm(&both), calm(&lap));
    assert!(good(&both) > good(&efq) + 0.3, "goodput: efq+lap {} efq {}", good(&both), good(&efq));
    // qcache: under a hot set that fits in the 32 entries (SD16_90) the cached subsystems hit
    // about 90% of the time and order as the paper's Fig. 7: qc > sqc > dc > nc.
    let t = example("qcache-small").replace("pattern = \"R\"", "pattern = \"SD\"\ndominating = 16\npercent = 90.0");
    let q = run_summary(d.path(), "qcache-sd", &t, "1");
    let thr = |s: &str| scalar(&q, &format!("throughput.{s}"));
    assert!(thr("qc") > thr("sqc") && thr("sqc") > thr("dc") && thr("dc") > thr("nc"), "{q}");
    assert!(scalar(&q, "hit_rate.qc") > 0.8 && scalar(&q, "speedup.qc") > 2.0, "{q}");
}

/// dqs on real traffic: the trace example (a directory standing for its 181 captures) offers
/// every IP packet of the corpus, four times over (flow multiplication), and a smaller table
/// lengthens the lookups.
#[test]
fn dqs_trace_scenario_offers_the_whole_corpus() {
    const TEST: &str = "dqs_trace_scenario_offers_the_whole_corpus";
    let Some(ndpi) = ndpi_dir() else {
        skip(TEST, "../shared/traces/ndpi is absent");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/dqs-trace.toml"))
        .unwrap()
        .replace("../../shared/traces/ndpi", ndpi.to_str().unwrap());
    let mut files: Vec<String> = std::fs::read_dir(&ndpi)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng" || x == "cap"))
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    files.sort();
    let mut args = vec!["trace", "stats", "--json", "--lenient"];
    args.extend(files.iter().map(|f| f.as_str()));
    let st = run(&args);
    assert!(st.status.success(), "{}", stderr(&st));
    let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let ip = v.as_array().unwrap().last().unwrap()["ip_packets"].as_f64().unwrap();
    let full = run_summary(d.path(), "dqs-trace", &text, "1");
    let small = run_summary(d.path(), "dqs-trace-16", &text.replace("slots = 256", "slots = 16"), "1");
    assert_eq!(scalar(&full, "packets"), 4.0 * ip, "every IP packet of {} captures, four times", files.len());
    assert!(scalar(&small, "cycles_mean") > 2.0 * scalar(&full, "cycles_mean"));
}

/// `npqos trace ethernet`: an SLL record gets an Ethernet header in place of its own (14 B
/// for 16: its length on the wire 2 B less), a raw-IP record one more (14 B added), a record
/// cut by the snap length is padded to its length on the wire, an Ethernet record is copied;
/// every packet is still the IP packet it was (its flow and length as `trace stats` reads
/// them), and a link type it does not read is bad input naming the record.
#[test]
fn trace_ethernet_writes_every_record_as_an_ethernet_frame() {
    use npqos_sim::trace::reader::TraceReader;
    use npqos_sim::trace::writer::{udp4_frame, PcapWriter};
    let d = tempfile::tempdir().unwrap();
    let write = |name: &str, link: u16, records: &[(Vec<u8>, u32)]| {
        let p = d.path().join(name);
        let mut w = PcapWriter::new(std::fs::File::create(&p).unwrap(), link, 65535, true, false).unwrap();
        for (i, (data, orig)) in records.iter().enumerate() {
            w.write(1_000 + i as u64, data, *orig).unwrap();
        }
        p
    };
    let frame = udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 5000, 10000, 200);
    let ip = frame[14..].to_vec();
    let mut sll = vec![0, 4, 2, 18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&ip);
    let cut = ip[..60].to_vec();
    let cases = [
        (write("sll.pcap", 113, &[(sll.clone(), sll.len() as u32)]), frame.len()),
        (write("raw.pcap", 101, &[(ip.clone(), ip.len() as u32), (cut, ip.len() as u32)]), frame.len()),
        (write("eth.pcap", 1, &[(frame.clone(), frame.len() as u32)]), frame.len()),
    ];
    for (input, len) in &cases {
        let out = d.path().join("out.pcap");
        let o = run(&[
            "trace",
            "ethernet",
            input.to_str().unwrap(),
            out.to_str().unwrap(),
            "--dst-mac",
            "02:aa:00:00:00:02",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let mut r = TraceReader::open(&out, false).unwrap();
        let mut n = 0;
        while let Some(rec) = r.next().unwrap() {
            assert_eq!((rec.link, rec.orig_len as usize, rec.data.len()), (1, *len, *len), "{}", input.display());
            assert_eq!(&rec.data[14..], &ip[..], "{}: the IP packet as it was", input.display());
            if !input.ends_with("eth.pcap") {
                assert_eq!(&rec.data[..6], &[2, 0xaa, 0, 0, 0, 2], "the destination address asked for");
            }
            n += 1;
        }
        assert!(n >= 1);
        let stats = run(&["trace", "stats", out.to_str().unwrap()]);
        assert!(stdout(&stats).contains(&format!("{n} IP, 0 non-IP")), "{}", stdout(&stats));
    }
    let other = write("other.pcap", 147, &[(ip.clone(), ip.len() as u32)]);
    let o = run(&["trace", "ethernet", other.to_str().unwrap(), d.path().join("x.pcap").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("record 1 has link type 147"), "{}", stderr(&o));
}

/// `npqos trace detect` on crafted captures whose answer is known: a SYN scan of 300 ports from
/// one source in 0.3 s (reported once, at its 101st port; its victim's 101st half-open
/// connection is reported by the flood detector), a flood of 400 SYNs to one server never
/// completed (reported once, at its 101st half-open connection), and benign traffic in
/// the same file (complete handshakes to another server, a client using 10 ports of it, the
/// server's SYN-ACKs) that triggers nothing; TCP flags read from the captured headers.
#[test]
fn trace_detect_finds_a_scan_and_a_flood_and_nothing_in_benign_traffic() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("attacks.pcap");
    npqos_sim::trace::writer::attacks_capture(&p).unwrap();
    let o = run(&["trace", "detect", p.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let found = v[0]["detections"].as_array().unwrap();
    let got: Vec<(String, String, u64)> = found
        .iter()
        .map(|h| (h["what"].as_str().unwrap().into(), h["who"].as_str().unwrap().into(), h["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        got,
        // The scan's SYNs are never answered either: its victim holds 101 half-open
        // connections at the same packet, which the flood detector reports too.
        vec![
            ("port_scan".into(), "198.18.1.1".into(), 101),
            ("syn_flood".into(), "198.18.2.2".into(), 101),
            ("syn_flood".into(), "198.18.5.5".into(), 101)
        ],
        "{}",
        stdout(&o)
    );
    assert!((found[0]["at_s"].as_f64().unwrap() - 0.1).abs() < 1e-6, "the 101st port at 100 ms");
    assert_eq!(v[0]["ip_packets"], 300 + 4 * 400);
    // Thresholds above what the file holds: nothing.
    let o = run(&["trace", "detect", p.to_str().unwrap(), "--scan-threshold", "300", "--syn-threshold", "400"]);
    assert!(stdout(&o).contains("0 detections"), "{}", stdout(&o));
}

/// The commands of the simulator-against-the-wire and the detectors refuse bad input with what
/// was wrong (exit 2): a capture that is not there, a capture that is not Ethernet for
/// `live --as-scenario` (with the command that rewrites it), a bad drain, zero windows and
/// thresholds for `trace detect`, a bad MAC for `trace ethernet`.
#[test]
fn wire_and_detector_commands_refuse_bad_input() {
    use npqos_sim::trace::writer::{udp4_frame, PcapWriter};
    let d = tempfile::tempdir().unwrap();
    let live = d.path().join("live.toml");
    std::fs::write(&live, "[live]\ninput = \"a\"\noutput = \"b\"\n[shaper]\nflow_rate = \"1Mbps\"\n").unwrap();
    let raw = d.path().join("raw.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&raw).unwrap(), 101, 65535, true, false).unwrap();
    let f = udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 5000, 10000, 100);
    w.write(1, &f[14..], f.len() as u32 - 14).unwrap();
    drop(w);
    let (l, r) = (live.to_str().unwrap(), raw.to_str().unwrap());
    for (args, says) in [
        (vec!["live", l, "--as-scenario", "/nonexistent.pcap"], "/nonexistent.pcap"),
        (vec!["live", l, "--as-scenario", r], "npqos trace ethernet"),
        (vec!["live", l, "--as-scenario", r, "--drain", "soon"], "--drain soon"),
        (vec!["trace", "detect", r, "--scan-window", "0s"], "--scan-window 0s"),
        (vec!["trace", "detect", r, "--syn-threshold", "0"], "--syn-threshold"),
        (vec!["trace", "ethernet", r, "/tmp/x.pcap", "--dst-mac", "02:00"], "\"02:00\": expected a MAC address"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}
