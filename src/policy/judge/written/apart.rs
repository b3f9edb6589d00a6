//! Files the line writes that cannot be the script a segment runs (P8, issue 41).
//!
//! Reading 2 of [`super`] reads every text the line writes as the language of every
//! script it runs, for where the line does not say which file is which. Where it does,
//! the texts are left alone: `echo hello > out.txt; python3 x.py`, `pytest tests/ > log;
//! python3 x.py` and `git diff > changes.patch; python3 apply.py` write no file the run
//! reads as code. The walk keeps each redirection's target (`shell::WriteTarget`), and
//! this file decides, erring towards "may be the same" at every step (then the texts are
//! read as before):
//!
//! - The run names its script by a literal word, on the line itself (not through a
//!   wrapper, which may change the directory: `env -C`), with no expansion, pattern or
//!   variable in front; a module (`python3 -m x`, `ruby -r./x`), an import from inline
//!   code, `sed -f`, a path run by its shebang and a language without a reader are none.
//!   A script in `/dev` or `/proc` (`python3 /dev/fd/3 3< notes.txt`) or reached through
//!   `..` is none.
//! - The line neither loops nor defines a function (a write later in the text may come
//!   first, a function may take a builtin's name) nor feeds a process substitution (`>
//!   >(cmd)`).
//! - Every segment before the run (every other segment, when one later in the text may
//!   run first: a substitution, a background run) writes only files it names, and moves
//!   no text between names nor makes a link: it is a reader of the read-only list (P7:
//!   `echo`, `ls`, `git diff`, with no option that writes), a builtin that makes no file,
//!   `mkdir`, `tee` (whose operands are files it writes), or a test runner of
//!   [`TEST_RUNNERS`], whose writes are the project's, with no variable in front the judge
//!   cannot show harmless. Anything else may (`cp`, `mv`, `ln`, `install`, `rsync`, `dd
//!   of=`, `sed -i`, `sort -o`, `tar`, `alias`, `source`, a project script), and is not
//!   known not to; so may a segment that changes directory (`cd`, `pushd`, `popd`) or
//!   keeps a file open for what follows (`exec 3> f`).
//! - No file written has the name of the script or of another word of the run (`python3
//!   run.py notes.txt` may run `notes.txt`), nor a name the run's language may load as code
//!   ([`may_load`]: `helper.py` beside `python3 x.py`, `package.json` for node, a file
//!   without an extension for a shell), nor is a program's configuration, which can make a
//!   reader run a command that moves text ([`configures`]: `diff.external` appended to
//!   `.git/config` before `git diff`; a hidden file or directory, `/etc`).
//!
//! Names are compared by their last component, ASCII case folded, and any name that is not
//! ASCII is the same as any other: `./x.py`, `sub/x.py`, `/abs/x.py` and `X.PY` are all
//! `x.py`. That is stricter than resolving each against the directory it is written in,
//! and needs no cwd: not the one a subshell's `cd` left, nor the one `sh x.sh` searches
//! `PATH` from, nor where `..` leads through a link, nor a case-insensitive file system's.
//! What no line shows stays out of reach, as a file the project holds is: a link the
//! project already has (`x.py -> notes.txt`), a script of the project that loads a file
//! of another name (`exec(open("notes.txt").read())`); those are the same as a file
//! written by an earlier call.

use super::{Order, Runner, loads_a_module, shell_script};
use crate::policy::harmless::Lang;
use crate::policy::shell::{Segment, WriteTarget};
use crate::policy::{Policy, inline};

/// Test runners whose writes are the project's (reports, caches, what its tests write):
/// no word of theirs moves a file's text to another name. An allowlist; a build tool
/// given a target (`make x`: built-in rules copy `x.sh` to `x`) or a package runner
/// (`npx`, `npm exec`) is not on it.
const TEST_RUNNERS: &[&str] = &["pytest", "py.test", "cargo"];

/// Builtins and programs that write no file but through their redirections (`tee`: its
/// operands, read as writes). `cd` and `exec` are refused on their own; `printf -v`,
/// `test -v` and the read-only programs are judged by the read-only list.
const MAKES_NO_FILE: &[&str] = &[
    ":", "true", "false", "set", "shopt", "shift", "break", "continue", "exit", "return", "mkdir",
    "tee",
];

impl Policy {
    /// Whether the line shows that no file written before segment `at` (anywhere, when
    /// `order` says a later write may come first) can be code the script `runner` runs
    /// there reads: then no text written is read as that script (the module doc says when;
    /// anything unsure is no).
    pub(super) fn writes_apart(
        &self,
        command: &str,
        segments: &[Segment],
        at: usize,
        runner: &Runner,
        order: &Order,
    ) -> bool {
        let run = &segments[at];
        let Some(names) = run_names(run, runner) else {
            return false;
        };
        if command.contains(">(") || order.loops() {
            return false;
        }
        let any_order = order.any();
        segments
            .iter()
            .enumerate()
            .filter(|&(b, _)| b != at && (any_order || b < at))
            .all(|(_, segment)| {
                self.moves_no_text(segment)
                    && written_paths(segment).all(|path| {
                        path.filter(|path| !configures(path))
                            .and_then(file_name)
                            .is_some_and(|name| {
                                !names.iter().any(|n| same_name(n, name)) && !may_load(runner, name)
                            })
                    })
            })
    }

