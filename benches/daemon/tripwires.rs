//! E12 (issue 40): the sandbox's end-of-command search for new repositories, on its
//! own, in process. The full search (the first command in a root: every directory
//! read beneath descriptors) against the path-based walk it replaced (every
//! directory read by its path with `std::fs::read_dir`, as issue 40's first version
//! did), and the search from the last check's snapshot (every directory stat'ed,
//! only the changed ones read) against the full one, alternating in the same run, on
//! this repository and on a tree of 100 000 files; and, on that tree only (the
//! repository is never written), once more after a command that made one directory.

use crate::*;
use dsh::exec::sandbox::RootSearch;
use serde_json::json;

/// Builds 100 000 files in 100 x 100 directories (10 each) under `at`.
fn hundred_thousand_files(at: &Path) -> Res<()> {
    for a in 0..100 {
        for b in 0..100 {
            let d = at.join(format!("{a}/{b}"));
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            for f in 0..10 {
                std::fs::write(d.join(f.to_string()), "").map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

/// The baseline: the path-based walk the descriptor search replaced (issue 40's
/// first `made_since`, births not looked at: none is new here), every directory
/// read by its path. Returns how many directories it read.
fn path_based_walk(root: &Path) -> usize {
    let mut stack = vec![root.to_path_buf()];
    let mut read = 0;
    while let Some(dir) = stack.pop() {
        read += 1;
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut bare = [false; 3];
        let mut subdirs = Vec::new();
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            if name == ".git" {
                let _ = std::fs::symlink_metadata(entry.path()).map(|m| m.created());
                continue;
            }
            match name.to_str() {
                Some("HEAD") => bare[0] = kind.is_file(),
                Some("objects") => bare[1] = kind.is_dir(),
                Some("refs") => bare[2] = kind.is_dir(),
                _ => {}
            }
            if kind.is_dir() {
                subdirs.push(entry.path());
            }
        }
        if bare == [true; 3] {
            continue;
        }
        stack.extend(subdirs);
    }
    read
}

/// What one tree's measurement gives.
struct Measured {
    rows: Vec<Row>,
    notes: Vec<String>,
    details: serde_json::Value,
}

/// One tree: `rounds` full searches, path-based walks and searches from the
/// snapshot, rotating which goes first; then, when `change` names a directory (a
/// temporary one), as many searches from the snapshot after one new directory each.
fn measure(name: &str, root: &Path, rounds: usize, change: Option<&Path>) -> Res<Measured> {
    let mut search = RootSearch::open(root).ok_or(format!("cannot open {}", root.display()))?;
    let time = |f: &mut dyn FnMut() -> Option<usize>| -> Res<(Duration, usize)> {
        let t = Instant::now();
        let read = f().ok_or("the search ran past its budget")?;
        Ok((t.elapsed(), read))
    };
    search.full().ok_or("the search ran past its budget")?; // warm the cache
    let (mut full, mut path, mut from_snapshot) = (Vec::new(), Vec::new(), Vec::new());
    let (mut read_full, mut read_path, mut read_from_snapshot) = (0, 0, 0);
    for i in 0..rounds {
        for k in 0..3 {
            match (i + k) % 3 {
                0 => {
                    let (t, read) = time(&mut || search.full())?;
                    full.push(t);
                    read_full = read;
                }
                1 => {
                    let (t, read) = time(&mut || Some(path_based_walk(root)))?;
                    path.push(t);
                    read_path = read;
                }
                _ => {
                    let (t, read) = time(&mut || search.changed())?;
                    from_snapshot.push(t);
                    read_from_snapshot = usize::max(read_from_snapshot, read);
                }
            }
        }
    }
    let mut after_change = Vec::new();
    if let Some(made) = change {
        std::fs::create_dir_all(made).map_err(|e| e.to_string())?;
        for i in 0..rounds {
            std::fs::create_dir(made.join(i.to_string())).map_err(|e| e.to_string())?;
            after_change.push(time(&mut || search.changed())?.0);
        }
    }
    let dirs = search.recorded();
    let (f, p, s) = (
        Stats::of(&full),
        Stats::of(&path),
        Stats::of(&from_snapshot),
    );
    let row = |metric: &'static str, what: &str, stats: &Stats, baseline: &Stats| Row {
        id: "E12",
        scenario: format!("end-of-command search, {name} ({dirs} directories): {what}"),
        metric,
        unit: "ms",
        dsh: stats.p50,
        baseline: Some(baseline.p50),
        ratio: Some(stats.p50 / baseline.p50),
        target: Target::Reported,
    };
    let mut rows = vec![
        row("median", "full search vs the path-based walk", &f, &p),
        row(
            "median, nothing changed",
            "from the snapshot vs full",
            &s,
            &f,
        ),
    ];
    let mut notes = vec![
        f.line(&format!("E12 {name}: full search        ")),
        p.line(&format!("E12 {name}: path-based walk    ")),
        s.line(&format!("E12 {name}: from the snapshot  ")),
        format!(
            "E12 {name}: directories read: full {read_full}, path-based {read_path}, from the \
             snapshot at most {read_from_snapshot} (racy ones, changed in the last 2 s, are read \
             again)"
        ),
    ];
    let mut details = json!({"directories": dirs, "full": f.json(), "path_based": p.json(),
                             "snapshot": s.json()});
    if !after_change.is_empty() {
        let c = Stats::of(&after_change);
        rows.push(row(
            "median, one new directory",
            "from the snapshot vs full",
            &c,
            &f,
        ));
        notes.push(c.line(&format!("E12 {name}: after one new dir  ")));
        details["changed"] = c.json();
    }
    Ok(Measured {
        rows,
        notes,
        details,
    })
}

pub(crate) async fn e12(env: &Env) -> Res<Outcome> {
    let rounds = env.counts.e12_rounds;
    let tree = env.root.join("e12-tree");
    hundred_thousand_files(&tree)?;
    // A directory changed less than 2 s before a snapshot is read again at the next
    // search (racy stamps): the trees are left alone that long first, as a tree a
    // person works in mostly is.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mine = measure("this repository", repo, rounds, None)?;
    let made = tree.join("made-by-a-command");
    let tree_measured = measure("100 000 files", &tree, rounds, Some(&made))?;
    let _ = std::fs::remove_dir_all(&tree);
    let mut rows = mine.rows;
    rows.extend(tree_measured.rows);
    let mut notes = mine.notes;
    notes.extend(tree_measured.notes);
    Ok(Outcome {
        rows,
        notes,
        details: json!({"repository": mine.details, "tree": tree_measured.details,
                        "rounds": rounds}),
    })
}
