//! The table of wrappers: one row a program, its option grammar as the real program reads
//! it (read off the programs on Debian and checked against them) and where its command is.

use super::grammars::{
    ENV, HELP, LONG_HELP, LONG_VERSION, SETARCH_FLAGS, SU_OPTIONS, SUDO, VERSION,
};
use super::readers::{
    alias_values, busybox, dbus_run_session, env, eval, fakeroot, find, flock, ltrace, script,
    setarch, sg, shell, source, ssh_agent, start_stop_daemon, strace, su, sudo, trap, valgrind,
    watch, xargs,
};
use super::{Runs, Stdin, Wrapper};
use crate::policy::argv::{Grammar, Parsed, Value, alias, both, long, short};
use crate::policy::inner::InnerCommand;
use crate::policy::word::Word;
use Value::{No, Optional, Required};

const fn row(name: &'static str, grammar: Grammar, runs: Runs) -> Wrapper {
    Wrapper {
        name,
        grammar: Some(grammar),
        runs,
        runs_nothing_with: &[],
        script_in: &[],
        shell_without_command: false,
    }
}

/// A row for a program whose handler reads its words itself.
const fn own(
    name: &'static str,
    handler: fn(&Parsed, &[Word], &Stdin) -> Vec<InnerCommand>,
) -> Wrapper {
    Wrapper {
        grammar: None,
        ..row(name, Grammar::stopping(&[]), Runs::Custom(handler))
    }
}

const WORDS: Runs = Runs::Words {
    skip: 0,
    assignments: false,
};