    /// Whether `segment` is known to write no file but those it names (its redirections'
    /// targets, `tee`'s operands), so it neither moves text between names nor makes a link.
    fn moves_no_text(&self, segment: &Segment) -> bool {
        if segment.opaque.is_some() || !segment.assigned.is_empty() {
            return false;
        }
        let Some(program) = segment.words.first() else {
            // `> f`, `X=1`.
            return true;
        };
        let program = program.as_str();
        !matches!(program, "cd" | "pushd" | "popd" | "exec")
            && (MAKES_NO_FILE.contains(&program)
                || TEST_RUNNERS.contains(&program)
                || self.reads_only(segment))
    }
}

/// The file names `run` may read code from, by their last component: its script's and
/// every other word's (and the value of an `--option=value`), or `None` when the line does
/// not show the script as a literal file on the line itself.
fn run_names<'a>(run: &'a Segment, runner: &Runner) -> Option<Vec<&'a str>> {
    if !run.via.is_empty()
        || run.opaque.is_some()
        || !run.assigned.is_empty()
        || !run.expanded.is_empty()
        || !run.patterns.is_empty()
    {
        return None;
    }
    let script = match runner {
        Runner::Read { .. } => {
            let code = inline::inline_code(&run.words, run.stdin.as_deref())?;
            match code.reading {
                inline::Reading::Script { path, .. }
                    if !loads_a_module(runner, &run.words[1..]) =>
                {
                    run.words.iter().find(|w| **w == path)?
                }
                _ => return None,
            }
        }
        Runner::Shell => match run.words.first().map(String::as_str) {
            // `source` and `.` search `PATH` too; last components still compare.
            Some("source" | ".") => run.words.get(1).filter(|w| !w.starts_with('-'))?,
            _ => run.words.get(shell_script(run)?)?,
        },
        Runner::Sed | Runner::Unread(_) | Runner::Path => return None,
    };
    if !plain_place(script) {
        return None;
    }
    run.words
        .iter()
        .flat_map(|word| {
            let value = word.rsplit_once('=').map(|(_, value)| value);
            [Some(word.as_str()), value].into_iter().flatten()
        })
        .filter(|word| !word.is_empty())
        .map(file_name)
        .collect()
}

/// Whether `path` names a file as written: not through `..`, nor in `/dev` or `/proc`,
/// where a name is a descriptor (`/dev/fd/3`, `/proc/self/fd/0`), stdin or another file.
fn plain_place(path: &str) -> bool {
    let first = path.split('/').find(|p| !p.is_empty() && *p != ".");
    let special = path.starts_with('/') && matches!(first, Some("dev" | "proc"));
    let climbs = path.split('/').any(|p| p == "..");
    !special && !climbs
}

/// The last component of `path`, or `None` when it has none that names a file (`.`,
/// `..`, `/`, a lone `~`).
fn file_name(path: &str) -> Option<&str> {
    let last = path.split('/').rfind(|p| !p.is_empty())?;
    let lone_tilde = !path.contains('/') && last.starts_with('~');
    (!matches!(last, "." | "..") && !lone_tilde).then_some(last)
}

/// Whether a file at `path` may be a program's configuration, which can make a reader run
/// a command (`diff.external` in `.git/config` for `git diff`): a hidden file or one in a
/// hidden directory (`.git/config`, `~/.gitconfig`, `.npmrc`), or one in `/etc`.
fn configures(path: &str) -> bool {
    let mut parts = path.split('/').filter(|p| !p.is_empty() && *p != ".");
    let in_etc = path.starts_with('/') && parts.clone().next() == Some("etc");
    in_etc || parts.any(|p| p.starts_with('.') && p != "..")
}

/// The paths `segment` writes, each `None` when the line does not name it: its
/// redirections' targets, and `tee`'s operands.
fn written_paths(segment: &Segment) -> impl Iterator<Item = Option<&str>> {
    let redirections = segment.writes.iter().map(|target| match target {
        WriteTarget::File(path) => Some(path.as_str()),
        WriteTarget::Unknown => None,
    });
    let tee = segment.words.first().is_some_and(|w| w == "tee");
    let operands = tee.then(|| tee_operands(segment)).into_iter().flatten();
    redirections.chain(operands)
}

