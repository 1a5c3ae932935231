//! dqs-scale: 1e6 in-progress flows with queues only for the active ones; AFM memory (eq 5)
//! against brute force.

use super::*;

/// dqs-scale: 1e6 in-progress flows (synthetic), of which only the active ones hold queues;
/// AFM memory (eq 5 and our structure) against a brute-force per-flow queue table.
pub fn scale(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let flows: u32 = g.value("run", "in_progress_flows");
    let w = SyntheticFlows {
        in_progress: flows,
        duration: if opts.quick { Duration::from_millis(500) } else { Duration::from_secs(5) },
        mean_gap: Duration::from_millis(if opts.quick { 50 } else { 500 }),
        ..synthetic(false)
    };
    let wl = Workload::Synthetic(w.clone());
    out.assumptions.push(format!("Workload {}", wl.describe()));
    let m: u32 = g.value("run", "slots");
    let r = wl.run(m, false, opts.seed, progress);
    let mut run = link_run(format!("{flows} flows in progress"), "synthetic", m, &r);
    let l = r.max_active;
    let n_q = r.max_queues as u64;
    let w_bits = theory::afm_memory_bits(m as u64, l, n_q.max(1), 104);
    let brute_bits = theory::brute_force_bits(flows as u64);
    // A brute-force table a router would build: per in-progress flow its 104-bit 5-tuple and
    // the head/tail pointers of section 1.
    let brute_full_bits = flows as u64 * 104 + brute_bits;
    run.scalar("in_progress_flows", flows as f64, "flows");
    run.scalar("afm_memory_eq5", w_bits as f64, "bits");
    run.scalar("afm_memory_ours", r.afm_memory_bytes as f64 * 8.0, "bits");
    run.scalar("brute_force_pointers", brute_bits as f64, "bits");
    out.comparisons.push(Comparison::new(
        "in_progress_flows",
        BTreeMap::new(),
        flows as f64,
        None,
        "flows",
        "section 1",
    ));
    out.comparisons.push(Comparison::new(
        "max_active_flows",
        BTreeMap::new(),
        r.max_active as f64,
        None,
        "flows",
        "section 1 (hundreds)",
    ));
    out.comparisons.push(Comparison::new(
        "max_queues",
        BTreeMap::new(),
        r.max_queues as f64,
        None,
        "queues",
        "Table 3 (hundreds)",
    ));
    out.comparisons.push(Comparison::new("mean_queues", BTreeMap::new(), r.mean_queues, None, "queues", "Table 3"));
    let bp = BTreeMap::from([
        ("slots".into(), json!(m)),
        ("active_flows".into(), json!(l)),
        ("queues".into(), json!(n_q)),
        ("flow_id_bits".into(), json!(104)),
    ]);
    out.comparisons.push(Comparison::new("afm_memory_eq5", bp, w_bits as f64, None, "bits", "eq 5"));
    out.comparisons.push(Comparison::new(
        "afm_memory_eq5_paper_example",
        BTreeMap::from([
            ("slots".into(), json!(256)),
            ("active_flows".into(), json!(256)),
            ("queues".into(), json!(256)),
            ("flow_id_bits".into(), json!(32)),
        ]),
        theory::afm_memory_bits(256, 256, 256, 32) as f64,
        None,
        "bits",
        "section 6 (\"only 16 K bits\")",
    ));
    out.comparisons.push(Comparison::new(
        "afm_memory_ours_bytes",
        BTreeMap::new(),
        r.afm_memory_bytes as f64,
        None,
        "bytes",
        "our Rust structure (slots + nodes at their high-water mark)",
    ));
    out.comparisons.push(Comparison::new(
        "brute_force_pointer_memory",
        BTreeMap::from([("flows".into(), json!(flows))]),
        brute_bits as f64,
        None,
        "bits",
        "section 1 (2 x 2^20 x 20 = 40 Mbit)",
    ));
    out.comparisons.push(Comparison::new(
        "brute_force_table_memory",
        BTreeMap::from([("flows".into(), json!(flows))]),
        brute_full_bits as f64,
        None,
        "bits",
        "ours: per-flow 104-bit key + the head/tail pointers of section 1",
    ));
    out.notes.push(Note::from(format!(
        "{flows} flows in progress, {} packets, {} flows started over the run. Active flows (with packets buffered): max {}, mean {:.1}; physical queues max {}, mean {:.1}. AFM memory by eq 5 with l = {l}, N = {n_q}, B = 104: {w_bits} bits ({:.1} KiB); our structure peaked at {} bytes. A brute-force table for {flows} flows: {brute_bits} bits of head/tail pointers alone ({:.1} MiB), {brute_full_bits} bits with keys ({:.1} MiB): {:.0}x eq 5.",
        r.packets,
        r.flows_activated,
        r.max_active,
        r.sum_active / r.samples.max(1) as f64,
        r.max_queues,
        r.mean_queues,
        w_bits as f64 / 8192.0,
        r.afm_memory_bytes,
        brute_bits as f64 / 8.0 / 1048576.0,
        brute_full_bits as f64 / 8.0 / 1048576.0,
        brute_full_bits as f64 / w_bits as f64,
    )));
    out.runs.push(run);
    out
}
