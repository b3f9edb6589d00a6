//! The documentation cannot lie quietly: every TOML block a user may copy (README.md,
//! the guide under docs/, and every file in config/) is parsed and run through the real
//! `dsh check-config`, which also runs the rule examples and policy tests a block
//! carries; and every relative Markdown link in the top-level documents and the guide
//! must name a file that exists, and a heading that exists when it names one.
//!
//! A block that is deliberately a fragment (a piece of a bigger file, shown to explain
//! one key) is fenced as ```` ```toml fragment ````: it must still parse as TOML, but is
//! not a whole config. Keep such blocks few; a whole config is the better example.

use crate::common;
use std::path::{Path, PathBuf};

/// The checkout this test binary was built from.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files whose relative links must resolve.
fn linked_docs(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "BENCHMARKS.md",
        "RELIABILITY.md",
    ]
    .iter()
    .map(|f| root.join(f))
    .filter(|p| p.exists())
    .collect();
    files.extend(markdown_under(&root.join("docs")));
    files
}

/// Every `.md` file under `dir`, sorted, recursively.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(markdown_under(&path));
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// A fenced code block: its info string, its opening fence's line (1-based) and text.
struct Block {
    info: String,
    line: usize,
    text: String,
}

/// The fenced blocks of a Markdown text (fences may be indented, as inside a list).
fn fenced_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, usize, usize, Vec<&str>)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((info.trim().to_string(), i + 1, indent, Vec::new()));
                }
            }
            Some((info, first, indent_at, body)) => {
                if trimmed.starts_with("```") {
                    blocks.push(Block {
                        info: std::mem::take(info),
                        line: *first,
                        text: body.join("\n"),
                    });
                    open = None;
                } else {
                    // The block's own indentation (a fence inside a list item) is not
                    // part of its text.
                    let cut = line.len().min(*indent_at);
                    let cut = if line[..cut].trim().is_empty() {
                        cut
                    } else {
                        0
                    };
                    body.push(&line[cut..]);
                }
            }
        }
    }
    blocks
}

/// The text of a Markdown file outside its fenced blocks, line by line (numbered from
/// 1), with inline code spans blanked, so a link shown as code is not followed.
fn prose_lines(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for (i, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut text = String::with_capacity(line.len());
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
                text.push(' ');
            } else {
                text.push(if in_code { ' ' } else { c });
            }
        }
        out.push((i + 1, text));
    }
    out
}

