//! `npqos live CONFIG.toml [--out DIR] [--duration D]`: forward frames between two interfaces
//! through the library's mechanisms and write the standard results directory.

use crate::error::{bad, Interrupted};
use crate::output::{self, Meta};
use crate::progress::Progress;
use anyhow::Result;
use npqos_sim::live::Forwarder;
use npqos_sim::results::Output;
use serde_json::json;
use std::path::{Path, PathBuf};

/// From this many active flows in one AFM slot on, the summary notes that `[table] slots` is
/// small for the flows: a random binary search tree of 64 nodes takes about 8 dependent reads
/// per search (2 ln n), against 1-2 in a table sized for its flows.
#[cfg(target_os = "linux")]
const AFM_SLOT_FLOWS_NOTE: f64 = 64.0;

/// Reads and validates a live configuration; problems are bad input (exit 2).
pub fn load(path: &Path, duration: Option<&str>) -> Result<npqos_sim::live::LiveSpec> {
    let mut table = crate::commands::run::read_table(path)?;
    if let Some(d) = duration {
        npqos_sim::scenario::set_key(&mut table, "live.duration", &format!("{d:?}"))
            .map_err(|e| bad(format!("--duration {d}: {e}")))?;
    }
    let mut spec = npqos_sim::live::spec::read(&table, &path.display().to_string())?;
    #[cfg(target_os = "linux")]
    if spec.threads.is_none() && matches!(spec.io, npqos_sim::live::spec::Io::Xdp { .. }) {
        // "auto" on AF_XDP: a thread per CPU, at most one per receive queue of the input.
        let queues = crate::live::xsk::rx_queues(&spec.input).max(1);
        spec.threads = Some(spec.forwarding_threads().min(queues) as u32);
    }
    Ok(spec)
}

/// The file read again at SIGHUP: its problems, or the first key that changed and needs a
/// restart (the interfaces, rings, modes, `live.reverse`, the statistics' address, the packet
/// captures' `[output]`); rates,
/// services, match rules, subscribers, the flow tables and `live.non_ip` may change, both ways.
#[cfg(target_os = "linux")]
fn reread(
    config: &Path,
    duration: Option<&str>,
    running: &npqos_sim::live::LiveSpec,
) -> Result<npqos_sim::live::LiveSpec, String> {
    let next = load(config, duration).map_err(|e| format!("{e:#}"))?;
    for (key, changed) in [
        ("live.input", next.input != running.input),
        ("live.output", next.output != running.output),
        ("live.wait", next.wait != running.wait),
        ("live.mode", next.mode != running.mode),
        ("live.io", next.io != running.io),
        ("live.rx_ring", next.rx_ring != running.rx_ring),
        ("live.tx_frames", next.tx_frames != running.tx_frames),
        ("live.threads", next.forwarding_threads() != running.forwarding_threads()),
        ("live.sample_every", next.sample_every != running.sample_every),
        ("live.stats", next.stats_listen != running.stats_listen),
        ("live.reverse", std::mem::discriminant(&next.reverse) != std::mem::discriminant(&running.reverse)),
        ("output", next.capture != running.capture),
    ] {
        if changed {
            return Err(format!("{}: {key} changed, which needs a restart", config.display()));
        }
    }
    Ok(next)
}

/// What a port's capture file holds, as scalars (docs/live.md, "Packet captures").
#[cfg(target_os = "linux")]
fn capture_scalars(c: &npqos_sim::trace::capture::Captured) -> Vec<(String, f64, &'static str)> {
    use npqos_core::pipeline::router::Port;
    let [written, not, cut] = match c.port {
        Port::Ingress => ["pcap_packets.ingress", "pcap_not_written.ingress", "pcap_cut_at.ingress"],
        Port::Egress => ["pcap_packets.egress", "pcap_not_written.egress", "pcap_cut_at.egress"],
        Port::Drops => ["pcap_packets.drops", "pcap_not_written.drops", "pcap_cut_at.drops"],
    };
    let mut v = vec![(written.into(), c.written as f64, "packets"), (not.into(), c.not_written as f64, "packets")];
    if let Some(t) = c.cut_at_ns {
        v.push((cut.into(), t as f64 * 1e-9, "s"));
    }
    v
}

