//! P3: the wrapper table's option grammars (src/policy/wrappers.rs) read every option word
//! the way the real program installed on this machine reads it.
//!
//! The judge finds the command a wrapper runs (`nice --adj 5 rm x` runs `rm x`) by reading
//! the wrapper's options with the grammar in its row. A row that drifts from the program
//! either hides a command (we read an option the program refuses, or read a value where the
//! program has none) or asks for nothing (we refuse an option the program takes). So for
//! every row with a getopt grammar this file asks the real program about single words and
//! requires the row to answer the same:
//!
//! * `--PREFIX` for every prefix of every long name (getopt_long takes every unambiguous
//!   prefix, refuses one shared by two options, and takes an exact name over longer ones);
//!   then, for a long option only the program has, every word one letter (or `-`) past the
//!   start or past a prefix the row finds ambiguous (`--a`..`--z`; flock's `--nb` beside
//!   `--nonblocking` and `--no-fork`), and `--zzz`. (An extra option sharing a prefix with
//!   one of ours already shows up above, as an ambiguity the row does not see.)
//! * `-C` for every letter and digit C, so letters the program lacks are refused by both;
//! * the kind of each option's value: `--NAME` and `-C` alone (a required value is missing),
//!   `--NAME=x` (a flag refuses it) and `-C` followed by a letter neither has (after a flag
//!   that letter is the next option, refused; an optional value takes it).
//!
//! The first two compare recognized / ambiguous / unknown (an option missing its value is
//! recognized); the third also tells missing values and refused values apart.
//!
//! How the real program is asked: `PROGRAM WORD` and nothing else (no command), in a fresh
//! empty directory, stdin /dev/null, in a session of its own (no controlling terminal, so
//! nothing prompts on the terminal of whoever runs the tests), with a small fixed
//! environment: `SHELL=/bin/true` (unshare, nsenter and script start `$SHELL` when given
//! no command; xargs runs `echo`, on no input), `LC_ALL=C` (the messages are glibc's English
//! ones) and `HOME` the fresh directory. A run still going after two seconds is killed (its
//! whole process group) and counts as recognized: it got past its options. The answer is
//! read from getopt's own message on stderr (see [`classify`]).
//!
//! One exception: su, runuser and sudo start the target user's own shell, not `$SHELL`
//! (`su -l`, `su -P`, `sudo -i`: root's login shell, running root's profile). So they are
//! asked about the word after naming a user that does not exist (see [`STOPPER`]): they
//! still read every option first, as getopt does, then stop at the unknown user. The word
//! is still the last one, so a value it needs is still missing.
//!
//! Nothing here is destructive: the words are options alone; the few values given are `x`
//! (a file name in the fresh directory, or a bad number or signal) and only to options
//! the real program has just shown to take no value or an optional one.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use dsh::policy::argv::{self, ArgvError, Grammar, Value};
use dsh::policy::wrappers;
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::{Pid, setsid};

/// Rows whose grammar is a shell builtin's, not a program's: nothing to run.
const BUILTINS: &[&str] = &["command", "exec", "builtin"];

/// Where the programs are looked for (and the `PATH` they run with).
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A run still going after this got past its options; it is killed, with its process group.
const TIMEOUT: Duration = Duration::from_secs(2);

/// A user that does not exist on the machine (checked).
const NO_USER: &str = "dsh-no-such-user";

/// Words put before the word asked about, for the programs that would otherwise start a
/// user's own shell: su and runuser permute, so the user operand can come first; sudo
/// stops at its first operand, so the user is an option's value.
const STOPPER: &[(&str, &[&str])] = &[
    ("su", &[NO_USER]),
    ("runuser", &[NO_USER]),
    ("sudo", &["-u", NO_USER]),
];

/// How a program reads one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// An option it has, and nothing wrong with the word.
    Recognized,
    /// An option it has, whose required value is missing.
    NeedsValue,
    /// An option it has, given a value it does not take (`--flag=x`).
    TakesNoValue,
    /// A long-option prefix of several options.
    Ambiguous,
    /// No option of it.
    Unknown,
}

impl Reading {
    /// The reading of the words of the prefix and letter checks: an option recognized
    /// (with or without its value) or not. Value kinds have a check of their own.
    fn coarse(self) -> Reading {
        match self {
            Reading::NeedsValue | Reading::TakesNoValue => Reading::Recognized,
            other => other,
        }
    }
}

