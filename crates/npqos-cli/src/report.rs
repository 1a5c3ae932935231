//! `report.html` beside every `report.md`, and `index.html` over a directory of reproductions.
//!
//! A report page is report.md rendered to HTML (pulldown-cmark, tables on) with every SVG plot
//! it references inlined, the resolved scenario (when there is one) in a folded block, and one
//! inline stylesheet: one self-contained file that loads nothing, runs no script, reads offline
//! and prints. Because the page is made from the directory's own files, `npqos report DIR`
//! remakes it for any results directory without running anything again.
//!
//! The index lists every reproduction under a root: id, title, whether it completed, how many of
//! its compared quantities are within 10% of the paper, within 2x, or further, a link to its
//! report and a thumbnail of its main plot (the first plot its report shows).

use crate::error::bad;
use crate::output::write_atomic;
use anyhow::{Context, Result};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The page's stylesheet: readable on screen, compact on paper, no web fonts.
const CSS: &str = "
:root { color-scheme: light; --ink: #1b1f24; --muted: #57606a; --rule: #d0d7de; --band: #f6f8fa; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1120px; padding: 24px 32px 64px; color: var(--ink);
       font: 15px/1.5 system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif; }
h1 { font-size: 1.7em; margin: 0.2em 0 0.4em; }
h2 { font-size: 1.3em; margin-top: 1.8em; padding-bottom: 0.2em; border-bottom: 1px solid var(--rule); }
h3 { font-size: 1.05em; margin-top: 1.4em; }
a { color: var(--accent); }
code { font: 0.9em/1.4 ui-monospace, 'DejaVu Sans Mono', monospace; background: var(--band); padding: 0 3px; border-radius: 3px; }
pre { background: var(--band); padding: 12px; overflow-x: auto; border-radius: 6px; }
pre code { padding: 0; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid var(--rule); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--band); }
tr:nth-child(even) td { background: #fbfcfd; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure.plot { margin: 1em 0; }
figure.plot svg { max-width: 100%; height: auto; border: 1px solid var(--rule); border-radius: 4px; }
blockquote { margin: 1em 0; padding: 8px 14px; border-left: 4px solid #d4a72c; background: #fff8e1; }
details { margin: 1em 0; }
summary { cursor: pointer; color: var(--muted); }
.meta { color: var(--muted); }
.nowrap { white-space: nowrap; }
.ok { color: #1a7f37; font-weight: 600; } .warn { color: #9a6700; font-weight: 600; } .bad { color: #cf222e; font-weight: 600; }
img.thumb { width: 220px; height: auto; border: 1px solid var(--rule); border-radius: 3px; background: #fff; }
@media print { body { max-width: none; padding: 0; font-size: 11px; } figure.plot, table { break-inside: avoid; } details { display: none; } }
";

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// An SVG file's text ready to sit inside HTML: without an XML declaration or doctype.
fn inline_svg(svg: &str) -> &str {
    let mut s = svg.trim_start();
    for prefix in ["<?xml", "<!DOCTYPE"] {
        if s.starts_with(prefix) {
            s = s.find('>').map_or(s, |i| s[i + 1..].trim_start());
        }
    }
    s
}

/// Whether a table cell holds a number (right-aligned).
fn numeric(cell: &str) -> bool {
    let t = cell.trim().trim_end_matches('%');
    !t.is_empty() && t.split(" ± ").all(|p| p.trim().trim_start_matches('+').parse::<f64>().is_ok())
}

/// report.md as HTML: images of local SVG files become the inline SVG in a figure; numeric
/// table cells are right-aligned.
fn markdown_html(md: &str, dir: &Path) -> String {
    let mut events = Vec::new();
    let mut in_image = false;
    let mut in_head = false;
    let mut in_cell = false;
    let mut cell_text = String::new();
    let mut cell_events: Vec<Event> = Vec::new();
    for ev in Parser::new_ext(md, Options::ENABLE_TABLES) {
        match ev {
            Event::Start(Tag::Image { dest_url, title, .. }) => {
                let file = dir.join(dest_url.as_ref());
                let local = !dest_url.contains(':') && !dest_url.starts_with('/');
                match std::fs::read_to_string(&file) {
                    Ok(svg) if local && dest_url.ends_with(".svg") => {
                        let caption = if title.is_empty() { String::new() } else { escape(&title) };
                        events.push(Event::Html(
                            format!(
                                "<figure class=\"plot\" id=\"{}\">{}{}</figure>",
                                escape(&dest_url),
                                inline_svg(&svg),
                                if caption.is_empty() {
                                    String::new()
                                } else {
                                    format!("<figcaption>{caption}</figcaption>")
                                }
                            )
                            .into(),
                        ));
                    }
                    _ => events.push(Event::Html(
                        format!("<p class=\"meta\">(plot {} is missing)</p>", escape(&dest_url)).into(),
                    )),
                }
                in_image = true;
            }
            Event::End(TagEnd::Image) => in_image = false,
            _ if in_image => {}
            Event::Start(Tag::TableHead) => {
                in_head = true;
                events.push(Event::Start(Tag::TableHead));
            }
            Event::End(TagEnd::TableHead) => {
                in_head = false;
                events.push(Event::End(TagEnd::TableHead));
            }
            Event::Start(Tag::TableCell) => {
                in_cell = true;
                cell_text.clear();
                cell_events.clear();
            }
            Event::End(TagEnd::TableCell) => {
                in_cell = false;
                // Cells are written by hand so numbers can carry a class (header cells are <th>).
                let mut inner = String::new();
                pulldown_cmark::html::push_html(&mut inner, cell_events.drain(..));
                let html = if in_head {
                    format!("<th>{inner}</th>")
                } else if numeric(&cell_text) {
                    format!("<td class=\"num\">{inner}</td>")
                } else {
                    format!("<td>{inner}</td>")
                };
                events.push(Event::Html(html.into()));
            }
            e if in_cell => {
                if let Event::Text(t) | Event::Code(t) = &e {
                    cell_text.push_str(t);
                }
                cell_events.push(e);
            }
            e => events.push(e),
        }
    }
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    html
}

/// A complete page around `body`.
fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<meta name=\"generator\" content=\"npqos {}\"/>\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n",
        crate::output::version(),
        escape(title)
    )
}

/// Writes `dir/report.html` from `dir/report.md`, the SVG plots it references and
/// `scenario.resolved.toml` (if any).
pub fn write_html(dir: &Path) -> Result<()> {
    let md_path = dir.join("report.md");
    let md = std::fs::read_to_string(&md_path).with_context(|| format!("reading {}", md_path.display()))?;
    let title = md.lines().find_map(|l| l.strip_prefix("# ")).unwrap_or("npqos report").trim().to_string();
    let mut body = markdown_html(&md, dir);
    if let Ok(toml) = std::fs::read_to_string(dir.join("scenario.resolved.toml")) {
        let _ = write!(
            body,
            "<h2>Scenario</h2>\n<details><summary>scenario.resolved.toml: every parameter of this run, defaults filled in</summary>\n<pre><code>{}</code></pre>\n</details>\n",
            escape(&toml)
        );
    }
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| {
                    !n.starts_with('.')
                        && (n.ends_with(".json")
                            || n.ends_with(".csv")
                            || n.ends_with(".sqlite")
                            || n.ends_with(".toml"))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let links: Vec<String> = files.iter().map(|f| format!("<a href=\"{0}\">{0}</a>", escape(f))).collect();
    let _ = write!(body, "<p class=\"meta\">Data beside this page: {}.</p>", links.join(", "));
    write_atomic(dir, "report.html", page(&title, &body).as_bytes())
}

/// How a reproduction's compared quantities stand against the paper's numbers.
#[derive(Default, Clone, Copy)]
struct Agreement {
    within_10pct: usize,
    within_2x: usize,
    further: usize,
}

fn agreement(comparison: &Value) -> Agreement {
    let mut a = Agreement::default();
    for c in comparison["comparisons"].as_array().into_iter().flatten() {
        let (Some(ours), Some(paper)) = (c["ours"].as_f64(), c["paper"].as_f64()) else {
            continue;
        };
        let close = if paper == 0.0 { ours.abs() < 1e-9 } else { ((ours - paper) / paper).abs() <= 0.10 };
        let ratio = ours / paper;
        if close {
            a.within_10pct += 1;
        } else if ratio.is_finite() && (0.5..=2.0).contains(&ratio) {
            a.within_2x += 1;
        } else {
            a.further += 1;
        }
    }
    a
}

/// The reproductions under `root`: subdirectories with a summary.json of kind `reproduce`.
fn reproductions(root: &Path) -> Vec<(String, PathBuf, Value)> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let d = e.path();
        let Some(summary) =
            std::fs::read(d.join("summary.json")).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        else {
            continue;
        };
        if summary["kind"] == "reproduce" {
            found.push((e.file_name().to_string_lossy().to_string(), d, summary));
        }
    }
    // In the order `npqos list` gives, unknown ids last.
    let order = |id: &str| npqos_sim::experiments::EXPERIMENTS.iter().position(|e| e.id == id).unwrap_or(usize::MAX);
    found.sort_by(|a, b| order(&a.0).cmp(&order(&b.0)).then(a.0.cmp(&b.0)));
    found
}

/// Writes `root/index.html` over every reproduction under `root`, if there is any. Returns how
/// many it lists.
pub fn write_index(root: &Path) -> Result<usize> {
    let list = reproductions(root);
    if list.is_empty() {
        return Ok(0);
    }
    let mut rows = String::new();
    let mut total = Agreement::default();
    let mut complete_n = 0;
    for (id, d, summary) in &list {
        let complete = summary["complete"] == Value::Bool(true);
        complete_n += complete as usize;
        let comparison = std::fs::read(d.join("comparison.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .unwrap_or(Value::Null);
        let a = agreement(&comparison);
        total.within_10pct += a.within_10pct;
        total.within_2x += a.within_2x;
        total.further += a.further;
        let title = npqos_sim::experiments::find(id).map(|e| e.description).unwrap_or("");
        let quick =
            if summary["quick"] == Value::Bool(true) { " <span class=\"meta nowrap\">(--quick)</span>" } else { "" };
        let md = std::fs::read_to_string(d.join("report.md")).unwrap_or_default();
        let thumb = main_plot(&md)
            .filter(|f| d.join(f).is_file())
            .map(|f| format!("<a href=\"{0}/report.html#{1}\"><img class=\"thumb\" src=\"{0}/{1}\" alt=\"main plot of {0}\"/></a>", escape(id), escape(&f)))
            .unwrap_or_else(|| "<span class=\"meta\">no plot</span>".into());
        let report = if d.join("report.html").is_file() { "report.html" } else { "report.md" };
        let status =
            if complete { "<span class=\"ok\">complete</span>" } else { "<span class=\"bad\">incomplete</span>" };
        // No quantity with a paper number: say why instead of three zeros (the experiment
        // declares the paper's numbers it compares at full scale).
        let declared = npqos_sim::experiments::find(id).is_some_and(|e| !e.paper.is_empty());
        let counts = match (a.within_10pct + a.within_2x + a.further, !quick.is_empty() && declared) {
            (0, true) => "<td colspan=\"3\" class=\"meta\">compared with the paper at full scale only (run it without --quick)</td>".to_string(),
            (0, false) => "<td colspan=\"3\" class=\"meta\">no number of the paper compared here</td>".to_string(),
            _ => format!(
                "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
                a.within_10pct, a.within_2x, a.further
            ),
        };
        let _ = writeln!(
            rows,
            "<tr><td><a href=\"{0}/{report}\"><code>{0}</code></a>{quick}</td><td>{1}</td><td>{status}</td>{counts}<td>{thumb}</td></tr>",
            escape(id),
            escape(title),
        );
    }
    let body = format!(
        "<h1>npqos reproductions</h1>\n<p class=\"meta\">npqos {} (commit {}). {} reproductions, {} complete. Compared quantities (ours against the paper's number): <span class=\"ok\">{} within 10%</span>, <span class=\"warn\">{} within 2x</span>, <span class=\"bad\">{} further</span>. Each id links to its report: the comparison table, every plot, the notes on where and why we differ, and the assumptions.</p>\n<table>\n<thead><tr><th>id</th><th>what it reproduces</th><th>status</th><th>within 10%</th><th>within 2x</th><th>further</th><th>main plot</th></tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n",
        crate::output::version(),
        crate::output::git_commit(),
        list.len(),
        complete_n,
        total.within_10pct,
        total.within_2x,
        total.further
    );
    write_atomic(root, "index.html", page("npqos reproductions", &body).as_bytes())?;
    Ok(list.len())
}

/// The first SVG a report.md shows: its main plot.
fn main_plot(md: &str) -> Option<String> {
    Parser::new(md).find_map(|e| match e {
        Event::Start(Tag::Image { dest_url, .. }) if dest_url.ends_with(".svg") => Some(dest_url.to_string()),
        _ => None,
    })
}

/// `npqos report DIR...`: remakes report.html in each results directory under each DIR (the
/// directory itself, its reproductions, a sweep's points) and index.html where there are
/// reproductions.
pub fn report(dirs: &[PathBuf], quiet: bool) -> Result<()> {
    for dir in dirs {
        if !dir.is_dir() {
            return Err(bad(format!("{}: no such directory", dir.display())));
        }
        let mut n = 0;
        if dir.join("report.md").is_file() {
            write_html(dir)?;
            n += 1;
        }
        let mut subdirs: Vec<PathBuf> =
            std::fs::read_dir(dir)?.flatten().map(|e| e.path()).filter(|p| p.join("report.md").is_file()).collect();
        subdirs.sort();
        for d in &subdirs {
            write_html(d)?;
            n += 1;
        }
        let indexed = write_index(dir)?;
        if n == 0 {
            return Err(bad(format!(
                "{}: no report.md here or in its subdirectories; expected a results directory of npqos run, reproduce or sweep",
                dir.display()
            )));
        }
        if !quiet {
            let idx = if indexed > 0 { format!(" and index.html ({indexed} reproductions)") } else { String::new() };
            println!("{}: {n} report.html{idx}", dir.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_recognised_in_cells() {
        for n in ["1", "-2.5", "+3.1%", "1.5e6", "12.3 ± 0.4"] {
            assert!(numeric(n), "{n}");
        }
        for t in ["", "kim", "—", "queues=1000", "1 B"] {
            assert!(!numeric(t), "{t}");
        }
    }

    #[test]
    fn agreement_counts_each_quantity_once() {
        let v: Value = serde_json::json!({"comparisons": [
            {"ours": 105.0, "paper": 100.0}, {"ours": 150.0, "paper": 100.0}, {"ours": 30.0, "paper": 100.0},
            {"ours": 0.0, "paper": 0.0}, {"ours": 1.0, "paper": null}, {"ours": 250.0, "paper": 100.0}]});
        let a = agreement(&v);
        assert_eq!((a.within_10pct, a.within_2x, a.further), (2, 1, 2));
    }

    #[test]
    fn an_svg_loses_its_xml_declaration_and_header_cells_become_th() {
        assert_eq!(inline_svg("<?xml version=\"1.0\"?>\n<svg/>"), "<svg/>");
        let d = tempfile::tempdir().unwrap();
        let html = markdown_html("| a | b |\n|---|---|\n| x | 1.5 |\n", d.path());
        assert!(html.contains("<th>a</th>") && html.contains("<td class=\"num\">1.5</td>"), "{html}");
        assert!(html.contains("<td>x</td>"), "{html}");
    }
}