/// The runs of the results: the way in's first configuration (`live`, with the I/O layer's and
/// the reloads' counts), the shaped way back (`reverse`), then each later configuration of the
/// way in (`live-reload-1`, ...).
#[cfg(target_os = "linux")]
fn results(run: &crate::live::LiveRun, stop_reason: &str) -> Vec<npqos_sim::results::RunResult> {
    let mut extra = run.io_scalars();
    match &run.captured {
        Ok(files) => extra.extend(files.iter().flat_map(capture_scalars)),
        Err(e) => tracing::error!("writing the packet captures: {e}"),
    }
    if let Some(r) = &run.reloads {
        extra.extend(
            [
                ("reloads", r.counts.reloads as f64, "reloads"),
                ("reloads_refused", r.refused as f64, "reloads"),
                ("reload_time_max", r.time_ns_max as f64 / 1e3, "us"),
                ("reload_build_time_max", r.build_ns_max as f64 / 1e3, "us"),
                ("reload_swap_time_max", r.swap_ns_max as f64 / 1e3, "us"),
                ("reload_waited", r.counts.waited as f64, "frames"),
                ("reload_dropped_queue_full", r.counts.dropped_queue_full as f64, "frames"),
                ("reload_dropped_waiting", r.counts.dropped_waiting as f64, "frames"),
            ]
            .map(|(k, x, u)| (k.to_string(), x, u)),
        );
    }
    let extra: Vec<(&str, f64, &str)> = extra.iter().map(|(k, x, u)| (k.as_str(), *x, *u)).collect();
    // Each configuration's forwarders, one per forwarding thread, as one run.
    let one = |parts: &[Forwarder], extra: &[(&str, f64, &str)]| {
        Forwarder::result_of(&parts.iter().collect::<Vec<_>>(), run.elapsed_ns, run.complete, stop_reason, extra)
    };
    let mut runs = vec![one(&run.forwarders[0], &extra)];
    // The shaped way back: a run of its own (its flows and classes beside the way in's), and
    // one per later configuration of it.
    let back = run.reverse_forwarder.as_deref().unwrap_or_default();
    let back_counts = run.reloads.as_ref().and_then(|r| r.counts_back);
    for (i, f) in back.iter().enumerate() {
        let extra: Vec<(&str, f64, &str)> = match (i, back_counts) {
            (0, Some(c)) => vec![
                ("reload_waited", c.waited as f64, "frames"),
                ("reload_dropped_queue_full", c.dropped_queue_full as f64, "frames"),
                ("reload_dropped_waiting", c.dropped_waiting as f64, "frames"),
            ],
            _ => Vec::new(),
        };
        let mut r = one(f, &extra);
        r.label = if i == 0 { "reverse".into() } else { format!("reverse-reload-{i}") };
        runs.push(r);
    }
    for (i, f) in run.forwarders.iter().enumerate().skip(1) {
        let mut r = one(f, &[]);
        r.label = format!("live-reload-{i}");
        runs.push(r);
    }
    runs
}

/// `npqos live CONFIG --as-scenario CAPTURE`: the router scenario that runs this
/// configuration's pipeline over the capture as tcpreplay sends it through npqos live, on
/// stdout (every key resolved; `npqos run` of it writes the same file as its
/// scenario.resolved.toml, so the two can be diffed).
pub fn as_scenario(config: &Path, capture: &Path, drain: &str) -> Result<()> {
    let spec = load(config, None)?;
    let drain = npqos_sim::units::parse_duration(drain).map_err(|e| bad(format!("--drain {drain}: {e}")))?;
    let table = npqos_sim::live::simulate::router_scenario(&spec, capture, drain, 1).map_err(bad)?;
    print!("{}", toml::to_string(&table)?);
    Ok(())
}

/// `npqos live CONFIG --stats`: the statistics of the npqos live running with `config`, from
/// its `live.stats` endpoint, as `tc -s class show` prints them.
#[cfg(target_os = "linux")]
pub fn stats(config: &Path) -> Result<()> {
    let spec = load(config, None)?;
    let at = spec.stats_listen.as_ref().ok_or_else(|| {
        bad(format!(
            "{}: live.stats is \"off\": set it (\"on\" serves on 127.0.0.1:9464) and start npqos live",
            config.display()
        ))
    })?;
    let text = crate::live::stats::fetch(at, "/tc").map_err(bad)?;
    print!("{text}");
    Ok(())
}