/// How the table's grammar reads `word` as the program's only word.
fn ours(grammar: &Grammar, word: &str) -> Reading {
    match argv::parse(grammar, &[word]) {
        Ok(_) => Reading::Recognized,
        Err(ArgvError::MissingValue(_)) => Reading::NeedsValue,
        Err(ArgvError::UnexpectedValue(_)) => Reading::TakesNoValue,
        Err(ArgvError::Ambiguous { .. }) => Reading::Ambiguous,
        Err(ArgvError::Unknown(_)) => Reading::Unknown,
        Err(e @ ArgvError::NotKnown(_)) => panic!("{word}: {e}"),
    }
}

/// How the real program read its word, from what it wrote on stderr.
///
/// Every program here parses with glibc's getopt_long (doas with plain getopt), which says
/// what went wrong on a line of its own, starting with the program's name (its argv[0],
/// which [`run`] sets to the row's name), in one of these forms (glibc 2.36, `LC_ALL=C`):
///
/// ```text
/// env: option '--i' is ambiguous; possibilities: '--ignore-environment' '--ignore-signal'
/// env: unrecognized option '--zzz'
/// env: invalid option -- 'Q'          (doas says this of `--zzz` too: a `-` cluster)
/// env: option '--unset' requires an argument
/// env: option requires an argument -- 'u'
/// env: option '--null' doesn't allow an argument
/// ```
///
/// sudo, doas and watch print their usage after such a line, and that usage mentions
/// options: only the message line counts. `unknown option` and `illegal option` are what
/// non-glibc getopts say; none is installed here, but a program built with one would
/// otherwise read as accepting everything. Anything else (help, a version, a usage
/// without a message, an error about something after option parsing, no output at all)
/// means the word was an option the program took.
fn classify(name: &str, stderr: &str) -> Reading {
    let own = format!("{name}: ");
    for line in stderr.lines().filter(|l| l.starts_with(&own)) {
        let message = &line[own.len()..];
        if message.starts_with("option '") && message.contains("' is ambiguous") {
            return Reading::Ambiguous;
        }
        if message.starts_with("unrecognized option '")
            || message.starts_with("invalid option -- '")
            || message.starts_with("unknown option")
            || message.starts_with("illegal option")
        {
            return Reading::Unknown;
        }
        if message.starts_with("option '") && message.ends_with("' doesn't allow an argument") {
            return Reading::TakesNoValue;
        }
        if message.starts_with("option requires an argument -- '")
            || (message.starts_with("option '") && message.ends_with("' requires an argument"))
        {
            return Reading::NeedsValue;
        }
    }
    Reading::Recognized
}

/// A program of the table, found on this machine.
struct Program {
    name: &'static str,
    grammar: &'static Grammar,
    path: PathBuf,
}

/// The Debian package that installs `name` (scripts/test installs them).
fn debian_package(name: &str) -> &'static str {
    match name {
        "env" | "nice" | "nohup" | "timeout" | "stdbuf" | "chroot" => "coreutils",
        "setsid" | "flock" | "ionice" | "chrt" | "taskset" | "su" | "runuser" | "unshare"
        | "nsenter" | "setpriv" | "prlimit" | "choom" | "linux64" | "linux32" => "util-linux",
        "sshpass" => "sshpass",
        "script" => "bsdutils",
        "xargs" => "findutils",
        "watch" => "procps",
        "time" => "time",
        "sudo" => "sudo",
        "doas" => "opendoas",
        "busybox" => "busybox",
        _ => "unknown: add it to debian_package and scripts/test",
    }
}

