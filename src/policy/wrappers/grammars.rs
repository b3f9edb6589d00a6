//! The named grammars of the wrapper table: the ones a handler reads again (env after
//! `-S`, sudo after an assignment, setarch, fakeroot, ssh-agent, ltrace, strace) or several
//! rows share (su and runuser), with the options every program has. Their own file, so the
//! table (which names the handlers) and the handlers (which read these) import it and not
//! each other.

use crate::policy::argv::{Grammar, Opt, Value, alias, both, long, short};
use Value::{No, Optional, Required};

pub(super) const HELP: Opt = both('h', "help", No);
pub(super) const VERSION: Opt = both('V', "version", No);
pub(super) const LONG_HELP: Opt = long("help", No);
pub(super) const LONG_VERSION: Opt = long("version", No);

/// env's options (its handler reads them again after `-S`).
pub(super) static ENV: Grammar = Grammar::stopping(&[
    both('i', "ignore-environment", No),
    both('0', "null", No),
    both('u', "unset", Required),
    both('C', "chdir", Required),
    both('S', "split-string", Required),
    both('v', "debug", No),
    long("block-signal", Optional),
    long("default-signal", Optional),
    long("ignore-signal", Optional),
    long("list-signal-handling", No),
    LONG_HELP,
    LONG_VERSION,
]);

/// sudo's options (its handler reads them again after an assignment).
pub(super) static SUDO: Grammar = Grammar::stopping(&[
    both('a', "auth-type", Required),
    both('c', "login-class", Required),
    both('A', "askpass", No),
    both('b', "background", No),
    both('B', "bell", No),
    both('C', "close-from", Required),
    both('D', "chdir", Required),
    short('E', No),
    long("preserve-env", Optional),
    both('e', "edit", No),
    both('g', "group", Required),
    both('H', "set-home", No),
    // `-h` alone is help, `-h WORD` names a host; read as a value always,
    // which at worst judges a word that would not run.
    both('h', "host", Required),
    long("help", No),
    both('i', "login", No),
    both('K', "remove-timestamp", No),
    both('k', "reset-timestamp", No),
    both('l', "list", No),
    both('N', "no-update", No),
    both('n', "non-interactive", No),
    both('P', "preserve-groups", No),
    both('p', "prompt", Required),
    both('R', "chroot", Required),
    both('r', "role", Required),
    both('S', "stdin", No),
    both('s', "shell", No),
    both('t', "type", Required),
    both('T', "command-timeout", Required),
    both('U', "other-user", Required),
    both('u', "user", Required),
    both('V', "version", No),
    both('v', "validate", No),
]);

/// setarch's options after its architecture operand (`--list` is only read in its place).
pub(super) static SETARCH: Grammar = Grammar::stopping(&[
    both('B', "32bit", No),
    both('F', "fdpic-funcptrs", No),
    both('I', "short-inode", No),
    both('L', "addr-compat-layout", No),
    both('R', "addr-no-randomize", No),
    both('S', "whole-seconds", No),
    both('T', "sticky-timeouts", No),
    both('X', "read-implies-exec", No),
    both('Z', "mmap-page-zero", No),
    both('3', "3gb", No),
    long("4gb", No),
    long("uname-2.6", No),
    both('v', "verbose", No),
    long("list", No),
    HELP,
    VERSION,
]);

/// The options of linux32 and linux64 (setarch under another name, without the
/// architecture operand, which refuses `--list`).
pub(super) const SETARCH_FLAGS: &[Opt] = &[
    both('B', "32bit", No),
    both('F', "fdpic-funcptrs", No),
    both('I', "short-inode", No),
    both('L', "addr-compat-layout", No),
    both('R', "addr-no-randomize", No),
    both('S', "whole-seconds", No),
    both('T', "sticky-timeouts", No),
    both('X', "read-implies-exec", No),
    both('Z', "mmap-page-zero", No),
    both('3', "3gb", No),
    long("4gb", No),
    long("uname-2.6", No),
    both('v', "verbose", No),
    HELP,
    VERSION,
];

/// fakeroot's options (a shell script reading them with util-linux getopt, `+l:f:i:s:ub:vh`).
pub(super) static FAKEROOT: Grammar = Grammar::stopping(&[
    both('l', "lib", Required),
    both('f', "faked", Required),
    short('i', Required),
    short('s', Required),
    both('u', "unknown-is-real", No),
    both('b', "fd-base", Required),
    both('v', "version", No),
    both('h', "help", No),
]);

/// ssh-agent's options (OpenSSH's getopt, `cDdksE:a:O:P:t:`).
pub(super) static SSH_AGENT: Grammar = Grammar::stopping(&[
    short('c', No),
    short('D', No),
    short('d', No),
    short('k', No),
    short('s', No),
    short('E', Required),
    short('a', Required),
    short('O', Required),
    short('P', Required),
    short('t', Required),
]);

/// ltrace's options (`ltrace --help`, 0.7).
pub(super) static LTRACE: Grammar = Grammar::stopping(&[
    both('a', "align", Required),
    short('A', Required),
    short('b', No),
    both('c', "summary", No),
    both('C', "demangle", No),
    both('D', "debug", Required),
    short('e', Required),
    short('f', No),
    short('F', Required),
    both('h', "help", No),
    both('i', "instruction-pointer", No),
    both('l', "library", Required),
    short('L', No),
    short('n', Required),
    alias("indent", "n", Required),
    both('o', "output", Required),
    short('p', Required),
    short('r', No),
    both('s', "string-limit", Required),
    both('S', "syscalls", No),
    short('t', No),
    short('T', No),
    short('u', Required),
    both('w', "where", Required),
    short('x', Required),
    both('V', "version", No),
    long("no-signals", No),
]);

/// strace's options that take a value (strace 6.1): a short letter in a cluster ends it
/// and takes the rest or the next word; a long option takes `=value` or the next word.
/// The rest are flags. An option this misreads leaves a word where the command would be:
/// that word is then judged as the command, and a denied name after it as P6 says.
pub(super) const STRACE_SHORT_VALUES: &str = "abeEIoOpPsSuUX";
pub(super) const STRACE_LONG_VALUES: &[&str] = &[
    "columns",
    "trace",
    "trace-path",
    "signal",
    "status",
    "abbrev",
    "verbose",
    "raw",
    "read",
    "write",
    "fault",
    "inject",
    "kvm",
    "quiet",
    "silent",
    "silence",
    "decode-fds",
    "decode-pids",
    "env",
    "output",
    "attach",
    "string-limit",
    "user",
    "const-print-style",
    "summary-sort-by",
    "summary-columns",
    "absolute-timestamps",
    "timestamps",
    "syscall-times",
    "instruction-pointer",
    "stack-traces",
    "secontext",
    "trace-fds",
    "summary-syscall-overhead",
    "tips",
    "argv0",
];

/// su's and runuser's options (the same program in util-linux).
pub(super) const SU_OPTIONS: &[Opt] = &[
    both('c', "command", Required),
    long("session-command", Required),
    both('f', "fast", No),
    both('g', "group", Required),
    both('G', "supp-group", Required),
    both('l', "login", No),
    both('m', "preserve-environment", No),
    short('p', No),
    both('P', "pty", No),
    both('s', "shell", Required),
    both('u', "user", Required),
    both('w', "whitelist-environment", Required),
    HELP,
    VERSION,
];
