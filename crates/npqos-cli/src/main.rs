//! `npqos`: run scenarios, reproduce the papers' experiments, inspect traces, size structures
//! with analytical models, and sweep parameters. See `npqos --help`.

mod alloc;

use npqos_cli::{commands, error};

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[global_allocator]
static ALLOC: alloc::HugePageHint = alloc::HugePageHint;

#[derive(Parser)]
#[command(name = "npqos", version, about = "Network-processor QoS: library, simulator and tool", long_about = None,
    after_help = "Examples:\n  npqos list\n  npqos models\n  npqos reproduce kim-table1 --quick\n  npqos run scenarios/demo.toml --out results/demo\n  npqos trace stats capture.pcap --json\n  npqos model kim --queues 1000000 --link 100Gbps --overload 1.29\n  npqos sweep scenarios/demo.toml --set traffic.overload=0.5,0.9,1.2 --jobs 2\n  npqos report results/reproduce\n\nExit codes: 0 success, 1 internal failure, 2 bad input, 130 interrupted (partial results written).")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario file and write a results directory
    #[command(
        after_help = "Examples:\n  npqos run scenarios/demo.toml\n  npqos run scenarios/demo.toml --seed 7 --threads 2 --out results/demo-7"
    )]
    Run {
        /// Scenario file (TOML)
        scenario: PathBuf,
        /// Output directory [default: results/run/<scenario name>]
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override the scenario's seed
        #[arg(long)]
        seed: Option<u64>,
        /// Worker threads (default: one per CPU, fewer if parallel replications would exceed
        /// run.memory_budget): replications run in parallel, a kim scenario's shards run in
        /// parallel, and the router and link models make their arrivals on a spare one. Results
        /// do not depend on it
        #[arg(long)]
        threads: Option<usize>,
        /// No progress bar and no summary on stdout
        #[arg(long)]
        quiet: bool,
    },
    /// List the reproducible experiments (id, tab, description), or show what experiments
    /// declare: the grid they sweep (full and --quick) and the numbers their paper states
    #[command(after_help = "Examples:\n  npqos list\n  npqos list kim-table2\n  npqos list --json > experiments.json")]
    List {
        /// Experiment ids to show in full (grid and paper values)
        ids: Vec<String>,
        /// Every experiment's declaration as JSON (id, description, grid, paper values)
        #[arg(long)]
        json: bool,
    },
    /// List the scenario models (`model = "<name>"`): name, tab, description
    Models,
    /// Reproduce experiments of the papers side by side with the papers' numbers
    #[command(
        after_help = "Examples:\n  npqos reproduce kim-table1\n  npqos reproduce all --quick --out results/quick"
    )]
    Reproduce {
        /// Experiment ids (see `npqos list`) or `all`
        #[arg(required = true)]
        ids: Vec<String>,
        /// Reduced-scale version (well under a minute each)
        #[arg(long)]
        quick: bool,
        /// Output directory; each experiment writes to a subdirectory named by its id
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Worker threads for each experiment's points (default: one per CPU; results do not
        /// depend on it)
        #[arg(long)]
        threads: Option<usize>,
        #[arg(long)]
        quiet: bool,
    },
    /// (Re)write report.html for results directories, and index.html over reproductions
    #[command(
        after_help = "Examples:\n  npqos report results/run/demo\n  npqos report results/reproduce      # every reproduction's report and the index\n  npqos report results/sweep/demo     # the sweep's report and each point's\n\nThe pages are made from the directory's own files (report.md, the SVG plots, the resolved\nscenario, comparison.json): nothing runs again."
    )]
    Report {
        /// Results directories (of run, reproduce or sweep), or a directory holding them
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        #[arg(long)]
        quiet: bool,
    },
    /// Shape real packets between two network interfaces with the library's mechanisms (Linux):
    /// flows by 5-tuple, dqs queues, kim's event-driven shaper per flow, DRR to the output
    #[command(
        after_help = "Examples:\n  sudo npqos live live.toml\n  sudo npqos live live.toml --duration 30s --out results/live/eth1\n  npqos live live.toml --stats   (while it runs, with live.stats = \"on\")\n  npqos live live.toml --as-scenario capture.pcap > sim.toml && npqos run sim.toml\n\nA minimal CONFIG.toml:\n  [live]\n  input = \"eth1\"\n  output = \"eth2\"\n  duration = \"30s\"\n  [shaper]\n  flow_rate = \"10Mbps\"\n\nNeeds CAP_NET_RAW (root, or setcap cap_net_raw,cap_net_admin+ep). Ctrl-C stops and writes\nwhat was measured. See docs/live.md."
    )]
    Live {
        /// Configuration file (TOML: [live], [shaper], [table])
        config: PathBuf,
        /// Output directory [default: results/live/<config name>]
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override live.duration (e.g. 30s); without one, runs until Ctrl-C
        #[arg(long)]
        duration: Option<String>,
        /// No status line and no summary on stdout
        #[arg(long)]
        quiet: bool,
        /// Print the statistics of the npqos live running with this configuration (its
        /// live.stats endpoint) as `tc -s class show` prints them, and exit
        #[arg(long)]
        stats: bool,
        /// Print the router scenario that runs this configuration's pipeline over CAPTURE (an
        /// Ethernet pcap / pcapng) as tcpreplay sends it through npqos live, for `npqos run`,
        /// and exit (docs/live.md, "The simulator against the wire")
        #[arg(long, value_name = "CAPTURE")]
        as_scenario: Option<PathBuf>,
        /// With --as-scenario: how long the simulated pipeline keeps sending after the
        /// capture's last packet
        #[arg(long, default_value = "5s", requires = "as_scenario")]
        drain: String,
    },
    /// Packet-trace tools
    #[command(subcommand)]
    Trace(TraceCmd),
    /// Analytical models as sizing tools
    #[command(
        after_help = "Examples:\n  npqos model kim --queues 1000000 --link 100Gbps --overload 1.29\n  npqos model kim --queues 512000 --link 400Gbps --sizes uniform --json\n  npqos model dqs --slots 64,256,1024 --active-flows 256 --in-progress 1e6\n  npqos model qcache --threads 32 --hit-rate 0.9 --json\n  npqos model qcache --scenario scenarios/qcache-small.toml --hit-rate 0.9\n  npqos model predictive --scenario scenarios/fq-small.toml\n  npqos model everest --scenario scenarios/everest-small.toml"
    )]
    Model {
        /// Paper short name: kim (heap sizes, reschedules, off-chip accesses), dqs (AFM table
        /// search costs and memory), qcache (queue-operation latencies and throughput bounds),
        /// predictive (eq 1 estimates, eq 4 reservations, eq 13 / 18 bounds), everest (N_max
        /// and eq 7 guarantees of a scenario's services)
        short: String,
        #[command(flatten)]
        args: Box<commands::model::ModelArgs>,
    },
    /// Run a scenario over a grid of parameter values, in parallel
    #[command(
        after_help = "Examples:\n  npqos sweep scenarios/demo.toml --set traffic.overload=0.5,0.9,1.2\n  npqos sweep scenarios/demo.toml --set queues.count=8,64 --set link.rate=10Gbps,40Gbps --jobs 2 --out results/grid\n  npqos sweep scenarios/kim-small.toml --set shaper.alpha=1500B,3000B,6000B --dask tcp://10.0.0.1:8786 --out results/alpha\n\nRunning it again with the same --out runs only the points not yet finished there."
    )]
    Sweep {
        scenario: PathBuf,
        /// KEY=V1,V2,...: a dotted scenario key and its values (repeatable; the grid is the product)
        #[arg(long = "set", required = true)]
        sets: Vec<String>,
        /// Points run in parallel
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override the scenario's seed (every point uses the same seed: common random numbers)
        #[arg(long)]
        seed: Option<u64>,
        /// Run the points as tasks on the Dask cluster whose scheduler is at this address
        /// (tcp://HOST:PORT), through the npqos Python package ($NPQOS_PYTHON, else python3)
        #[arg(long, value_name = "ADDR")]
        dask: Option<String>,
        #[arg(long)]
        quiet: bool,
    },
}