/// Every row with a getopt grammar and its program; fails naming the packages to install
/// when some are missing.
fn programs() -> Vec<Program> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in wrappers::names() {
        let Some(grammar) = wrappers::grammar(name) else {
            continue;
        };
        if BUILTINS.contains(&name) {
            continue;
        }
        // `time` is also a shell keyword; the table's grammar is GNU time's.
        let path = if name == "time" {
            Some(PathBuf::from("/usr/bin/time")).filter(|p| p.is_file())
        } else {
            PATH.split(':')
                .map(|dir| Path::new(dir).join(name))
                .find(|p| p.is_file())
        };
        match path {
            Some(path) => found.push(Program {
                name,
                grammar,
                path,
            }),
            None => missing.push(format!("{name} (Debian package {})", debian_package(name))),
        }
    }
    assert!(
        missing.is_empty(),
        "P3 holds every wrapper's grammar against the real program, and these are not \
         installed: {}; scripts/test installs them (as root)",
        missing.join(", ")
    );
    assert!(found.len() > 10, "only {} wrappers found", found.len());
    assert!(
        nix::unistd::User::from_name(NO_USER)
            .expect("the user database")
            .is_none(),
        "the user {NO_USER} exists: su, runuser and sudo would start its shell"
    );
    found
}

/// What one run of a real program said.
struct Outcome {
    reading: Reading,
    /// Its first stderr line, for the report.
    said: String,
    timed_out: bool,
}

