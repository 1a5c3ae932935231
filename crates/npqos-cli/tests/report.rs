//! report.html and index.html: well-formed, self-contained, every local link resolving, made
//! again identically by `npqos report`, and drawn by a real browser (headless Chromium).

mod common;
use common::*;
use std::path::{Path, PathBuf};

const SCENARIO: &str =
    "[run]\nduration = \"20ms\"\nreplications = 2\n[link]\nrate = \"1Gbps\"\n[queues]\ncount = 8\n[traffic]\noverload = 1.1\n";

/// A run, a sweep and two quick reproductions (kim and everest) under one temporary directory.
fn results() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let s = d.path().join("demo.toml");
    std::fs::write(&s, SCENARIO).unwrap();
    let (run_dir, sweep_dir, repro) = (d.path().join("run"), d.path().join("sweep"), d.path().join("repro"));
    for args in [
        vec!["run", s.to_str().unwrap(), "--quiet", "--out", run_dir.to_str().unwrap()],
        vec![
            "sweep",
            s.to_str().unwrap(),
            "--set",
            "traffic.overload=0.5,1.5",
            "--quiet",
            "--out",
            sweep_dir.to_str().unwrap(),
        ],
        vec!["reproduce", "kim-fig7", "everest-fig3b", "--quick", "--quiet", "--out", repro.to_str().unwrap()],
    ] {
        let o = run(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    (d, run_dir, sweep_dir, repro)
}

/// The page parsed as XML (our pages are XHTML-clean), after the HTML5 doctype.
fn parse(html: &str) -> roxmltree::Document<'_> {
    let body = html.strip_prefix("<!DOCTYPE html>\n").expect("starts with the HTML5 doctype");
    roxmltree::Document::parse(body).unwrap_or_else(|e| panic!("not well-formed: {e}"))
}

/// Every page check but the browser: well-formed, no script, no stylesheet or font fetched, no
/// URL outside the directory, every local link resolving. Returns the number of inline plots.
fn check_page(path: &Path) -> usize {
    let html = std::fs::read_to_string(path).unwrap();
    let doc = parse(&html);
    let dir = path.parent().unwrap();
    let mut figures = 0;
    for n in doc.descendants().filter(|n| n.is_element()) {
        let tag = n.tag_name().name();
        assert!(!matches!(tag, "script" | "link" | "iframe" | "object" | "embed"), "{}: <{tag}>", path.display());
        if tag == "figure" && n.attribute("class") == Some("plot") {
            figures += 1;
            assert!(n.children().any(|c| c.tag_name().name() == "svg"), "{}: a plot without its svg", path.display());
        }
        for a in n.attributes() {
            if a.name().starts_with("xmlns") || a.namespace().is_some() {
                continue; // namespaces name, they do not fetch
            }
            let v = a.value();
            assert!(
                !v.contains("://") && !v.starts_with("//"),
                "{}: {}={v:?} leaves the page",
                path.display(),
                a.name()
            );
            if matches!(a.name(), "href" | "src") && !v.starts_with('#') {
                let file = v.split('#').next().unwrap();
                assert!(dir.join(file).exists(), "{}: link {v:?} does not resolve", path.display());
            }
        }
    }
    assert!(!html.contains("@import") && !html.contains("url("), "{}: CSS fetches something", path.display());
    figures
}