/// `tee`'s operands, the files it writes; one `None` when a word may be any (an expansion,
/// a pattern).
fn tee_operands(segment: &Segment) -> Vec<Option<&str>> {
    if !segment.expanded.is_empty() || !segment.patterns.is_empty() {
        return vec![None];
    }
    let mut operands = Vec::new();
    let mut options = true;
    for word in &segment.words[1..] {
        if options && word == "--" {
            options = false;
        } else if options && word.len() > 1 && word.starts_with('-') {
            // tee's options take no separate value (`--output-error=warn`).
        } else {
            operands.push(Some(word.as_str()));
        }
    }
    operands
}

/// Whether two file names may be one file: equal but for ASCII case (a case-insensitive
/// file system), or either not ASCII (a file system that normalises Unicode).
fn same_name(a: &str, b: &str) -> bool {
    !a.is_ascii() || !b.is_ascii() || a.eq_ignore_ascii_case(b)
}

/// Whether a file named `name` may be code the script `runner` runs loads beside it: a
/// module of its language (`helper.py`, `lib.pm`, `util.js`, `mod.lua`, a compiled
/// extension `.so`), a file that says where its code is (`package.json`, `x.pth`, `.ini`
/// for php), or for a shell a file it may source (no extension, `.sh`, `.env`...). Not
/// ASCII: maybe. A program the judge cannot tie to a language: anything.
fn may_load(runner: &Runner, name: &str) -> bool {
    if !name.is_ascii() {
        return true;
    }
    // A leading dot starts a name, not an extension (`.env`).
    let extension = name
        .rsplit_once('.')
        .filter(|(stem, _)| !stem.is_empty())
        .map(|(_, extension)| extension);
    let extensions: &[&str] = match runner {
        Runner::Read { lang, .. } => match lang {
            Lang::Python => &["py", "pyc", "pyw", "pth", "so"],
            Lang::Perl => &["pl", "pm", "pmc", "ph", "so"],
            Lang::Ruby => &["rb", "so", "bundle"],
            Lang::Lua => &["lua", "so"],
            Lang::JavaScript => &["js", "mjs", "cjs", "json", "node", "ts", "mts", "cts"],
            Lang::Php => &[
                "php", "phtml", "inc", "phar", "ini", "php3", "php4", "php5", "php7", "php8",
            ],
            Lang::Awk => &["awk", "gawk", "so"],
        },
        Runner::Shell => {
            if extension.is_none() {
                return true;
            }
            &[
                "sh",
                "bash",
                "zsh",
                "ksh",
                "dash",
                "env",
                "rc",
                "inc",
                "conf",
                "cfg",
                "profile",
                "bashrc",
                "functions",
                "lib",
            ]
        }
        Runner::Sed | Runner::Unread(_) | Runner::Path => return true,
    };
    extension.is_some_and(|e| extensions.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_by_their_last_component() {
        assert_eq!(file_name("./x.py"), Some("x.py"));
        assert_eq!(file_name("sub//x.py/"), Some("x.py"));
        assert_eq!(file_name("/abs/x.py"), Some("x.py"));
        assert_eq!(file_name("~/x.py"), Some("x.py"));
        for none in [".", "..", "sub/..", "/", "~", "~user", ""] {
            assert_eq!(file_name(none), None, "{none:?}");
        }
        assert!(same_name("x.py", "X.PY"));
        assert!(same_name("é.py", "x.py"));
        assert!(!same_name("out.txt", "x.py"));
        assert!(plain_place("x.py") && plain_place("./sub/x.py") && plain_place("/tmp/x.py"));
        for place in [
            "/dev/fd/3",
            "//proc/self/fd/0",
            "/./dev/stdin",
            "../x.py",
            "a/../x",
        ] {
            assert!(!plain_place(place), "{place:?}");
        }
        for config in [
            ".git/config",
            "./.npmrc",
            "~/.gitconfig",
            "a/.hidden/x",
            "/etc/gitconfig",
        ] {
            assert!(configures(config), "{config:?}");
        }
        for file in [
            "out.txt",
            "../out.txt",
            "./logs/run.log",
            "/tmp/etc/x",
            "~/notes.txt",
        ] {
            assert!(!configures(file), "{file:?}");
        }
    }

    #[test]
    fn a_language_may_load_its_modules() {
        let python = Runner::Read {
            language: "python",
            lang: Lang::Python,
        };
        let node = Runner::Read {
            language: "javascript",
            lang: Lang::JavaScript,
        };
        assert!(may_load(&python, "helper.py") && may_load(&python, "X.PTH"));
        assert!(!may_load(&python, "out.txt") && !may_load(&python, "log"));
        assert!(may_load(&node, "package.json") && !may_load(&node, "notes.md"));
        assert!(may_load(&Runner::Shell, "env") && may_load(&Runner::Shell, ".env"));
        assert!(may_load(&Runner::Shell, "lib.sh") && !may_load(&Runner::Shell, "files.txt"));
        assert!(may_load(&Runner::Path, "out.txt") && may_load(&Runner::Unread("go"), "a.txt"));
    }
}