/// Runs `program WORD` (see the comment atop this file) in a new directory under `scratch`.
fn run(program: &Program, word: &str, scratch: &Path, id: usize) -> Outcome {
    let cwd = scratch.join(format!("run{id}"));
    fs::create_dir(&cwd).expect("a scratch directory");
    // stderr goes to a file, not a pipe: a shell the program leaves behind cannot keep
    // the test waiting for the pipe's end.
    let err_path = scratch.join(format!("run{id}.stderr"));
    let stderr = File::create(&err_path).expect("a stderr file");
    let mut command = Command::new(&program.path);
    command
        .arg0(program.name)
        .args(
            STOPPER
                .iter()
                .filter(|(name, _)| *name == program.name)
                .flat_map(|(_, words)| *words),
        )
        .arg(word)
        .current_dir(&cwd)
        .env_clear()
        .env("PATH", PATH)
        .env("SHELL", "/bin/true")
        .env("LC_ALL", "C")
        .env("HOME", &cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| setsid().map(drop).map_err(std::io::Error::from));
    }
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("{} {word}: {e}", program.path.display()));
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    let mut timed_out = false;
    // Waits without reaping (WNOWAIT): until the child is reaped its pid, which is also the
    // id of the process group it leads since setsid, cannot be anyone else's.
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    loop {
        match waitid(Id::Pid(pid), flags) {
            Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {}
            Ok(_) => break,
            Err(e) => panic!("waiting for {} {word}: {e}", program.name),
        }
        if started.elapsed() >= TIMEOUT {
            timed_out = true;
            break;
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    // The group dies with its leader: a run killed at the timeout, and what a run that
    // ended left behind (`unshare --mount=x` run by a user other than root leaves a forked
    // helper waiting forever for a parent that failed).
    let _ = killpg(pid, Signal::SIGKILL);
    child.wait().expect("reaping a run");
    let bytes = fs::read(&err_path).expect("the stderr file");
    let text = String::from_utf8_lossy(&bytes);
    Outcome {
        reading: classify(program.name, &text),
        said: text.lines().next().unwrap_or_default().to_owned(),
        timed_out,
    }
}

/// Runs every `(program index, word)` case on a few threads, in the order given.
fn run_all(programs: &[Program], cases: &[(usize, String)]) -> Vec<Outcome> {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let next = AtomicUsize::new(0);
    let threads = thread::available_parallelism()
        .map_or(2, usize::from)
        .saturating_mul(4)
        .clamp(4, 16);
    let mut done: Vec<(usize, Outcome)> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((program, word)) = cases.get(i) else {
                            return mine;
                        };
                        mine.push((i, run(&programs[*program], word, scratch.path(), i)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a worker"))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    let timed_out: Vec<String> = done
        .iter()
        .filter(|(_, o)| o.timed_out)
        .map(|(i, _)| format!("{} {}", programs[cases[*i].0].name, cases[*i].1))
        .collect();
    if !timed_out.is_empty() {
        eprintln!(
            "killed after {TIMEOUT:?} (read as recognized): {}",
            timed_out.join(", ")
        );
    }
    done.into_iter().map(|(_, o)| o).collect()
}

/// Known differences the grammar model cannot express: `(program, word, why)`. Each is
/// one where the table refuses (the inner command is opaque and the user is asked) and the
/// program accepts, never the other way round.
const ALLOWED: &[(&str, &str, &str)] = &[(
    "sudo",
    "-h",
    "sudo's `-h` has an optional value that sudo itself also takes from the next word \
     when that does not start with `-` (`sudo -h host cmd`), and alone is --help; the \
     table reads `-h` as always taking a value, so `sudo -h` alone is refused (asked), \
     and `sudo -h host cmd` is split where sudo splits it (sudo then refuses a host \
     without -l)",
)];

/// Letters the program acts on as soon as getopt returns them (it prints, or reads its
/// operand, and exits), so it never reads the rest of their cluster: `-X` followed by a
/// letter it lacks cannot show whether `-X` takes a value. Besides help and version
/// (`-h`, `-V`, watch's `-v`): `(program, letter, what it does)`.
const ACTS_AT_ONCE: &[(&str, char, &str)] = &[
    ("chrt", 'm', "prints the priority ranges and exits"),
    (
        "chrt",
        'p',
        "reads the PID from the last word, and exits on a bad one",
    ),
    (
        "taskset",
        'p',
        "reads the PID from the last word, and exits on a bad one",
    ),
    ("doas", 'L', "clears its persisted authentication and exits"),
    ("sshpass", 'V', "prints its version and exits"),
];

/// Whether the short option `word` (`-X`) is one of [`ACTS_AT_ONCE`], or help or version.
fn acts_at_once(program: &Program, word: &str) -> bool {
    let Some(letter) = word.strip_prefix('-').and_then(|l| l.chars().next()) else {
        return false;
    };
    let help_or_version = program
        .grammar
        .options
        .iter()
        .any(|o| o.short == Some(letter) && (o.is("help") || o.is("version")));
    help_or_version
        || ACTS_AT_ONCE
            .iter()
            .any(|(name, l, _)| *name == program.name && *l == letter)
}

/// Differences between the table and the real programs, gathered over all the runs of a
/// test so it fails once with the whole list.
#[derive(Default)]
struct Differences {
    wrong: Vec<String>,
    /// `(program, word)` of the [`ALLOWED`] differences met.
    allowed: BTreeSet<(&'static str, String)>,
    words: usize,
}

impl Differences {
    /// Runs `cases`, compares each real reading (through `view`) with the table's, and
    /// notes every difference.
    fn run(
        &mut self,
        programs: &[Program],
        cases: &[(usize, String)],
        view: fn(Reading) -> Reading,
    ) -> Vec<Outcome> {
        let outcomes = run_all(programs, cases);
        self.words += cases.len();
        for ((program, word), outcome) in cases.iter().zip(&outcomes) {
            let program = &programs[*program];
            let table = view(ours(program.grammar, word));
            let real = view(outcome.reading);
            if table == real {
                continue;
            }
            if ALLOWED
                .iter()
                .any(|(name, w, _)| *name == program.name && w == word)
            {
                self.allowed.insert((program.name, word.clone()));
                continue;
            }
            self.wrong.push(format!(
                "  {} {word}: table {table:?}, real {real:?} ({})",
                program.name,
                if outcome.said.is_empty() {
                    "nothing on stderr"
                } else {
                    &outcome.said
                }
            ));
        }
        outcomes
    }

    /// Fails listing every difference not in [`ALLOWED`].
    fn assert_none(&self) {
        assert!(
            self.wrong.is_empty(),
            "{} of {} words read differently by the wrapper table and the real program \
             (fix the row in src/policy/wrappers.rs):\n{}",
            self.wrong.len(),
            self.words,
            self.wrong.join("\n")
        );
        eprintln!(
            "{} words, each read alike by the table and the real program ({} allowed: {:?})",
            self.words,
            self.allowed.len(),
            self.allowed
        );
    }
}

/// Each program refused at least one of `cases`: the classifier reads its messages.
fn assert_refusal_seen(programs: &[Program], cases: &[(usize, String)], outcomes: &[Outcome]) {
    for (index, program) in programs.iter().enumerate() {
        let refused = cases
            .iter()
            .zip(outcomes)
            .any(|((p, _), o)| *p == index && o.reading == Reading::Unknown);
        assert!(
            refused,
            "{}: refused nothing, so the classifier misses its messages",
            program.name
        );
    }
}

#[test]
fn p3_every_long_option_prefix_reads_as_the_real_program_reads_it() {
    let programs = programs();
    let mut cases = Vec::new();
    for (index, program) in programs.iter().enumerate() {
        let mut words = BTreeSet::new();
        for name in program.grammar.options.iter().filter_map(|o| o.long) {
            for (end, c) in name.char_indices() {
                words.insert(format!("--{}", &name[..end + c.len_utf8()]));
            }
        }
        // Words one character past a branch of ours (the start, or a prefix of several
        // options), which mostly prefix no option of ours: a long option only the program
        // has shows up here (`--nb` beside `--nonblocking` and `--no-fork`), or else as an
        // ambiguity at a prefix it shares with one of ours.
        let branches: Vec<String> = std::iter::once("--".to_owned())
            .chain(
                words
                    .iter()
                    .filter(|w| ours(program.grammar, w) == Reading::Ambiguous)
                    .cloned(),
            )
            .collect();
        for branch in branches {
            words.extend(('a'..='z').chain(['-']).map(|c| format!("{branch}{c}")));
        }
        words.remove("---");
        words.insert("--zzz".to_owned());
        cases.extend(words.into_iter().map(|w| (index, w)));
    }
    let mut differences = Differences::default();
    let outcomes = differences.run(&programs, &cases, Reading::coarse);
    for ((program, word), outcome) in cases.iter().zip(&outcomes) {
        if word == "--zzz" {
            assert_eq!(
                outcome.reading,
                Reading::Unknown,
                "{} --zzz: the classifier missed its message: {}",
                programs[*program].name,
                outcome.said
            );
        }
    }
    differences.assert_none();
}

#[test]
fn p3_every_short_option_letter_reads_as_the_real_program_reads_it() {
    let programs = programs();
    let mut cases = Vec::new();
    for index in 0..programs.len() {
        let letters = ('a'..='z').chain('A'..='Z').chain('0'..='9');
        cases.extend(letters.map(|c| (index, format!("-{c}"))));
    }
    let mut differences = Differences::default();
    let outcomes = differences.run(&programs, &cases, Reading::coarse);
    assert_refusal_seen(&programs, &cases, &outcomes);
    differences.assert_none();
}

#[test]
fn p3_every_option_takes_a_value_as_the_real_program_does() {
    let programs = programs();
    // First each option alone: a required value is missing, others are fine.
    let mut cases = Vec::new();
    for (index, program) in programs.iter().enumerate() {
        for option in program.grammar.options {
            if let Some(name) = option.long {
                cases.push((index, format!("--{name}")));
            }
            if let Some(c) = option.short {
                cases.push((index, format!("-{c}")));
            }
        }
    }
    let mut differences = Differences::default();
    let alone = differences.run(&programs, &cases, |r| r);
    // Then a value given to each option the real program just read as taking none or an
    // optional one (never to one that takes a value anyway: that value could be a
    // command). A flag refuses it; an optional value takes it. For a letter the value is a
    // letter the program lacks, which after a flag is the next option, and refused.
    let mut with_value = Vec::new();
    for ((index, word), outcome) in cases.iter().zip(&alone) {
        if outcome.reading != Reading::Recognized {
            continue;
        }
        let program = &programs[*index];
        if word.starts_with("--") {
            with_value.push((*index, format!("{word}=x")));
        } else if !acts_at_once(program, word) {
            let unknown = ('a'..='z')
                .chain('A'..='Z')
                .find(|c| !program.grammar.options.iter().any(|o| o.short == Some(*c)))
                .expect("a letter the program lacks");
            with_value.push((*index, format!("{word}{unknown}")));
        }
    }
    let outcomes = differences.run(&programs, &with_value, |r| r);
    assert!(
        outcomes.iter().any(|o| o.reading == Reading::TakesNoValue),
        "no flag refused a value: the classifier misses `doesn't allow an argument`"
    );
    // Each kind of value occurs, so every check above checks something.
    for kind in [Value::No, Value::Required, Value::Optional] {
        assert!(
            programs
                .iter()
                .any(|p| p.grammar.options.iter().any(|o| o.value == kind)),
            "no option of kind {kind:?}"
        );
    }
    // An allowed difference that no longer occurs is stale.
    for (name, word, _) in ALLOWED {
        assert!(
            differences.allowed.contains(&(*name, (*word).to_owned())),
            "{name} {word} is allowed to differ but reads alike now: drop it from ALLOWED"
        );
    }
    differences.assert_none();
}