#[derive(Subcommand)]
enum TraceCmd {
    /// Packets, bytes, duration, sizes, link types, flows of pcap / pcapng files
    #[command(after_help = "Examples:\n  npqos trace stats a.pcap b.pcapng\n  npqos trace stats *.pcap --json")]
    Stats {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// One JSON array: an object per file, then a `total` object when several files are given
        #[arg(long)]
        json: bool,
        /// Skip and count corrupt records instead of failing
        #[arg(long)]
        lenient: bool,
    },
    /// Run the two packet functions of Everest's prototype over captures: a port-scan detector
    /// (a source probing more than N distinct ports or hosts in a window) and a TCP SYN-flood
    /// detector (a destination with more than N half-open connections in a window)
    #[command(
        after_help = "Examples:\n  npqos trace detect capture.pcap\n  npqos trace detect ../shared/traces/ndpi/*.pcap --scan-threshold 50 --json\n\nEach file is examined on its own (its own time axis). See docs/everest.md, \"The prototype's services\"."
    )]
    Detect {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Port scan: the window, from a source's first packet
        #[arg(long, default_value = "1s")]
        scan_window: String,
        /// Port scan: more than this many distinct destination ports (or hosts) in a window
        #[arg(long, default_value_t = 100)]
        scan_threshold: u32,
        /// SYN flood: the window, from a destination's first SYN
        #[arg(long, default_value = "1s")]
        syn_window: String,
        /// SYN flood: more than this many half-open connections to one destination in a window
        #[arg(long, default_value_t = 100)]
        syn_threshold: u32,
        /// Sources (port scan) and half-open connections (SYN flood) each detector may track
        #[arg(long, default_value_t = 65_536)]
        max_tracked: usize,
        /// One JSON array: an object per file with its detections
        #[arg(long)]
        json: bool,
        /// Skip and count corrupt records instead of failing
        #[arg(long)]
        lenient: bool,
    },
    /// Write a capture as Ethernet frames (for tcpreplay on an Ethernet interface): Linux SLL /
    /// SLL2, raw IP and BSD null records get an Ethernet header, Ethernet ones are copied;
    /// packets cut by the snap length are padded with zeros to their length on the wire
    #[command(
        after_help = "Examples:\n  npqos trace ethernet sll.pcap eth.pcap\n  npqos trace ethernet in.pcapng out.pcap --src-mac 02:00:00:00:00:01 --dst-mac 5e:2a:1f:00:10:02\n\nThe output is a classic pcap with nanosecond timestamps. tcprewrite --dlt=enet does the same\nfor many captures; it left some SLL captures of the nDPI corpus unchanged (docs/live.md)."
    )]
    Ethernet {
        input: PathBuf,
        output: PathBuf,
        /// Source address of the added Ethernet headers
        #[arg(long, default_value = "02:00:00:00:00:01")]
        src_mac: String,
        /// Destination address of the added Ethernet headers
        #[arg(long, default_value = "02:00:00:00:00:02")]
        dst_mac: String,
        /// Keep packets cut by the snap length as they were captured
        #[arg(long)]
        no_pad: bool,
    },
}

