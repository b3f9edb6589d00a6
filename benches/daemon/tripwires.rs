//! E12 (issue 40): the sandbox's end-of-command search for new repositories, on its
//! own, in process. The full search every check made before (every directory of the
//! root read) against the search from the last check's snapshot (every directory
//! stat'ed, only the changed ones read), alternating in the same run, on this
//! repository and on a tree of 100 000 files; and once more after a command that
//! made one directory.

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

/// One tree: `rounds` full searches and as many from the snapshot, alternating;
/// then as many from the snapshot after one new directory each.
fn measure(
    name: &str,
    root: &Path,
    rounds: usize,
) -> Res<(Row, Row, Vec<String>, serde_json::Value)> {
    let mut search = RootSearch::open(root).ok_or(format!("cannot open {}", root.display()))?;
    let time = |f: &mut dyn FnMut() -> Option<usize>| -> Res<(Duration, usize)> {
        let t = Instant::now();
        let read = f().ok_or("the search ran past its budget")?;
        Ok((t.elapsed(), read))
    };
    search.full().ok_or("the search ran past its budget")?; // warm the cache
    let (mut full, mut from_snapshot, mut after_change) = (Vec::new(), Vec::new(), Vec::new());
    let mut read_from_snapshot = 0;
    for i in 0..rounds {
        let mut one_full = || time(&mut || search.full());
        if i % 2 == 0 {
            full.push(one_full()?.0);
            let (t, read) = time(&mut || search.changed())?;
            from_snapshot.push(t);
            read_from_snapshot = read_from_snapshot.max(read);
        } else {
            let (t, read) = time(&mut || search.changed())?;
            from_snapshot.push(t);
            read_from_snapshot = read_from_snapshot.max(read);
            full.push(time(&mut || search.full())?.0);
        }
    }
    let made = root.join(".dsh-bench-e12");
    std::fs::create_dir_all(&made).map_err(|e| e.to_string())?;
    for i in 0..rounds {
        std::fs::create_dir(made.join(i.to_string())).map_err(|e| e.to_string())?;
        after_change.push(time(&mut || search.changed())?.0);
    }
    let _ = std::fs::remove_dir_all(&made);
    let dirs = search.recorded();
    let (f, s, c) = (
        Stats::of(&full),
        Stats::of(&from_snapshot),
        Stats::of(&after_change),
    );
    let row = |metric: &'static str, stats: &Stats| Row {
        id: "E12",
        scenario: format!(
            "end-of-command search, {name} ({dirs} directories): from the snapshot vs full"
        ),
        metric,
        unit: "ms",
        dsh: stats.p50,
        baseline: Some(f.p50),
        ratio: Some(stats.p50 / f.p50),
        target: Target::Reported,
    };
    let notes = vec![
        f.line(&format!("E12 {name}: full search        ")),
        s.line(&format!("E12 {name}: from the snapshot  ")),
        c.line(&format!("E12 {name}: after one new dir  ")),
        format!(
            "E12 {name}: the snapshot's searches read at most {read_from_snapshot} directories \
             (racy ones, changed in the last 2 s, are read again)"
        ),
    ];
    let details =
        json!({"directories": dirs, "full": f.json(), "snapshot": s.json(), "changed": c.json()});
    Ok((
        row("median, nothing changed", &s),
        row("median, one new directory", &c),
        notes,
        details,
    ))
}

pub(crate) async fn e12(env: &Env) -> Res<Outcome> {
    let quick = format!("{:?}", env.counts) == format!("{QUICK:?}");
    let rounds = if quick { 3 } else { 21 };
    let tree = env.root.join("e12-tree");
    hundred_thousand_files(&tree)?;
    // A directory changed less than 2 s before a snapshot is read again at the next
    // search (racy stamps): the trees are left alone that long first, as a tree a
    // person works in mostly is.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (r1, r2, mut notes, d1) = measure("this repository", repo, rounds)?;
    let (t1, t2, more, d2) = measure("100 000 files", &tree, rounds)?;
    notes.extend(more);
    let _ = std::fs::remove_dir_all(&tree);
    Ok(Outcome {
        rows: vec![r1, r2, t1, t2],
        notes,
        details: json!({"repository": d1, "tree": d2, "rounds": rounds}),
    })
}