#[cfg(target_os = "linux")]
pub fn live(config: &Path, out: Option<PathBuf>, duration: Option<String>, quiet: bool) -> Result<()> {
    use crate::live::ring::OpenError;
    // Allocations of 128 KiB and more are mapped fresh and given back when freed, whatever was
    // freed before (glibc otherwise raises this threshold as large blocks are freed): a reload's
    // new tables then start as the kernel's zeroed pages, touched as frames use them, not
    // written in full while the new configuration waits (docs/live.md, "Reload").
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt(3) with a valid parameter (it takes the allocator's lock).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10)
    };
    let spec = load(config, duration.as_deref())?;
    let name = config.file_stem().map_or("live".into(), |s| s.to_string_lossy().into_owned());
    let dir = out.unwrap_or_else(|| output::default_dir("live", &name));
    let stop = crate::commands::run::interrupt_flag();
    let progress = Progress::new_live("live", quiet, spec.duration.is_some());
    let rate = match spec.services.len() {
        0 => format!("flow_rate {}", spec.flow_rate),
        n => format!("{n} services"),
    };
    // The statistics while it runs (live.stats): served by a thread of their own until the
    // end of the run.
    let mut stats = match &spec.stats_listen {
        Some(at) => {
            let back = spec.reversed().map(|b| b.service_info());
            let s = crate::live::stats::start(at, spec.service_info(), back, spec.forwarding_threads())
                .map_err(|e| bad(format!("{}: live.stats = \"{at}\": {e}", config.display())))?;
            tracing::info!("statistics on {at}: GET /metrics (Prometheus), GET /tc");
            Some(s)
        }
        None => None,
    };
    // SIGHUP reads the file again and builds the pipelines on a thread of their own
    // (docs/live.md, "Reload").
    let signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])?;
    let (path, d, running) = (config.to_path_buf(), duration.clone(), spec.clone());
    let read = Box::new(move || reread(&path, d.as_deref(), &running));
    let reload = crate::live::Reload { signals, read };
    let pcap = dir.join("pcap");
    let publishers = stats.as_mut().map(|(p, _)| std::mem::take(p)).unwrap_or_default();
    let threads = spec.forwarding_threads();
    let run = crate::live::forward(&spec, &stop, Some(reload), publishers, Some(&pcap), |st, frac| {
        progress.set(frac);
        progress.message(format!(
            "{} flows  in {}  out {}  dropped {}  heap {}  ({rate}, {threads} thread{})",
            st.flows,
            st.frames_in,
            st.frames_out,
            st.dropped,
            st.heap,
            if threads == 1 { "" } else { "s" }
        ));
    })
    .map_err(|e| match e {
        OpenError::NoInterface(_) | OpenError::Permission(_) | OpenError::Unsuited(_) => {
            bad(format!("{}: {e}", config.display()))
        }
        other => anyhow::Error::new(other),
    })?;
    progress.finish();
    let first: Vec<&Forwarder> = run.forwarders[0].iter().collect();
    let lost_reason = (run.lost.as_ref().map(|i| format!("interface {i} removed")))
        .or(run.refused.as_ref().map(|e| format!("pipeline stopped: {e}")));
    let stop_reason = match (&lost_reason, run.complete) {
        (Some(r), _) => r.as_str(),
        (None, true) => "duration",
        (None, false) => "interrupted",
    };
    let mut outp = Output { id: format!("live/{name}"), runs: results(&run, stop_reason), ..Default::default() };
    outp.notes = Forwarder::notes_of(&first, 20);
    outp.assumptions = vec![
        "Rates are frame bytes (Ethernet header to payload, no FCS, preamble or gap), as htb and tbf count them.".into(),
        "A flow's bucket outlives its dqs physical queue by the pipeline's bucket-lifetime rule: parked when the queue is released, taken back by the flow if no other flow took it, handed on full again or, when every spare one is filling, nearest to full (bucket_evictions; docs/pipeline.md).".into(),
        "flows.csv counts the first [stats] flows exactly (4,096 by default) and every later flow in one row (kind other); delays are from a frame's arrival at npqos to its hand-over to the transmit ring.".into(),
    ];
    // With mode = "pass" no pipeline runs: the frames forwarded are those passed on.
    let frames_out: u64 = run.forwarders.iter().flatten().map(|f| f.totals().frames_out).sum::<u64>()
        + run.passed.map_or(0, |p| p.frames_out);
    let per_frame = run.cpu_ns as f64 / frames_out.max(1) as f64;
    let mut run_info = serde_json::Map::new();
    run_info.insert("elapsed_s".into(), json!(run.elapsed_ns as f64 / 1e9));
    run_info.insert("cpu_s".into(), json!(run.cpu_ns as f64 / 1e9));
    run_info.insert("cpu_ns_per_forwarded_frame".into(), json!(per_frame));
    run_info.insert("input".into(), json!(spec.input));
    run_info.insert("output".into(), json!(spec.output));
    run_info.insert("threads".into(), json!(run.threads.len()));
    let mut extra = serde_json::Map::new();
    extra.insert("scenario".into(), json!(name));
    let meta = Meta { kind: "live", seed: 0, resolved: Some(spec.to_toml()), extra, run_info, seeds: vec![0] };
    output::write_all(&dir, &outp, &meta)?;
    if !quiet {
        let t = Forwarder::totals_of(&first);
        let get = |k: &str| outp.runs[0].get(k).unwrap_or(f64::NAN);
        println!(
            "npqos live {} -> {}: {:.1} s, {} frames in, {} out, {} dropped ({} in the receive ring), {} flows",
            spec.input,
            spec.output,
            run.elapsed_ns as f64 / 1e9,
            t.frames_in + run.passed.map_or(0, |p| p.frames_in),
            t.frames_out + run.passed.map_or(0, |p| p.frames_out),
            t.drops.iter().sum::<u64>(),
            run.rx.ring_drops,
            first.iter().map(|f| f.flow_count()).sum::<usize>()
        );
        println!(
            "  backlogged flows: {}, rate mean {:.3} Mbps (configured {rate}), worst error {:.2}%; {:.0} ns CPU per forwarded frame",
            get("backlogged_flows"),
            get("backlogged_rate_mean"),
            get("backlogged_rate_error_max"),
            per_frame
        );
        let deepest = get("afm_slot_flows_max");
        if deepest >= AFM_SLOT_FLOWS_NOTE {
            println!(
                "  note: one of dqs's AFM slots held {deepest:.0} active flows, searched as a binary tree of that \
                 size for each frame; [table] slots = {} is small for these flows (docs/live.md, table.slots)",
                spec.table.slots
            );
        }
        println!("  results in {}", dir.display());
    }
    if let Some(e) = &run.refused {
        return Err(anyhow::anyhow!(
            "the pipeline stopped after {:.1} s: {e}; the results up to then are in {}",
            run.elapsed_ns as f64 / 1e9,
            dir.display()
        ));
    }
    let ways = run.forwarders.iter().chain(run.reverse_forwarder.iter().flatten()).flatten();
    if let Some(e) = ways.map(Forwarder::check).find_map(Result::err) {
        return Err(anyhow::anyhow!("{e}; the results are in {}", dir.display()));
    }
    if let Some(i) = &run.lost {
        return Err(bad(format!(
            "interface {i:?} disappeared after {:.1} s; the results up to then are in {}",
            run.elapsed_ns as f64 / 1e9,
            dir.display()
        )));
    }
    if !run.complete {
        return Err(anyhow::Error::new(Interrupted(dir.display().to_string())));
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub fn live(config: &Path, _out: Option<PathBuf>, duration: Option<String>, _quiet: bool) -> Result<()> {
    load(config, duration.as_deref())?;
    Err(bad("npqos live needs Linux (AF_PACKET sockets)"))
}

#[cfg(not(target_os = "linux"))]
pub fn stats(config: &Path) -> Result<()> {
    load(config, None)?;
    Err(bad("npqos live needs Linux (AF_PACKET sockets)"))
}
