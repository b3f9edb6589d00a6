//! Programs the line itself may have made (P5, P8, issue 41): `cp /bin/rm y && ./y c`,
//! `ln -s /bin/rm x; logsave /dev/null ./x c`. The judge reads a line before any of it runs,
//! so a path written by an earlier segment is not on disk yet (or is still what it was): what
//! it names tells nothing about what will run. Fail closed without listing the writers: after
//! any segment that is not known to be read-only ([`Policy::not_read_only`], the same test
//! read-only mode applies), a program named by a path, or a path handed to a program that
//! may run its arguments, is opaque. A path run with no write before it on the line
//! (`./configure && make`, `./gradlew build`) is left alone.

use crate::policy::shell::Segment;
use crate::policy::word::base_name;
use crate::policy::{Policy, embedded, inline, wrappers};

impl Policy {
    /// Marks opaque each segment of `segments` (in the order the line runs them) that runs a
    /// path an earlier segment may have written, under a deny or ask rule for bash (P8).
    pub(in crate::policy) fn mark_programs_made_on_the_line(&self, segments: &mut [Segment]) {
        // Only under a deny or ask rule: without one, `auto` allows what no rule names (P8)
        // and `ask` asks all the same, so marking would only take grants away.
        if !self.guarded() {
            return;
        }
        // Most lines run no path after their first segment: they need no writer found,
        // and finding writers is the read-only check on every segment (J1's long line).
        if !segments
            .iter()
            .skip(1)
            .any(|s| s.opaque.is_none() && self.path_run(s).is_some())
        {
            return;
        }
        let mut writers: Vec<usize> = Vec::new();
        for at in 0..segments.len() {
            if segments[at].opaque.is_none()
                && let Some(path) = self.path_run(&segments[at])
                && let Some(&writer) = writers
                    .iter()
                    .find(|&&w| !encloses(&segments[w], &segments[at]))
            {
                let why = format!(
                    "it runs `{path}`, a path that `{}` earlier on the line may have written",
                    segments[writer].display()
                );
                segments[at].opaque = Some(why);
            }
            if self.not_read_only(&segments[at]).is_some() && !makes_no_file(&segments[at]) {
                writers.push(at);
            }
        }
    }

    /// The path `segment` runs, if it names one: its program's name written as a path
    /// (`./y`, `/tmp/x`), or, for a program that may run its arguments (no row, not a known
    /// wrapper, whose inner command is a segment of its own, not a reader of the read-only
    /// list, not an interpreter, whose file is project code outside what a rule promises,
    /// and not one of [`takes_paths_as_data`]), an argument written as a path (`logsave
    /// /dev/null ./x c`, `logsave /dev/null d/x c`). Issue 41: the argument counts after
    /// any write, named or not (`tar -xf a.tar; logsave /dev/null ./member`): a write need
    /// not name what it makes.
    fn path_run<'s>(&self, segment: &'s Segment) -> Option<&'s str> {
        let words = &segment.words;
        let name = words.first()?;
        if name.contains('/') {
            return Some(name);
        }
        let program = base_name(name);
        if wrappers::is_wrapper(program)
            || embedded::has_row(program)
            || inline::is_interpreter(program)
            || takes_paths_as_data(program)
            || self.read_only.iter().any(|p| words.starts_with(p))
        {
            return None;
        }
        words[1..].iter().map(String::as_str).find(|w| {
            // A device is no file the line can make, and a URL no path.
            w.contains('/') && !w.starts_with("/dev/") && !w.contains("://")
        })
    }
}

/// Programs that are not read-only but never run a path they are given: they copy, move,
/// link, change the mode of or pack it (`make && cp ./a /tmp/b` stays a copy). An
/// allowlist (issue 41): a program not here that is handed a path after a write on the
/// line may run it.
pub(in crate::policy) fn takes_paths_as_data(program: &str) -> bool {
    const NAMES: &[&str] = &[
        "cp",
        "mv",
        "ln",
        "install",
        "chmod",
        "chown",
        "chgrp",
        "touch",
        "mkdir",
        "rmdir",
        "rm",
        "unlink",
        "truncate",
        "tee",
        "gzip",
        "gunzip",
        "bzip2",
        "xz",
        "zstd",
        "unzip",
        "strip",
        "sha256sum",
        "sha1sum",
        "md5sum",
        "cmp",
    ];
    NAMES.contains(&program)
}

/// Whether `segment` is a builtin or program that is not known to be read-only but cannot
/// make a file a path could run: `cd build && ../configure`, `mkdir -p out && ./gen.sh`
/// (a directory is no program). An allowlist; a redirection is a write whatever the program.
pub(super) fn makes_no_file(segment: &Segment) -> bool {
    const NAMES: &[&str] = &[
        "cd", "pushd", "popd", "mkdir", "export", "set", "shopt", ":",
    ];
    // An assignment with no command makes no file either (`V=1; ./build.sh`).
    segment.opaque.is_none()
        && !segment.writes_redirect()
        && segment
            .words
            .first()
            .is_none_or(|w| NAMES.contains(&w.as_str()))
}

/// Whether `outer` is a wrapper that runs `inner` (`timeout 60 ./gradlew build` holds the
/// segment `./gradlew build` found through `timeout`): a wrapper is no write before what it
/// runs.
fn encloses(outer: &Segment, inner: &Segment) -> bool {
    let depth = outer.via.len();
    inner.via.len() > depth
        && inner.via.starts_with(&outer.via)
        && outer
            .words
            .first()
            // A wrapper is named by its program, sometimes with the form that runs the
            // command (`gdb --args`).
            .is_some_and(|w| inner.via[depth].split(' ').next() == Some(base_name(w)))
}