fn main() -> ExitCode {
    // Output piped into `head` and the like: end quietly when the reader goes away, as Unix
    // tools do, instead of panicking on the failed write (Rust ignores SIGPIPE by default).
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    alloc::configure_from_env();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("NPQOS_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run { scenario, out, seed, threads, quiet } => commands::run::run(&scenario, out, seed, threads, quiet),
        Cmd::List { ids, json } => commands::reproduce::list(&ids, json),
        Cmd::Models => {
            for m in npqos_sim::models::MODELS {
                let (name, what) = (m.name(), m.description());
                println!("{name}\t{what}");
            }
            Ok(())
        }
        Cmd::Reproduce { ids, quick, out, seed, threads, quiet } => {
            let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            commands::reproduce::reproduce(&ids, quick, out, seed, threads.max(1), quiet)
        }
        Cmd::Live { config, stats: true, .. } => commands::live::stats(&config),
        Cmd::Live { config, as_scenario: Some(capture), drain, .. } => {
            commands::live::as_scenario(&config, &capture, &drain)
        }
        Cmd::Live { config, out, duration, quiet, .. } => commands::live::live(&config, out, duration, quiet),
        Cmd::Report { dirs, quiet } => npqos_cli::report::report(&dirs, quiet),
        Cmd::Trace(TraceCmd::Stats { files, json, lenient }) => commands::trace::stats(&files, json, lenient),
        Cmd::Trace(TraceCmd::Detect {
            files,
            scan_window,
            scan_threshold,
            syn_window,
            syn_threshold,
            max_tracked,
            json,
            lenient,
        }) => {
            let d = commands::trace::Detect { scan_window, scan_threshold, syn_window, syn_threshold, max_tracked };
            commands::trace::detect(&files, &d, json, lenient)
        }
        Cmd::Trace(TraceCmd::Ethernet { input, output, src_mac, dst_mac, no_pad }) => {
            commands::trace::ethernet(&input, &output, [&src_mac, &dst_mac], !no_pad)
        }
        Cmd::Model { short, args } => commands::model::model(&short, &args),
        Cmd::Sweep { scenario, sets, jobs, out, seed, dask, quiet } => {
            commands::sweep::sweep(&scenario, &sets, jobs, out, seed, quiet, dask)
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let code = error::exit_code(&e);
            if e.downcast_ref::<error::Exit>().is_some() {
                // The child printed its own message.
            } else if e.downcast_ref::<npqos_sim::scenario::Problems>().is_some() {
                eprint!("error: {e}");
            } else {
                eprintln!("error: {e:#}");
            }
            ExitCode::from(code as u8)
        }
    }
}