/// The targets of inline links `[text](target)` in one line of prose.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        // `[a](b "title")`: the target is the first word.
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_matches(['<', '>']).to_string());
        rest = &after[end..];
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as '-'.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().next().unwrap_or(c))
            } else if c == ' ' {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors the headings of a Markdown file give (a repeated heading gets `-1`, ...).
fn anchors(markdown: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for (_, line) in prose_lines_keeping_code(markdown) {
        let Some(heading) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = anchor_of(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.push(anchor);
    }
    seen
}

/// Like [`prose_lines`] but keeping inline code (a heading's code counts in its anchor).
fn prose_lines_keeping_code(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for (i, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            out.push((i + 1, line.to_string()));
        }
    }
    out
}

/// Every relative link of `files` that names a missing file or heading, as
/// `file:line: target (why)`.
fn broken_links(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut broken = Vec::new();
    for file in files {
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let Ok(text) = std::fs::read_to_string(file) else {
            broken.push(format!("{shown}: cannot be read"));
            continue;
        };
        for (line, prose) in prose_lines(&text) {
            for target in link_targets(&prose) {
                if target.is_empty()
                    || target.contains("://")
                    || target.starts_with("mailto:")
                    || target.starts_with('/')
                {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap_or(root).join(path)
                };
                if !dest.exists() {
                    broken.push(format!("{shown}:{line}: {target} (no such file)"));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if dest.extension().is_none_or(|e| e != "md") {
                    continue;
                }
                let dest_text = std::fs::read_to_string(&dest).unwrap_or_default();
                if !anchors(&dest_text).iter().any(|a| a == anchor) {
                    broken.push(format!("{shown}:{line}: {target} (no such heading)"));
                }
            }
        }
    }
    broken
}

/// A TOML text a user may copy, and where it is.
struct TomlExample {
    place: String,
    text: String,
    fragment: bool,
}

/// The TOML examples under `root`: the ```toml blocks of README.md and docs/, and every
/// file in config/.
fn toml_examples(root: &Path) -> Vec<TomlExample> {
    let mut out = Vec::new();
    let mut pages = vec![root.join("README.md")];
    pages.extend(markdown_under(&root.join("docs")));
    for page in pages {
        let Ok(text) = std::fs::read_to_string(&page) else {
            continue;
        };
        let shown = page
            .strip_prefix(root)
            .unwrap_or(&page)
            .display()
            .to_string();
        for block in fenced_blocks(&text) {
            let mut words = block.info.split_whitespace();
            if words.next() != Some("toml") {
                continue;
            }
            out.push(TomlExample {
                place: format!("{shown}:{}", block.line),
                text: block.text,
                fragment: words.any(|w| w == "fragment"),
            });
        }
    }
    if let Ok(entries) = std::fs::read_dir(root.join("config")) {
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for file in files.into_iter().filter(|f| f.is_file()) {
            out.push(TomlExample {
                place: file
                    .strip_prefix(root)
                    .unwrap_or(&file)
                    .display()
                    .to_string(),
                text: std::fs::read_to_string(&file).unwrap_or_default(),
                fragment: false,
            });
        }
    }
    out
}

/// Every TOML example under `root` that does not parse, or (unless a fragment) that the
/// real `dsh check-config` refuses, with what it said. Each runs in an empty
/// directory of its own, so no project file around the checkout is read with it.
async fn failing_toml(root: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for example in toml_examples(root) {
        if let Err(e) = toml::from_str::<toml::Table>(&example.text) {
            failures.push(format!("{}: not TOML: {e}", example.place));
            continue;
        }
        if example.fragment {
            continue;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("config.toml");
        std::fs::write(&config, &example.text).expect("write config");
        let out = common::dsh()
            .arg("check-config")
            .arg("--config")
            .arg(&config)
            .current_dir(dir.path())
            .env("XDG_CONFIG_HOME", dir.path())
            .env("XDG_STATE_HOME", dir.path())
            .output()
            .await
            .expect("run dsh check-config");
        if !out.status.success() {
            failures.push(format!(
                "{}: dsh check-config refused it: {}",
                example.place,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    failures
}

/// Every ```toml block of the README and the guide, and every file in config/, is a
/// config `dsh check-config` accepts, its rule examples and policy tests passing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_toml_example_in_the_docs_passes_check_config() {
    let root = repo();
    let examples = toml_examples(&root);
    assert!(
        examples.iter().any(|e| e.place.starts_with("config/")) && examples.len() > 3,
        "found too few TOML examples to check: the scan is broken"
    );
    let failures = failing_toml(&root).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every relative link in README.md, ARCHITECTURE.md, BENCHMARKS.md, RELIABILITY.md and
/// docs/ names an existing file (and heading).
#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = repo();
    let files = linked_docs(&root);
    assert!(
        files.len() > 4,
        "found too few documents: the scan is broken"
    );
    let broken = broken_links(&root, &files);
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The two checks above catch what they are for: in a tree of their own, a link to a
/// missing page, a link to a missing heading, a TOML block that does not parse and one
/// whose rule example fails are each reported with their file and line, while a good
/// link, a good block and a marked fragment pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_doc_checks_catch_a_broken_link_and_a_bad_toml_block() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Top\n\nSee [the guide](docs/guide.md#rules-and-more), [gone](docs/gone.md),\n\
         [no heading](docs/guide.md#nowhere) and `[code](not/a/link.md)`.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/guide.md"),
        "# Guide\n\n## Rules (and `more`)\n\n\
         ```toml\n[exec]\nkind = \"local\"\n```\n\n\
         ```toml\n[exec\nkind = \"local\"\n```\n\n\
         ```toml fragment\nkind = \"local\"\n```\n\n\
         ```toml\n[[permissions.rules]]\ntool = \"bash\"\ncommand = \"git push\"\n\
         action = \"allow\"\n\n[[permissions.tests]]\ncommand = \"git push\"\nmode = \"auto\"\n\
         expect = \"deny\"\n```\n",
    )
    .unwrap();
    std::fs::write(root.join("config/good.toml"), "[exec]\nkind = \"local\"\n").unwrap();

    let broken = broken_links(root, &linked_docs(root));
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].starts_with("README.md:3: docs/gone.md (no such file)"));
    assert!(broken[1].starts_with("README.md:4: docs/guide.md#nowhere (no such heading)"));

    let failures = failing_toml(root).await;
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].starts_with("docs/guide.md:10: not TOML"),
        "{failures:?}"
    );
    assert!(
        failures[1].starts_with("docs/guide.md:19: dsh check-config refused it"),
        "{failures:?}"
    );
}
