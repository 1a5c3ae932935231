//! Everest's prototype on real frames (docs/everest.md, "The prototype on real frames"): the
//! phased capture of `npqos_cli::live::prototype` sent by tcpreplay through `npqos live` with
//! four virtual processors among the port-scan and the SYN-flood detectors, on the namespace
//! bed, and the router simulation of the same configuration over the same capture. Prints per
//! phase the processors and late packets of each, and what each detected; writes the plots
//! (offered rate, processors, late packets per service, simulation beside live). Needs root
//! and tcpreplay.
//!
//! `cargo bench -p npqos-cli --bench prototype`: Everest and Static, the full profile (6 s).
//! `NPQOS_PROTOTYPE_SCALE=0.2` runs the quick one (1.2 s), `NPQOS_PROTOTYPE_POLICIES=everest`
//! one policy, `NPQOS_PROTOTYPE_OUT=dir` puts the plots and both runs' results (`<policy>/sim`,
//! `<policy>/live`) there (default `target/prototype`).

#[cfg(target_os = "linux")]
fn main() {
    use npqos_cli::live::{netns, prototype, wire};
    use std::path::PathBuf;
    if let Some(why) = wire::unavailable() {
        println!("SKIPPED the prototype benchmark: {why}");
        return;
    }
    let scale: f64 = std::env::var("NPQOS_PROTOTYPE_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let policies = std::env::var("NPQOS_PROTOTYPE_POLICIES").unwrap_or_else(|_| "everest,static".into());
    let out = PathBuf::from(
        std::env::var("NPQOS_PROTOTYPE_OUT")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/prototype").to_string()),
    );
    std::fs::create_dir_all(&out).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("prototype.pcap");
    let n = prototype::capture(&cap, scale, 6).unwrap();
    let mid_cpu = if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 { 1 } else { 0 };
    let npqos = PathBuf::from(std::env::var_os("NPQOS_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_npqos").into()));
    println!("capture: {n} frames, the profile of everest-fig6 x {scale} in time, 5,000 packets/s per processor");
    for policy in policies.split(',') {
        let bed = netns::Bed::new(&format!("p{}", std::process::id() % 100_000)).unwrap();
        // The two runs' results (sim/, live/) are kept beside the plots.
        let case = out.join(policy);
        let c = wire::compare(
            &npqos,
            &bed,
            &cap,
            &prototype::config(policy),
            &case,
            mid_cpu,
            std::time::Duration::from_secs(2),
        )
        .unwrap();
        println!("\n### {policy}: {} packets over {:.2} s\n", c.packets, c.span.as_secs_f64());
        println!("tcpreplay: {}", c.replay);
        match c.diff.is_empty() {
            true => println!("resolved configurations: identical\n"),
            false => println!("resolved configurations differ:\n```\n{}```\n", c.diff),
        }
        print!("{}", prototype::table(&c, &case, scale).unwrap());
        let title = format!("Everest's prototype, {policy}");
        for f in prototype::plots(&case, &out, &format!("prototype-{policy}"), &title).unwrap() {
            println!("plot: {}", f.display());
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("SKIPPED the prototype benchmark: npqos live is Linux only");
}