#[test]
fn reports_are_self_contained_well_formed_and_remade_identically() {
    let (d, run_dir, sweep_dir, repro) = results();
    let mut pages =
        vec![run_dir.join("report.html"), sweep_dir.join("report.html"), sweep_dir.join("point-0001/report.html")];
    pages.extend(["kim-fig7", "everest-fig3b"].map(|id| repro.join(id).join("report.html")));
    for p in &pages {
        let md = std::fs::read_to_string(p.with_file_name("report.md")).unwrap();
        let images = md.lines().filter(|l| l.contains("![") && l.contains(".svg)")).count();
        let figures = check_page(p);
        assert_eq!(figures, images, "{}: every plot of report.md is inline", p.display());
        let html = std::fs::read_to_string(p).unwrap();
        // The page shows what report.md shows: the comparison, the results, the assumptions.
        for heading in md.lines().filter_map(|l| l.strip_prefix("## ")) {
            let heading = heading.split(" (").next().unwrap();
            assert!(html.contains(heading), "{}: section {heading:?} missing", p.display());
        }
    }
    assert!(std::fs::read_to_string(&pages[0]).unwrap().contains("scenario.resolved.toml"));
    // The index: one row per reproduction, its agreement counts, a thumbnail of its main plot.
    let index = repro.join("index.html");
    check_page(&index);
    let html = std::fs::read_to_string(&index).unwrap();
    let doc = parse(&html);
    let rows = doc.descendants().filter(|n| n.tag_name().name() == "tr").count();
    assert_eq!(rows, 3, "a header and one row per reproduction");
    assert!(html.contains("kim-fig7/report.html") && html.contains("src=\"everest-fig3b/"), "{html}");
    assert!(html.contains("2 reproductions, 2 complete"), "{html}");
    // A row with no paper number compared says why, never 0 / 0 / 0.
    assert!(!html.contains("<td class=\"num\">0</td><td class=\"num\">0</td><td class=\"num\">0</td>"), "{html}");
    assert!(html.contains("no number of the paper compared here") || html.contains("at full scale only"), "{html}");

    // `npqos report` makes the same pages again from the directories' files.
    let before: Vec<Vec<u8>> = pages.iter().chain([&index]).map(|p| std::fs::read(p).unwrap()).collect();
    for p in pages.iter().chain([&index]) {
        std::fs::remove_file(p).unwrap();
    }
    for dir in [&run_dir, &sweep_dir, &repro] {
        let o = run(&["report", dir.to_str().unwrap(), "--quiet"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let after: Vec<Vec<u8>> = pages.iter().chain([&index]).map(|p| std::fs::read(p).unwrap()).collect();
    assert!(before == after, "npqos report remade different pages");
    let o = run(&["report", d.path().join("nothing").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::create_dir(d.path().join("empty")).unwrap();
    let o = run(&["report", d.path().join("empty").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "a directory without reports: {}", stderr(&o));
    assert!(stderr(&o).contains("no report.md here or in its subdirectories"), "{}", stderr(&o));
}

/// Chromium's binary, if one is installed.
fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|name| {
        std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(name)).find(|p| p.is_file())
    })
}

/// Screenshot of `page` (PNG) and Chromium's log, with every host name unresolvable so any
/// fetch from the network would fail and be logged.
fn screenshot(browser: &Path, page: &Path, png: &Path) -> Result<String, String> {
    let o = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1280,800",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=1",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .map_err(|e| format!("cannot start {}: {e}", browser.display()))?;
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    if !o.status.success() || !png.is_file() {
        return Err(format!("{} exited with {}: {}", browser.display(), o.status, log.lines().last().unwrap_or("")));
    }
    Ok(log)
}

/// The share of pixels that are not (near) white, and the number of distinct colours.
fn ink(png: &Path) -> (f64, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let px = &buf[..info.buffer_size()];
    let mut colours = std::collections::HashSet::new();
    let mut inked = 0usize;
    let n = px.len() / channels;
    for p in px.chunks(channels) {
        if p[..3].iter().any(|&c| c < 235) {
            inked += 1;
        }
        colours.insert((p[0] >> 3, p[1] >> 3, p[2] >> 3));
    }
    (inked as f64 / n as f64, colours.len())
}

#[test]
fn reports_render_in_headless_chromium() {
    let Some(browser) = chromium() else {
        skip("reports_render_in_headless_chromium", "no chromium on PATH (Debian: apt-get install chromium)");
        return;
    };
    let (d, run_dir, _, repro) = results();
    for page in [run_dir.join("report.html"), repro.join("index.html"), repro.join("everest-fig3b/report.html")] {
        let png = d.path().join(format!("{}.png", page.parent().unwrap().file_name().unwrap().to_string_lossy()));
        let log = match screenshot(&browser, &page, &png) {
            Ok(log) => log,
            Err(why) => {
                skip("reports_render_in_headless_chromium", &format!("Chromium cannot run here: {why}"));
                return;
            }
        };
        let (share, colours) = ink(&png);
        assert!(share > 0.02 && colours > 8, "{}: a blank page? {share:.3} inked, {colours} colours", page.display());
        // Nothing on the console (errors, failed loads), and no request but for local files. The
        // browser's own services (time, update, accounts: Google hosts) ask even for a blank
        // page and are not the page's.
        let page_requests = page_requests(&log);
        assert!(page_requests.is_empty(), "{}: requested {page_requests:?}", page.display());
        let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(console.is_empty(), "{}: console says {console:?}", page.display());
    }
    // The request check sees a page that fetches something.
    let leaky = d.path().join("leaky.html");
    std::fs::write(&leaky, "<!DOCTYPE html><html><body><p>x</p><img src=\"https://example.com/a.png\"/></body></html>")
        .unwrap();
    if let Ok(log) = screenshot(&browser, &leaky, &d.path().join("leaky.png")) {
        assert_eq!(page_requests(&log), ["https://example.com/a.png"]);
    }
}

/// The URLs a page asked for, from Chromium's verbose log: every request but for local files and
/// the browser's own services.
fn page_requests(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split("NotifyBeforeURLRequest: ").nth(1))
        .map(str::trim)
        .filter(|u| !u.starts_with("file://") && !u.starts_with("data:"))
        .filter(|u| {
            let host = u.split("://").nth(1).unwrap_or("").split(['/', '?', ':']).next().unwrap_or("");
            !["google.com", "googleapis.com", "gvt1.com"].iter().any(|g| host == *g || host.ends_with(&format!(".{g}")))
        })
        .map(String::from)
        .collect()
}

/// The paper's values on the plots of the quantities the paper gives numbers for, where those
/// quantities are ratios, thresholds or crossings rather than plotted points as such: the count
/// each plot's caption states, which is the number of hollow diamonds it draws.
#[test]
fn plots_show_the_papers_values_beside_ours() {
    let d = tempfile::tempdir().unwrap();
    let ids = ["kim-table10", "predictive-fig5-7", "predictive-fig10-12", "qcache-fig5", "qcache-fig6", "qcache-fig10"];
    let mut args = vec!["reproduce"];
    args.extend(ids);
    args.extend(["--quick", "--quiet", "--out", d.path().to_str().unwrap()]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    if ndpi_dir().is_none() {
        skip("plots_show_the_papers_values_beside_ours (qcache-fig10's edge trace)", "no ../shared/traces/ndpi");
    }
    let shown_one = |id: &str, plot: &str| -> usize {
        let svg = std::fs::read_to_string(d.path().join(id).join(format!("{plot}.svg"))).unwrap();
        // A diamond is a white four-point polygon; the legend draws one per curve with paper values.
        let diamonds = svg.matches("<polygon opacity=\"1\" fill=\"#FFFFFF\"").count();
        let report = std::fs::read_to_string(d.path().join(id).join("report.md")).unwrap();
        let line = report.lines().find(|l| l.contains(&format!("({plot}.svg)"))).unwrap();
        let stated = line
            .split("the paper's ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .map_or(0, |n| n.parse::<usize>().unwrap());
        let legend = ["\npaper: ", "\npaper, ", "\npaper\n"].iter().map(|m| svg.matches(m).count()).sum::<usize>();
        assert_eq!(diamonds, stated + legend, "{id}/{plot}: drawn vs stated");
        stated
    };
    // A plot of more than six curves is drawn as small multiples (`<plot>-1.svg`, ...): each
    // panel states and draws its own.
    let shown = |id: &str, plot: &str| -> usize {
        let dir = d.path().join(id);
        if !dir.join(format!("{plot}.svg")).is_file() {
            let panels: Vec<String> =
                (1..).map(|k| format!("{plot}-{k}")).take_while(|p| dir.join(format!("{p}.svg")).is_file()).collect();
            assert!(panels.len() >= 2, "{id}/{plot}: neither one plot nor panels");
            return panels.iter().map(|p| shown_one(id, p)).sum();
        }
        shown_one(id, plot)
    };
    for (id, plot, n) in [
        ("kim-table10", "table10-error", 4),
        ("predictive-fig5-7", "fig5-misordering", 4),
        ("predictive-fig10-12", "fig10", 4),
        ("predictive-fig10-12", "fig11", 4),
        ("qcache-fig5", "fig5_throughput", 5),
        ("qcache-fig6", "fig6a_hit_rate", 3),
        ("qcache-fig6", "fig6b_weight", 3),
        // The edge workload (and its paper value) needs the nDPI corpus (../shared/traces).
        ("qcache-fig10", "fig10_interarrival_cdf", 3 + usize::from(ndpi_dir().is_some())),
    ] {
        assert_eq!(shown(id, plot), n, "{id}/{plot}");
    }
    // Every quantity these reproductions compare with a paper number is on one of its plots
    // (the agreement plot aside), except the one with no plot of its own: kim's mean error.
    for id in ids {
        let c: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join(id).join("comparison.json")).unwrap()).unwrap();
        let with_paper = c["comparisons"].as_array().unwrap().iter().filter(|r| !r["paper"].is_null()).count();
        let report = std::fs::read_to_string(d.path().join(id).join("report.md")).unwrap();
        let drawn: usize = report
            .lines()
            .filter(|l| l.starts_with("![") && !l.contains("paper-agreement.svg"))
            .filter_map(|l| l.split("the paper's ").nth(1)?.split(' ').next()?.parse::<usize>().ok())
            .sum();
        let unplotted = usize::from(id == "kim-table10");
        assert!(drawn + unplotted >= with_paper, "{id}: {drawn} drawn of {with_paper}");
    }
}
