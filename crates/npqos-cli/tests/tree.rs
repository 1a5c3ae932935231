//! The shape of the tree: no non-test source file over 800 lines and no function over 150
//! (ARCHITECTURE.md), so that a file is one thing a reader can hold and a function one step.
//!
//! Test code does not count: files named `tests.rs`, files under a `tests/` folder, and a
//! file's trailing `#[cfg(test)] mod tests`. A function runs from its `fn` line to the `}` at
//! the same indentation (rustfmt's layout).
//!
//! `KNOWN` lists what was over the limits when the check came (issue #39): each may shrink, and
//! must leave the list when it fits, but none may grow and nothing new may join.

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 150;

/// (path from the workspace root, function name or "" for the file, its size when listed).
const KNOWN: &[(&str, &str, usize)] = &[];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root")
}

/// Every non-test `.rs` file under `dir`, as paths from the workspace root.
fn sources(root: &Path, dir: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let rel = format!("{dir}/{name}");
        let kind = e.file_type().expect("a file type");
        if kind.is_dir() && name != "tests" && name != "target" {
            sources(root, &rel, out);
        } else if kind.is_file() && name.ends_with(".rs") && name != "tests.rs" {
            out.push(rel);
        }
    }
}

/// The lines of `text` before its trailing `#[cfg(test)] mod tests`.
fn non_test_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines.get(i + 1).is_some_and(|l| l.trim_start().starts_with("mod tests"))
        })
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// (name, lines) of every function with a body in `lines`.
fn functions(lines: &[&str]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let rest = ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe ", "extern \"C\" "]
            .iter()
            .fold(body, |b, p| b.strip_prefix(p).unwrap_or(b));
        let Some(sig) = rest.strip_prefix("fn ") else { continue };
        let name: String = sig.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        // The line that ends the signature: `{` opens a body, `;` means none, `}` a one-liner.
        let Some(open) = (i..lines.len()).find(|&j| {
            let t = lines[j].trim_end();
            t.ends_with('{') || t.ends_with(';') || t.ends_with('}')
        }) else {
            continue;
        };
        if !lines[open].trim_end().ends_with('{') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = (open + 1..lines.len()).find(|&k| lines[k] == close) {
            out.push((name, end - i + 1));
        }
    }
    out
}

#[test]
fn no_file_or_function_grows_past_the_limits() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["crates", "benches", "fuzz/fuzz_targets"] {
        sources(&root, dir, &mut files);
    }
    assert!(files.len() > 100, "found only {} source files under {}", files.len(), root.display());
    let mut over = Vec::new();
    let mut seen = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(root.join(f)).expect("a source file");
        let lines = non_test_lines(&text);
        let mut check = |name: &str, n: usize, max: usize| {
            if n <= max {
                return;
            }
            seen.push((f.clone(), name.to_string()));
            match KNOWN.iter().find(|k| k.0 == f && k.1 == name) {
                Some(&(_, _, was)) if n <= was => {}
                Some(&(_, _, was)) => over.push(format!("{f} {name}: {n} lines, grew from {was} (limit {max})")),
                None => over.push(format!("{f} {name}: {n} lines (limit {max})")),
            }
        };
        check("", lines.len(), MAX_FILE_LINES);
        for (name, n) in functions(&lines) {
            check(&name, n, MAX_FN_LINES);
        }
    }
    let fitted: Vec<String> = KNOWN
        .iter()
        .filter(|k| !seen.iter().any(|s| s.0 == k.0 && s.1 == k.1))
        .map(|k| format!("{} {}", k.0, k.1))
        .collect();
    assert!(over.is_empty(), "over the size limits (split them; see ARCHITECTURE.md):\n{}", over.join("\n"));
    assert!(fitted.is_empty(), "these now fit: remove them from KNOWN:\n{}", fitted.join("\n"));
}

/// The function finder on the layouts rustfmt writes.
#[test]
fn the_function_finder() {
    let text = "fn a() {\n    x();\n}\n\npub(crate) fn b(\n    y: u32,\n) -> u32 {\n    y\n}\nfn c() -> u32 { 1 }\ntrait T {\n    fn d(&self);\n    fn e(&self) {\n        f();\n    }\n}\n#[cfg(test)]\nmod tests {\n    fn g() {\n    }\n}\n";
    let lines = non_test_lines(text);
    assert_eq!(lines.len(), 16);
    let got = functions(&lines);
    assert_eq!(got, [("a".to_string(), 3), ("b".to_string(), 5), ("e".to_string(), 3)]);
}