/// The table. Grammars were read off the programs on Debian (coreutils, util-linux,
/// findutils, procps, sudo, opendoas, GNU time) and checked against them; the unit tests pin
/// the cases that matter.
pub(super) static WRAPPERS: &[Wrapper] = &[
    Wrapper {
        runs: Runs::Custom(env),
        ..row("env", ENV, WORDS)
    },
    row(
        "nice",
        Grammar {
            options: &[both('n', "adjustment", Required), LONG_HELP, LONG_VERSION],
            permute: false,
            numeric_option: true,
        },
        WORDS,
    ),
    row(
        "nohup",
        Grammar::stopping(&[LONG_HELP, LONG_VERSION]),
        WORDS,
    ),
    // busybox runs its first operand as an applet (`busybox rm x`, `busybox sh`): the
    // applet is the command, read as any other. Not getopt (see `busybox`).
    own("busybox", busybox),
    row(
        "setsid",
        Grammar::stopping(&[
            both('c', "ctty", No),
            both('f', "fork", No),
            both('w', "wait", No),
            HELP,
            VERSION,
        ]),
        WORDS,
    ),
    row(
        "timeout",
        Grammar::stopping(&[
            both('k', "kill-after", Required),
            both('s', "signal", Required),
            // Long only: coreutils 9.1 (Debian 12) refuses `timeout -p` and `timeout -f`.
            long("preserve-status", No),
            long("foreground", No),
            both('v', "verbose", No),
            LONG_HELP,
            LONG_VERSION,
        ]),
        Runs::Words {
            skip: 1,
            assignments: false,
        },
    ),
    row(
        "stdbuf",
        Grammar::stopping(&[
            both('i', "input", Required),
            both('o', "output", Required),
            both('e', "error", Required),
            LONG_HELP,
            LONG_VERSION,
        ]),
        WORDS,
    ),
    Wrapper {
        runs: Runs::Custom(xargs),
        ..row(
            "xargs",
            Grammar::stopping(&[
                both('0', "null", No),
                both('a', "arg-file", Required),
                both('d', "delimiter", Required),
                short('E', Required),
                both('e', "eof", Optional),
                short('I', Required),
                both('i', "replace", Optional),
                short('L', Required),
                both('l', "max-lines", Optional),
                both('n', "max-args", Required),
                both('o', "open-tty", No),
                both('P', "max-procs", Required),
                both('p', "interactive", No),
                long("process-slot-var", Required),
                both('r', "no-run-if-empty", No),
                both('s', "max-chars", Required),
                long("show-limits", No),
                both('t', "verbose", No),
                both('x', "exit", No),
                LONG_HELP,
                LONG_VERSION,
            ]),
            WORDS,
        )
    },
    Wrapper {
        runs: Runs::Custom(flock),
        ..row(
            "flock",
            Grammar::stopping(&[
                both('s', "shared", No),
                both('x', "exclusive", No),
                short('e', No),
                both('u', "unlock", No),
                both('n', "nonblocking", No),
                alias("nb", "nonblocking", No),
                both('w', "timeout", Required),
                alias("wait", "timeout", Required),
                both('E', "conflict-exit-code", Required),
                both('o', "close", No),
                both('F', "no-fork", No),
                long("verbose", No),
                HELP,
                VERSION,
            ]),
            WORDS,
        )
    },
    Wrapper {
        runs_nothing_with: &["pid", "pgid", "uid"],
        ..row(
            "ionice",
            Grammar::stopping(&[
                both('c', "class", Required),
                both('n', "classdata", Required),
                both('p', "pid", Required),
                both('P', "pgid", Required),
                both('t', "ignore", No),
                both('u', "uid", Required),
                HELP,
                VERSION,
            ]),
            WORDS,
        )
    },
    Wrapper {
        runs_nothing_with: &["pid", "max"],
        ..row(
            "chrt",
            Grammar::stopping(&[
                both('a', "all-tasks", No),
                both('b', "batch", No),
                both('d', "deadline", No),
                both('f', "fifo", No),
                both('i', "idle", No),
                both('o', "other", No),
                both('r', "rr", No),
                both('R', "reset-on-fork", No),
                both('m', "max", No),
                both('p', "pid", No),
                both('v', "verbose", No),
                both('T', "sched-runtime", Required),
                both('P', "sched-period", Required),
                both('D', "sched-deadline", Required),
                HELP,
                VERSION,
            ]),
            Runs::Words {
                skip: 1,
                assignments: false,
            },
        )
    },
    Wrapper {
        runs_nothing_with: &["pid"],
        ..row(
            "taskset",
            Grammar::stopping(&[
                both('a', "all-tasks", No),
                both('c', "cpu-list", No),
                both('p', "pid", No),
                HELP,
                VERSION,
            ]),
            Runs::Words {
                skip: 1,
                assignments: false,
            },
        )
    },
    row(
        "time",
        Grammar::stopping(&[
            both('a', "append", No),
            both('f', "format", Required),
            both('o', "output-file", Required),
            both('p', "portability", No),
            both('q', "quiet", No),
            both('v', "verbose", No),
            // GNU time has no `-h`.
            LONG_HELP,
            VERSION,
        ]),
        WORDS,
    ),
    Wrapper {
        runs_nothing_with: &[
            "edit",
            "list",
            "validate",
            "remove-timestamp",
            "version",
            "help",
        ],
        // Its handler starts a shell reading stdin itself when no command is given.
        runs: Runs::Custom(sudo),
        ..row(
            "sudo",
            SUDO,
            Runs::Words {
                skip: 0,
                assignments: true,
            },
        )
    },
    Wrapper {
        shell_without_command: true,
        ..row(
            "doas",
            Grammar::stopping(&[
                short('L', No),
                short('n', No),
                short('s', No),
                short('C', Required),
                short('u', Required),
            ]),
            WORDS,
        )
    },
    Wrapper {
        runs: Runs::Custom(su),
        script_in: &["command", "session-command"],
        // getopt reads `-u`/`--user` for su too (one option table in util-linux), but su
        // then refuses to run with it: only runuser has it.
        runs_nothing_with: &["user"],
        ..row("su", Grammar::permuting(SU_OPTIONS), WORDS)
    },
    Wrapper {
        runs: Runs::Custom(su),
        script_in: &["command", "session-command"],
        ..row("runuser", Grammar::permuting(SU_OPTIONS), WORDS)
    },
    Wrapper {
        shell_without_command: true,
        ..row(
            "unshare",
            Grammar::stopping(&[
                // Short namespace options take no value; only the long ones a file.
                short('m', No),
                long("mount", Optional),
                short('u', No),
                long("uts", Optional),
                short('i', No),
                long("ipc", Optional),
                short('n', No),
                long("net", Optional),
                short('p', No),
                long("pid", Optional),
                short('U', No),
                long("user", Optional),
                short('C', No),
                long("cgroup", Optional),
                short('T', No),
                long("time", Optional),
                both('f', "fork", No),
                long("kill-child", Optional),
                long("mount-proc", Optional),
                long("map-user", Required),
                long("map-users", Required),
                long("map-group", Required),
                long("map-groups", Required),
                both('r', "map-root-user", No),
                both('c', "map-current-user", No),
                long("map-auto", No),
                long("propagation", Required),
                long("setgroups", Required),
                long("keep-caps", No),
                both('R', "root", Required),
                both('w', "wd", Required),
                both('S', "setuid", Required),
                both('G', "setgid", Required),
                long("monotonic", Required),
                long("boottime", Required),
                HELP,
                VERSION,
            ]),
            WORDS,
        )
    },
    Wrapper {
        shell_without_command: true,
        ..row(
            "nsenter",
            Grammar::stopping(&[
                both('a', "all", No),
                both('t', "target", Required),
                both('m', "mount", Optional),
                both('u', "uts", Optional),
                both('i', "ipc", Optional),
                both('n', "net", Optional),
                both('p', "pid", Optional),
                both('C', "cgroup", Optional),
                both('U', "user", Optional),
                both('T', "time", Optional),
                both('S', "setuid", Required),
                both('G', "setgid", Required),
                long("preserve-credentials", No),
                both('r', "root", Optional),
                both('w', "wd", Optional),
                // The long form's value is optional, the short one's required.
                short('W', Required),
                long("wdns", Optional),
                both('F', "no-fork", No),
                both('Z', "follow-context", No),
                HELP,
                VERSION,
            ]),
            WORDS,
        )
    },
    Wrapper {
        shell_without_command: true,
        ..row(
            "chroot",
            Grammar::stopping(&[
                long("userspec", Required),
                long("groups", Required),
                long("skip-chdir", No),
                LONG_HELP,
                LONG_VERSION,
            ]),
            Runs::Words {
                skip: 1,
                assignments: false,
            },
        )
    },
    Wrapper {
        runs_nothing_with: &["dump"],
        ..row(
            "setpriv",
            Grammar::stopping(&[
                both('d', "dump", No),
                long("nnp", No),
                alias("no-new-privs", "nnp", No),
                long("list-caps", No),
                long("ambient-caps", Required),
                long("inh-caps", Required),
                long("bounding-set", Required),
                long("ruid", Required),
                long("euid", Required),
                long("rgid", Required),
                long("egid", Required),
                long("reuid", Required),
                long("regid", Required),
                long("clear-groups", No),
                long("keep-groups", No),
                long("init-groups", No),
                long("groups", Required),
                long("securebits", Required),
                long("pdeathsig", Required),
                long("selinux-label", Required),
                long("apparmor-profile", Required),
                long("reset-env", No),
                HELP,
                VERSION,
            ]),
            WORDS,
        )
    },
    Wrapper {
        runs: Runs::Custom(script),
        script_in: &["command"],
        ..row(
            "script",
            Grammar::permuting(&[
                both('a', "append", No),
                both('c', "command", Required),
                both('E', "echo", Required),
                both('e', "return", No),
                both('f', "flush", No),
                long("force", No),
                both('B', "log-io", Required),
                both('I', "log-in", Required),
                both('O', "log-out", Required),
                both('T', "log-timing", Required),
                both('m', "logging-format", Required),
                both('o', "output-limit", Required),
                both('q', "quiet", No),
                both('t', "timing", Optional),
                HELP,
                VERSION,
            ]),
            WORDS,
        )
    },
    Wrapper {
        runs: Runs::Custom(watch),
        ..row(
            "watch",
            Grammar::stopping(&[
                both('b', "beep", No),
                both('c', "color", No),
                both('d', "differences", Optional),
                both('e', "errexit", No),
                both('g', "chgexit", No),
                both('n', "interval", Required),
                both('p', "precise", No),
                both('q', "equexit", Required),
                both('t', "no-title", No),
                both('w', "no-wrap", No),
                both('x', "exec", No),
                HELP,
                both('v', "version", No),
            ]),
            WORDS,
        )
    },
    // Programs that run a command after their options (issue 29's list; before, only P6
    // asked about them).
    Wrapper {
        runs_nothing_with: &["pid"],
        ..row(
            "prlimit",
            Grammar::stopping(&[
                both('p', "pid", Required),
                both('o', "output", Required),
                long("noheadings", No),
                long("raw", No),
                long("verbose", No),
                both('c', "core", Optional),
                both('d', "data", Optional),
                both('e', "nice", Optional),
                both('f', "fsize", Optional),
                both('i', "sigpending", Optional),
                both('l', "memlock", Optional),
                both('m', "rss", Optional),
                both('n', "nofile", Optional),
                both('q', "msgqueue", Optional),
                both('r', "rtprio", Optional),
                both('s', "stack", Optional),
                both('t', "cpu", Optional),
                both('u', "nproc", Optional),
                both('v', "as", Optional),
                both('x', "locks", Optional),
                both('y', "rttime", Optional),
                HELP,
                VERSION,
            ]),
            WORDS,
        )
    },
    Wrapper {
        runs_nothing_with: &["pid"],
        ..row(
            "choom",
            Grammar::permuting(&[
                both('n', "adjust", Required),
                both('p', "pid", Required),
                HELP,
                VERSION,
            ]),
            WORDS,
        )
    },
    Wrapper {
        shell_without_command: true,
        ..row("linux64", Grammar::stopping(SETARCH_FLAGS), WORDS)
    },
    Wrapper {
        shell_without_command: true,
        ..row("linux32", Grammar::stopping(SETARCH_FLAGS), WORDS)
    },
    own("setarch", setarch),
    row(
        "sshpass",
        Grammar::stopping(&[
            short('f', Required),
            short('d', Required),
            short('p', Required),
            short('e', No),
            short('P', Required),
            short('v', No),
            short('h', No),
            short('V', No),
        ]),
        WORDS,
    ),
    own("fakeroot", fakeroot),
    own("ssh-agent", ssh_agent),
    own("dbus-run-session", dbus_run_session),
    own("strace", strace),
    own("ltrace", ltrace),
    own("valgrind", valgrind),
    own("start-stop-daemon", start_stop_daemon),
    // Shell builtins that run a command. Their options are bash's own, not getopt_long's
    // (no long options, no abbreviations).
    Wrapper {
        runs_nothing_with: &["v", "V"],
        ..row(
            "command",
            Grammar::stopping(&[short('p', No), short('v', No), short('V', No)]),
            WORDS,
        )
    },
    row(
        "exec",
        Grammar::stopping(&[short('c', No), short('l', No), short('a', Required)]),
        WORDS,
    ),
    row("builtin", Grammar::stopping(&[]), WORDS),
    own("eval", eval),
    own("trap", trap),
    own("alias", alias_values),
    own("source", source),
    own(".", source),
    own("find", find),
    own("sg", sg),
    own("bash", shell),
    own("sh", shell),
    own("dash", shell),
    own("zsh", shell),
    own("ksh", shell),
    own("mksh", shell),
    own("ash", shell),
    own("rbash", shell),
];
