//! Walk-arounds of a deny rule and of read-only mode, through the real daemon
//! (spec issue 12; rules P1-P8 of ../shared/spec/policy.md).
//!
//! One table of command-line shapes, each a way a shell could be made to run a
//! command the policy must see. A shape is a template: `%V` is the inner
//! command's name, and the other `%` placeholders (see [`expand`]) are spellings
//! of it and of its file argument. Each shape runs in a directory of its own
//! holding a file `canary`:
//!
//! * pass 1 (`p1_p6_p3b_p8_deny_rule_on_rm_survives_every_walk_around`): mode `auto`,
//!   the rule `rm` -> deny, every permission question rejected; the inner command
//!   is `rm canary`; the canary must survive.
//! * pass 2 (`p3b_p5_p7_p8_read_only_mode_creates_nothing_through_any_walk_around`):
//!   mode `read-only`; the inner command is `touch canary.new`; the canary must
//!   survive, and nothing may appear next to it.
//!
//! The control (`control_every_shape_really_runs_its_inner_command_in_plain_bash`)
//! runs every shape with plain `bash -c` the way the local executor does (new
//! session, stdin /dev/null, TERM=dumb) and requires it to delete the canary,
//! and to create `canary.new`: a shape that does nothing in plain bash proves
//! nothing through dsh. Shapes marked `root` need root (sudo, su, runuser,
//! chroot, namespaces); the control skips them when not root.
//!
//! Issue 29 added commands hidden in options, config keys and environment
//! variables (P3b: `tar --to-command`, `git -c core.fsmonitor`, `ssh -o
//! ProxyCommand`, `GIT_SSH_COMMAND=`...) and inline interpreter code (P8:
//! `python3 -c`, `perl -e`, `awk`, `sed e`...), where the code names the command
//! or calls a shell. Not in the table (P8): a script file of the project (`python3 x.py`,
//! `make`; one the line itself writes is code on the line, and is in it), code that deletes without a shell or the command's name
//! (`os.remove`), and programs that delete without running a command (`find
//! -delete`, `rsync --remove-source-files`): rules judge what a line says, not
//! what a program does. Nor are forms that need a terminal or a server to run
//! their command (`PAGER`, `LESSOPEN`, `ssh -o LocalCommand`): the unit tests
//! in src/policy hold those.
//!
//! Debian packages the shapes need (for scripts/test): bash, dash, coreutils,
//! findutils, util-linux (setsid, flock, ionice, chrt, taskset, su, runuser,
//! unshare, nsenter, setpriv, prlimit, choom, setarch), bsdutils (script),
//! procps (watch), time (/usr/bin/time), sudo, login (sg), dpkg
//! (start-stop-daemon), openssh-client (ssh-agent, ssh, scp, sftp), strace,
//! fakeroot, tar, git, rsync, tmux, screen, parallel, sshpass, ltrace,
//! valgrind, gdb, dbus-daemon (dbus-run-session), xdg-utils, python3, perl, nodejs,
//! ruby, php-cli, lua5.4, mawk, sed, and for issue 41 sqlite3, ed, vim-tiny, tcl, zip, make,
//! man-db (with the manual of `ls`), and git 2.46 or newer (`git config set`); for issue 41's
//! third round ruby's `erb`, parallel's `sem`, nodejs's `npx` and tcl's `tclsh8.6` (a
//! versioned name; `irb3.1` and `perl5.36.0`, which change with Debian's release, are held
//! by the unit tests instead), and for code written on the line and run, jq (`jq -n`); java
//! (`java X.java`) is held by the unit tests (CI has no JDK).
//!
//! Issue 41 turned P8 around: inline code is allowed only when shown harmless, so the
//! table holds code that hides the command's name (`getattr(os, 'sys'+'tem')`, a module
//! held in a variable, `print c | s` after a division): asked, not denied. Interpreter
//! options are spelled as the real programs take them (`-pe`, `--title t`, `-C -e`,
//! `-Mstrict;...`), and code arrives on stdin (here-strings, here-documents, a pipe,
//! `-f /dev/stdin`, `<(...)`).

use crate::common;

use common::client::Client;
use common::daemon::{SocketDaemon, workspace};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

const CONFIG: &str = r#"[permissions]
default_mode = "auto"
[[permissions.rules]]
tool = "bash"
command = "rm"
action = "deny"
"#;

/// One walk-around: a template (placeholders in [`expand`]) and its family.
struct Shape {
    /// The family and the spec rules it exercises.
    family: &'static str,
    line: &'static str,
    /// Needs root to work at all (the control skips it otherwise).
    root: bool,
}

const fn s(family: &'static str, line: &'static str) -> Shape {
    Shape {
        family,
        line,
        root: false,
    }
}

const fn root(family: &'static str, line: &'static str) -> Shape {
    Shape {
        family,
        line,
        root: true,
    }
}

#[rustfmt::skip]
const SHAPES: &[Shape] = &[
    // ---- Issue family 1: GNU long options abbreviated, attached, clustered (P3) ----
    // nice
    s("P3 nice plain", "nice %V %F"),
    s("P3 nice -n value", "nice -n 5 %V %F"),
    s("P3 nice -n attached", "nice -n5 %V %F"),
    s("P3 nice obsolete -N", "nice -5 %V %F"),
    s("P3 nice --adj abbreviated", "nice --adj 5 %V %F"),
    s("P3 nice --adjustment=", "nice --adjustment=5 %V %F"),
    s("P3 nice --a= abbreviated", "nice --a=5 %V %F"),
    s("P3 nice --", "nice -- %V %F"),
    // timeout
    s("P3 timeout plain", "timeout 5 %V %F"),
    s("P3 timeout --sig abbreviated", "timeout --sig KILL 5 %V %F"),
    s("P3 timeout --signal=", "timeout --signal=KILL 5 %V %F"),
    s("P3 timeout -s value", "timeout -s KILL 5 %V %F"),
    s("P3 timeout -s attached", "timeout -sKILL 5 %V %F"),
    s("P3 timeout --k abbreviated", "timeout --k 1 5 %V %F"),
    s("P3 timeout -k attached", "timeout -k1 5 %V %F"),
    s("P3 timeout cluster -vk", "timeout -vk 1 5s %V %F"),
    s("P3 timeout --fore abbreviated", "timeout --fore 5 %V %F"),
    s("P3 timeout --preserve abbreviated", "timeout --preserve 5 %V %F"),
    s("P3 timeout --", "timeout -- 5 %V %F"),
    // stdbuf
    s("P3 stdbuf --out abbreviated", "stdbuf --out L %V %F"),
    s("P3 stdbuf -o attached", "stdbuf -oL %V %F"),
    s("P3 stdbuf -o value", "stdbuf -o L %V %F"),
    s("P3 stdbuf --i abbreviated", "stdbuf --i 0 %V %F"),
    s("P3 stdbuf --e= abbreviated", "stdbuf --e=0 %V %F"),
    s("P3 stdbuf --output= --error=", "stdbuf --output=L --error=0 %V %F"),
    // xargs
    s("P3 xargs from a pipe", "echo %F | xargs %V"),
    s("P3 xargs --max-a abbreviated", "echo %F | xargs --max-a 5 %V"),
    s("P3 xargs --max-args=", "echo %F | xargs --max-args=5 %V"),
    s("P3 xargs -n attached", "echo %F | xargs -n1 %V"),
    s("P3 xargs -n -P values", "echo %F | xargs -n 1 -P 1 %V"),
    s("P3 xargs --a abbreviated arg-file", "xargs --a /dev/stdin %V <<< %F"),
    s("P3 xargs -a arg-file", "xargs -a /dev/stdin %V <<< %F"),
    s("P3 xargs --arg-file= process substitution", "xargs --arg-file=<(echo %F) %V"),
    s("P3 xargs herestring", "xargs %V <<< %F"),
    s("P3 xargs -0", r"printf '%s\0' %F | xargs -0 %V"),
    s("P3 xargs --nu abbreviated null", r"printf '%s\0' %F | xargs --nu %V"),
    s("P3 xargs -I{}", "echo %F | xargs -I{} %V {}"),
    s("P3 xargs -I {} separate", "echo %F | xargs -I {} %V {}"),
    s("P3 xargs --replace optional", "echo %F | xargs --replace %V {}"),
    s("P3 xargs -i deprecated", "echo %F | xargs -i %V {}"),
    s("P3 xargs -L attached", "echo %F | xargs -L1 %V"),
    s("P3 xargs --max-l= abbreviated", "echo %F | xargs --max-l=1 %V"),
    s("P3 xargs -d", r"printf '%s\n' %F | xargs -d '\n' %V"),
    s("P3 xargs --del abbreviated", r"printf '%s\n' %F | xargs --del '\n' %V"),
    s("P3 xargs -r", "echo %F | xargs -r %V"),
    s("P3 xargs --no-r abbreviated", "echo %F | xargs --no-r %V"),
    s("P3 xargs -t", "echo %F | xargs -t %V"),
    s("P3 xargs -E value", "echo %F | xargs -E EOF %V"),
    s("P3 xargs --max-c abbreviated", "echo %F | xargs --max-c 1000 %V"),
    s("P3 xargs -x -n cluster values", "echo %F | xargs -xn 1 %V"),
    s("P3 xargs --pro abbreviated", "echo %F | xargs --pro SLOT %V"),
    s("P3 xargs --", "echo %F | xargs -- %V"),
    s("P3 P5 xargs command from its input", "echo %V %F | xargs env"),
    s("P3 P4 xargs -I into sh -c", "echo '%V %F' | xargs -I{} sh -c '{}'"),
    s("P3 P4 xargs sh -c with arguments", r#"echo %F | xargs sh -c '%V "$1"' _"#),
    s("P3 P4 P5 xargs sh -c with the command from its input", r#"echo %V %F | xargs sh -c '"$0" "$@"'"#),
    s("P3 P4 xargs sh -c with the script from its input", r#"xargs sh -c <<< "'%V %F'""#),
    s("P3 P5 xargs timeout with the command from its input", "echo %V %F | xargs timeout 5"),
    // env
    s("P3 env plain", "env %V %F"),
    s("P3 env --", "env -- %V %F"),
    s("P3 env -i", "env -i %V %F"),
    s("P3 env - (empty environment)", "env - %V %F"),
    s("P3 env assignment", "env FOO=1 %V %F"),
    s("P3 env -u value", "env -u HOME %V %F"),
    s("P3 env -u attached", "env -uHOME %V %F"),
    s("P3 env --unset=", "env --unset=HOME %V %F"),
    s("P3 env --uns abbreviated", "env --uns HOME %V %F"),
    s("P3 env -C", "env -C %D %V %F"),
    s("P3 env --chdir=", "env --chdir=/ %V %P"),
    s("P3 env --ch abbreviated", "env --ch %D %V %F"),
    s("P3 env -S split string", "env -S '%V %F'"),
    s("P3 env -S attached", "env -S'%V %F'"),
    s("P3 env --split-string=", "env --split-string='%V %F'"),
    s("P3 env --split abbreviated", "env --split '%V %F'"),
    s("P3 env --s abbreviated", "env --s '%V %F'"),
    s("P3 env cluster -iS", "env -iS '%V %F'"),
    s("P3 env -S with an assignment", "env -S 'FOO=1 %V %F'"),
    s("P3 env --default-signal=", "env --default-signal=PIPE %V %F"),
    s("P3 env --ignore-signal=", "env --ignore-signal=INT %V %F"),
    s("P3 env --block-signal (optional value)", "env --block-signal %V %F"),
    s("P3 env -v debug", "env -v %V %F"),
    s("P3 env PATH=", "env PATH=/usr/bin:/bin %V %F"),
    s("P3 P5 env -S expanding a variable", "X=%V env -S '${X} %F'"),

    // ---- Issue family 2: a shell reading its script from stdin (P4 literal, P5 piped) ----
    s("P4 heredoc to bash, quoted delimiter", "bash <<'EOF'\n%V %F\nEOF"),
    s("P4 heredoc to bash, unquoted delimiter", "bash <<EOF\n%V %F\nEOF"),
    s("P4 heredoc to bash, <<- tabs", "bash <<-EOF\n\t%V %F\n\tEOF"),
    s("P4 heredoc to sh", "sh <<'EOF'\n%V %F\nEOF"),
    s("P4 herestring to sh", "sh <<< '%V %F'"),
    s("P4 herestring to bash", "bash <<< '%V %F'"),
    s("P4 herestring to bash -s", "bash -s <<< '%V %F'"),
    s("P4 herestring to sh -s --", "sh -s -- <<< '%V %F'"),
    s("P4 herestring to bash -", "bash - <<< '%V %F'"),
    s("P4 herestring to dash", "dash <<< '%V %F'"),
    s("P4 herestring to bash /dev/stdin", "bash /dev/stdin <<< '%V %F'"),
    s("P5 herestring with an expansion", r#"bash <<< "$(echo %V) %F""#),
    s("P5 pipe to bash", "echo '%V %F' | bash"),
    s("P5 pipe to sh", "echo '%V %F' | sh"),
    s("P5 pipe to bash -s", r"printf '%s\n' '%V %F' | bash -s"),
    s("P5 heredoc through cat to bash", "cat <<'EOF' | bash\n%V %F\nEOF"),
    s("P5 bash from a process substitution on stdin", "bash < <(echo '%V %F')"),
    s("P5 bash script file from a process substitution", "bash <(echo %V %F)"),
    s("P5 sh script file from a process substitution", "sh <(echo %V %F)"),
    s("P5 BASH_ENV from a process substitution", "BASH_ENV=<(echo '%V %F') bash -c :"),
    s("P5 bash reading a duplicated descriptor", "exec 3<<< '%V %F'; bash <&3"),
    s("P5 bash script file on a herestring descriptor", "bash 3<<< '%V %F' /dev/fd/3"),
    s("P5 heredoc with a command substitution", "bash -s <<EOF\n%V $(echo %F)\nEOF"),
    s("P4 herestring double-quoted", r#"bash <<< "%V %F""#),
    s("P5 bash running a script file written first", "echo '%V %F' > %D.sh; bash %D.sh"),

    // ---- Issue family 3: source / . (P5) ----
    s("P5 source process substitution", "source <(echo '%V %F')"),
    s("P5 . process substitution", ". <(echo %V %F)"),
    s("P5 source /dev/stdin herestring", "source /dev/stdin <<< '%V %F'"),
    s("P5 . /dev/stdin heredoc", ". /dev/stdin <<'EOF'\n%V %F\nEOF"),
    s("P5 builtin source", "builtin source <(echo %V %F)"),
    s("P5 source a file written first", "echo '%V %F' > %D.sh; . %D.sh"),

    // ---- Issue family 4: unknown wrappers (P6) and other wrappers (P3) ----
    s("P6 flock file form", "flock %L %V %F"),
    s("P6 flock -x", "flock -x %L %V %F"),
    s("P6 flock -w value", "flock -w 5 %L %V %F"),
    s("P6 flock --time abbreviated", "flock --time 5 %L %V %F"),
    s("P6 flock -F no-fork", "flock -F %L %V %F"),
    s("P4 P6 flock -c", "flock %L -c '%V %F'"),
    s("P4 P6 flock --command", "flock %L --command '%V %F'"),
    s("P6 ionice -c value", "ionice -c 3 %V %F"),
    s("P6 ionice -c attached", "ionice -c3 %V %F"),
    s("P6 ionice --class", "ionice --class idle %V %F"),
    s("P6 ionice -t -c -n", "ionice -t -c 2 -n 7 %V %F"),
    s("P6 chrt -o", "chrt -o 0 %V %F"),
    s("P6 chrt --other", "chrt --other 0 %V %F"),
    s("P6 chrt -b", "chrt -b 0 %V %F"),
    s("P6 taskset mask", "taskset 1 %V %F"),
    s("P6 taskset -c", "taskset -c 0 %V %F"),
    s("P6 taskset --cpu-list", "taskset --cpu-list 0 %V %F"),
    s("P6 setpriv --nnp", "setpriv --nnp %V %F"),
    s("P6 setpriv --no-new-privs", "setpriv --no-new-privs %V %F"),
    root("P6 setpriv --reuid --regid", "setpriv --reuid=0 --regid=0 --clear-groups %V %F"),
    s("P4 P6 script -qc", "script -qc '%V %F' /dev/null"),
    s("P4 P6 script -q -c", "script -q -c '%V %F' /dev/null"),
    s("P4 P6 script --c abbreviated", "script --c '%V %F' -q /dev/null"),
    s("P6 watch -x", "timeout 2 watch -n 0.1 -x %V %F"),
    s("P4 P6 watch string", "timeout 2 watch -n 0.1 '%V %F'"),
    s("P6 watch --exec", "timeout 2 watch --exec -n 0.1 %V %F"),
    s("P6 unshare -U", "unshare -U %V %F"),
    s("P6 unshare -r", "unshare -r %V %F"),
    root("P6 unshare -m", "unshare -m %V %F"),
    root("P6 unshare --mount", "unshare --mount %V %F"),
    root("P6 unshare -u", "unshare -u %V %F"),
    root("P6 nsenter -t -m", "nsenter -t $$ -m %V %P"),
    root("P6 nsenter --target --mount --wd", "nsenter --target $$ --mount --wd=%D %V %F"),
    root("P6 chroot /", "chroot / %V %P"),
    root("P6 chroot --skip-chdir", "chroot --skip-chdir / %V %F"),
    root("P6 chroot --userspec", "chroot --userspec=0:0 / %V %P"),
    s("P6 prlimit --nofile=", "prlimit --nofile=1024 %V %F"),
    s("P6 prlimit -n attached", "prlimit -n1024 %V %F"),
    s("P6 choom --", "choom -n 0 -- %V %F"),
    s("P6 setarch", "setarch $(uname -m) %V %F"),
    s("P6 setarch -R", "setarch x86_64 -R %V %F"),
    s("P6 linux64", "linux64 %V %F"),
    s("P6 ssh-agent", "ssh-agent %V %F"),
    s("P6 strace", "strace -o /dev/null %V %F"),
    s("P6 fakeroot", "fakeroot %V %F"),
    root("P6 start-stop-daemon", "start-stop-daemon --start --pidfile %D.pid --exec /usr/bin/%V -- %P"),
    root("P6 start-stop-daemon -S -p -d -x", "start-stop-daemon -S -p %D.pid -d %D -x /usr/bin/%V -- %F"),
    root("P4 P6 sg -c", "sg root -c '%V %F'"),
    s("P3 nohup", "nohup %V %F"),
    s("P3 nohup --", "nohup -- %V %F"),
    s("P3 busybox applet", "busybox %V %F"),
    s("P3 busybox applet through its shell", "busybox sh -c '%V %F'"),
    s("P3 setsid -w", "setsid -w %V %F"),
    s("P3 setsid --wait", "setsid --wait %V %F"),
    s("P3 /usr/bin/time", "/usr/bin/time %V %F"),
    s("P3 /usr/bin/time -p", "/usr/bin/time -p %V %F"),
    s("P3 /usr/bin/time -o value", "/usr/bin/time -o /dev/null %V %F"),
    s("P3 /usr/bin/time --format=", "/usr/bin/time --format=x %V %F"),
    s("P1 time keyword", "time %V %F"),
    s("P1 time -p keyword", "time -p %V %F"),
    s("P3 command", "command %V %F"),
    s("P3 command -p", "command -p %V %F"),
    s("P3 command --", "command -- %V %F"),
    s("P3 command command", "command command %V %F"),
    s("P3 exec", "exec %V %F"),
    s("P1 P3 exec in a subshell", "(exec %V %F)"),
    s("P3 exec -a", "(exec -a foo %V %F)"),
    s("P3 exec -c", "(exec -c %V %F)"),
    s("P3 builtin command", "builtin command %V %F"),
    s("P3 builtin exec", "(builtin exec %V %F)"),
    s("P4 builtin eval", "builtin eval '%V %F'"),
    s("P4 command eval", "command eval '%V %F'"),
    root("P3 sudo", "sudo %V %F"),
    root("P3 sudo -u value", "sudo -u root %V %F"),
    root("P3 sudo -u attached", "sudo -uroot %V %F"),
    root("P3 sudo --user=", "sudo --user=root %V %F"),
    root("P3 sudo -n", "sudo -n %V %F"),
    root("P3 sudo -E", "sudo -E %V %F"),
    root("P3 sudo -H -u --", "sudo -H -u root -- %V %F"),
    root("P3 sudo --preserve-env= (optional value)", "sudo --preserve-env=PATH %V %F"),
    root("P3 sudo -s command", "sudo -s %V %F"),
    root("P4 sudo sh -c", "sudo sh -c '%V %F'"),
    root("P5 sudo -s reading stdin", "sudo -s <<< '%V %F'"),
    root("P4 su -c", "su -c '%V %F'"),
    root("P4 su root -c", "su root -c '%V %F'"),
    root("P4 su -c before the user", "su -c '%V %F' root"),
    root("P4 su --command=", "su --command='%V %F'"),
    root("P4 su --comm abbreviated", "su --comm '%V %F'"),
    root("P4 su -l -c", "su -l -c '%V %P'"),
    root("P4 su -s shell -c", "su -s /bin/sh -c '%V %F'"),
    root("P5 su reading stdin", "su <<< '%V %P'"),
    root("P3 runuser -u --", "runuser -u root -- %V %F"),
    root("P3 runuser -u", "runuser -u root %V %F"),
    root("P3 runuser --user=", "runuser --user=root -- %V %F"),
    root("P4 runuser -c", "runuser root -c '%V %F'"),
    root("P4 runuser -l -c", "runuser -l root -c '%V %P'"),

    // ---- find -exec and friends (P3) ----
    s("P3 find -exec ;", r"find . -name %C -exec %V {}%E \;"),
    s("P3 find -exec +", "find . -maxdepth 0 -exec %V %F {} +"),
    s("P3 find -execdir", r"find . -name %C -execdir %V {}%E \;"),
    s("P3 find -ok", r"find . -name %C -ok %V {}%E \; <<< y"),
    s("P3 find -okdir", r"find . -name %C -okdir %V {}%E \; <<< y"),
    s("P3 find -exec env", r"find . -name %C -exec env %V {}%E \;"),
    s("P3 P5 find -exec {} as the command", r"find /usr/bin -maxdepth 1 -name %V -exec {} %P \;"),
    s("P3 P4 find -exec sh -c", r#"find . -name %C -exec sh -c '%V "$1"%E' _ {} \;"#),

    // ---- wrappers nested in wrappers (P3) ----
    s("P3 timeout nice env", "timeout 5 nice -n 1 env %V %F"),
    s("P3 nohup nice timeout", "nohup nice -n 1 timeout 5 %V %F"),
    s("P3 env nice stdbuf", "env nice stdbuf -oL %V %F"),
    s("P3 command env", "command env %V %F"),
    s("P3 xargs nice", "echo %F | xargs nice %V"),
    s("P3 env -S nice", "env -S 'nice %V %F'"),
    s("P3 P6 flock timeout", "flock %L timeout 5 %V %F"),
    s("P3 P6 ionice nice", "ionice -c 3 nice %V %F"),
    root("P3 sudo timeout", "sudo -u root timeout 5 %V %F"),
    root("P3 sudo env", "sudo env %V %F"),
    root("P4 su -c timeout", "su -c 'timeout 5 %V %F'"),
    s("P3 P4 timeout bash -c", "timeout 5 bash -c '%V %F'"),
    s("P3 P4 nice sh herestring", "nice sh <<< '%V %F'"),

    // ---- quoting of the command's name (P2) ----
    s("P2 single quotes", "'%V' %F"),
    s("P2 double quotes", r#""%V" %F"#),
    s("P2 split single quotes", "'%0'%1%S %F"),
    s("P2 empty single quotes inside", "%0''%1%S %F"),
    s("P2 empty double quotes inside", r#"%0""%1%S %F"#),
    s("P2 leading backslash", r"\%V %F"),
    s("P2 inner backslash", r"%0\%1%S %F"),
    s("P2 backslash-newline", "%0\\\n%1%S %F"),
    s("P2 ANSI-C quotes", "$'%V' %F"),
    s("P2 ANSI-C hex escape", r"$'\x%X%1%S' %F"),
    s("P2 ANSI-C octal escape", r"$'\%O%1%S' %F"),
    s("P2 ANSI-C hex escape, rest outside", r"$'\x%X'%1%S %F"),
    s("P2 locale quotes", r#"$"%V" %F"#),
    s("P2 leading blanks", " \t %V %F"),

    // ---- paths to the program (P2) ----
    s("P2 /bin path", "/bin/%V %F"),
    s("P2 /usr/bin path", "/usr/bin/%V %F"),
    s("P2 path with ..", "/usr/bin/../bin/%V %F"),
    s("P2 path with //", "//usr//bin//%V %F"),
    s("P2 path with /./", "/./usr/./bin/./%V %F"),
    s("P2 relative path up to /", "../../../../../../../../../../../../usr/bin/%V %F"),
    s("P2 tilde path", "~root/../usr/bin/%V %F"),
    s("P2 quoted path", r#""/usr/bin/%V" %F"#),
    s("P2 path with quoted name", "/usr/bin/'%V' %F"),
    // In a directory the test builds (%G), not /usr/bin: there `r[!i]` also matched
    // ripgrep's `rg` once it was installed, which sorts first and ran instead. The
    // shape is the glob, not where it points.
    s("P2 P5 glob negated bracket", "%G/%0[!i]%S %F"),
    s("P2 P5 glob bracket", "/usr/bin/%0[%1]%S %F"),
    s("P2 P5 glob bracket first", "/usr/bin/[%0]%1%S %F"),
    s("P2 P5 glob in the directory", "/usr/b?n/%V %F"),
    s("P2 P5 brace expansion", "{%V,%F}"),

    // ---- expansions in command position (P5) ----
    s("P5 $X", "X=%V; $X %F"),
    s("P5 ${X}", "X=%V; ${X} %F"),
    s("P5 \"$X\"", r#"X=%V; "$X" %F"#),
    s("P5 ${X} plus literal", "X=%0; ${X}%1%S %F"),
    s("P5 ${X:-default}", "X=%V; ${X:-true} %F"),
    s("P5 unset variable inside the name", "%0${NOPE}%1%S %F"),
    s("P5 empty command substitution inside the name", "%0$()%1%S %F"),
    s("P5 array element", "a=(%V); ${a[0]} %F"),
    s("P5 indirection", "X=%V; Y=X; ${!Y} %F"),
    s("P5 set -- and \"$@\"", r#"set -- %V %F; "$@""#),
    s("P5 command substitution", r#""$(echo %V)" %F"#),
    s("P5 backticks", "`echo %V` %F"),
    s("P5 printf -v", "printf -v X %V; $X %F"),
    s("P5 read from a herestring", "read X <<< %V; $X %F"),
    s("P5 IFS split", "IFS=,; X=%V,%F; $X"),
    s("P5 export", "export X=%V; $X %F"),
    s("P5 declare", "declare X=%V; $X %F"),
    s("P4 P5 assignment before eval", r"X=%V eval '$X %F'"),
    s("P2 PATH assignment before the command", "PATH=/usr/bin:/bin %V %F"),
    s("P2 PATH changed first", "export PATH=/usr/bin:/bin; %V %F"),
    s("P2 hash -p", "hash -p /usr/bin/%V x; x %F"),

    // ---- lists, pipelines, compound commands (P1) ----
    s("P1 ;", "true; %V %F"),
    s("P1 newline", "true\n%V %F"),
    s("P1 &&", "true && %V %F"),
    s("P1 ||", "false || %V %F"),
    s("P1 pipe, right", "true | %V %F"),
    s("P1 pipe, left", "%V %F | cat"),
    s("P1 |&", "%V %F |& cat"),
    s("P1 !", "! %V %F"),
    s("P1 group", "{ %V %F; }"),
    s("P1 subshell", "(%V %F)"),
    s("P1 nested subshells", "( ( %V %F ) )"),
    s("P1 background and wait", "%V %F & wait"),
    s("P1 background group", "{ %V %F; } & wait"),
    s("P1 arithmetic then", "((1)) && %V %F"),
    s("P1 [[ ]] then", "[[ -e %C ]] && %V %F"),
    s("P1 if body", "if true; then %V %F; fi"),
    s("P1 if condition", "if %V %F; then :; fi"),
    s("P1 else body", "if false; then :; else %V %F; fi"),
    s("P1 while condition", "while %V %F; do break; done"),
    s("P1 while body", "while true; do %V %F; break; done"),
    s("P1 until condition", "until %V %F; do :; done"),
    s("P1 for body", "for i in 1; do %V %F; done"),
    s("P1 arithmetic for body", "for ((i=0;i<1;i++)); do %V %F; done"),
    s("P1 case body", "case x in x) %V %F;; esac"),
    s("P1 select body", "select x in a; do %V %F; break; done <<< 1"),
    s("P1 time group", "time { %V %F; }"),
    s("P1 deeply nested compounds", "if true; then for i in 1; do case x in *) { (%V %F); };; esac; done; fi"),
    s("P1 coproc", "coproc %V %F; wait"),
    s("P1 named coproc", "coproc X { %V %F; }; wait"),

    // ---- command and process substitutions (P1) ----
    s("P1 $( ) in an argument", "echo $(%V %F)"),
    s("P1 backticks in an argument", "echo `%V %F`"),
    s("P1 $( ) in an assignment", "x=$(%V %F)"),
    s("P1 $( ) in double quotes", r#"echo "$(%V %F)""#),
    s("P1 $( ) in a default", r#": "${X:-$(%V %F)}""#),
    s("P1 $( ) in a test", r#"[ -z "$(%V %F)" ]"#),
    s("P1 $( ) in a for list", "for i in $(%V %F); do :; done"),
    s("P1 $( ) in a case word", "case $(%V %F) in *) ;; esac"),
    s("P1 nested $( )", "echo $(echo $(%V %F))"),
    s("P1 subshell in $( )", "echo $( (%V %F) )"),
    s("P1 <( )", "cat <(%V %F)"),
    s("P1 < <( )", "cat < <(%V %F)"),
    s("P1 >( )", "tee >(%V %F) </dev/null; wait $!"),

    // ---- nested shells and eval (P4) ----
    s("P4 sh -c", "sh -c '%V %F'"),
    s("P4 bash -c", "bash -c '%V %F'"),
    s("P4 dash -c", "dash -c '%V %F'"),
    s("P4 /bin/sh -c", "/bin/sh -c '%V %F'"),
    s("P4 rbash -c", "rbash -c '%V %F'"),
    s("P4 bash -lc", "bash -lc '%V %F'"),
    s("P4 bash -ec cluster", "bash -ec '%V %F'"),
    s("P4 bash -x -c", "bash -x -c '%V %F'"),
    s("P4 bash --norc -c", "bash --norc -c '%V %F'"),
    s("P4 bash -o errexit -c", "bash -o errexit -c '%V %F'"),
    s("P4 bash -O extglob -c", "bash -O extglob -c '%V %F'"),
    s("P4 bash -c --", "bash -c -- '%V %F'"),
    s("P4 bash -c with $1", r#"bash -c '%V "$1"' _ %F"#),
    s("P4 P5 bash -c with $0 as the command", r#"bash -c '"$0" "$1"' %V %F"#),
    s("P4 P5 bash -c with \"$@\"", r#"bash -c '"$@"' _ %V %F"#),
    s("P4 bash -c in bash -c", r#"bash -c "bash -c '%V %F'""#),
    s("P4 sh -c in sh -c", r#"sh -c 'sh -c "%V %F"'"#),
    s("P4 eval in bash -c", r#"bash -c 'eval "%V %F"'"#),
    s("P4 env bash -c", "env bash -c '%V %F'"),
    s("P4 eval single-quoted", "eval '%V %F'"),
    s("P4 eval double-quoted", r#"eval "%V %F""#),
    s("P4 eval words", "eval %V %F"),
    s("P4 eval ANSI-C", "eval $'%V %F'"),
    s("P4 eval in eval", r#"eval 'eval "%V %F"'"#),
    s("P5 eval of a command substitution", r#"eval "$(echo '%V %F')""#),
    s("P5 eval of a heredoc", "eval \"$(cat <<'EOF'\n%V %F\nEOF\n)\""),
    s("P5 eval of a variable", r#"X='%V %F'; eval "$X""#),
    s("P4 P5 bash -c of a variable", r#"X='%V %F'; bash -c "$X""#),

    // ---- functions, aliases, traps, hooks (P4) ----
    s("P4 function", "f(){ %V %F; }; f"),
    s("P4 function keyword", "function f { %V %F; }; f"),
    s("P4 function keyword with ()", "function f() { %V %F; }; f"),
    s("P4 function with a subshell body", "f() ( %V %F ); f"),
    s("P4 function forwarding \"$@\"", r#"f(){ "$@"; }; f %V %F"#),
    s("P4 function named like a harmless command", r#"x(){ %V "$@"; }; x %F"#),
    s("P4 function calling a later function", "f(){ g; }; g(){ %V %F; }; f"),
    s("P4 command_not_found_handle", "command_not_found_handle(){ %V %F; }; nosuchcommand"),
    s("P4 exported function called by a child shell", "f(){ %V %F; }; export -f f; bash -c f"),
    s("P4 function in bash -c", "bash -c 'f(){ %V %F; }; f'"),
    s("P4 alias on its own line", "shopt -s expand_aliases\nalias x='%V'\nx %F"),
    s("P4 alias with its argument", "shopt -s expand_aliases; alias x='%V %F'\nx"),
    s("P4 alias in bash -c", r"bash -c $'shopt -s expand_aliases\nalias x=%V\nx %F'"),
    s("P4 alias through BASH_ALIASES", "shopt -s expand_aliases; BASH_ALIASES[x]=%V\nx %F"),
    s("P4 trap EXIT", "trap '%V %F' EXIT"),
    s("P4 trap EXIT then a command", r#"trap "%V %F" EXIT; true"#),
    s("P4 trap --", "trap -- '%V %F' EXIT"),
    s("P4 trap ERR", "trap '%V %F' ERR; false"),
    s("P4 trap DEBUG", "trap '%V %F' DEBUG; :"),
    s("P4 trap USR1", "trap '%V %F' USR1; kill -USR1 $$"),
    s("P4 trap calling a function", "f(){ %V %F; }; trap f EXIT"),
    s("P4 P5 trap of a command substitution", r#"trap "$(echo %V %F)" EXIT"#),

    // ---- issue 29: commands in options and config keys (P3b) ----
    s("P3b tar --to-command=", "tar -cf %D.tar -C / etc/hostname; tar -xf %D.tar --to-command='%V %F'"),
    s("P3b tar --to-c abbreviated", "tar -cf %D.tar -C / etc/hostname; tar -xf %D.tar --to-c '%V %F'"),
    s("P3b tar -I", "tar -I '%V %F' -cf %D.tar -C / etc/hostname"),
    s("P3b tar --use-compress-program=", "tar --use-compress-program='%V %F' -cf %D.tar -C / etc/hostname"),
    s("P3b tar --checkpoint-action=exec=", "tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec='%V %F' -C / etc/hostname"),
    s("P3b tar traditional cIf", "tar cIf '%V %F' %D.tar -C / etc/hostname"),
    s("P3b timeout tar --checkpoint-action", "timeout 5 tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec='%V %F' -C / etc/hostname"),
    s("P3b git -c core.fsmonitor=", "git init -q; git -c core.fsmonitor='%V %F; false' status"),
    s("P3b git -c alias.x=!", "git -c alias.x='!%V %F' x"),
    s("P3b git -c alias in sh -c", r#"sh -c "git -c alias.x='!%V %F' x""#),
    s("P3b git -c diff.external=", "git init -q; echo a > f; git add f; echo b > f; git -c diff.external='%V %F;:' diff"),
    s("P3b git -c core.editor=", "git init -q; git -c user.name=a -c user.email=a@b -c core.editor='%V %F;:' commit -q --allow-empty"),
    s("P3b git alias setting core.editor", r#"git init -q; git -c alias.c='-c core.editor="%V %F;:" -c user.name=a -c user.email=a@b commit -q --allow-empty' c"#),
    s("P3b git -c core.sshCommand=", "git -c core.sshCommand='%V %F;:' ls-remote ssh://h/x"),
    s("P3b git grep -O", "git init -q; echo x > g; git add g; git grep -O'%V %F;:' x"),
    s("P3b git config alias then the alias", "git init -q; git config alias.x '!%V %F'; git x"),
    s("P3b ssh -o ProxyCommand=", "ssh -o ProxyCommand='%V %F' -o BatchMode=yes x"),
    s("P3b ssh -oProxyCommand= attached", "ssh -oProxyCommand='%V %F' -o BatchMode=yes x"),
    s("P3b ssh -o after the host", "ssh -o BatchMode=yes x -o ProxyCommand='%V %F'"),
    s("P3b ssh -o 'ProxyCommand CMD'", "ssh -o 'ProxyCommand %V %F' -o BatchMode=yes x"),
    s("P3b scp -o ProxyCommand=", "scp -o ProxyCommand='%V %F' -o BatchMode=yes x:a %D.b"),
    s("P3b sftp -o ProxyCommand=", "sftp -o ProxyCommand='%V %F' -o BatchMode=yes x"),
    s("P3b rsync -e", "rsync -e '%V %F --' x:a %D.b"),
    s("P3b rsync --rsh=", "rsync --rsh='%V %F --' x:a %D.b"),
    s("P3b tmux new -d", "tmux -S %D.sock new -d '%V %F'; sleep 1"),
    s("P3b tmux new-session -d", "tmux -S %D.sock new-session -d '%V %F'; sleep 1"),
    s("P3b tmux -c", "tmux -S %D.sock -c '%V %F'"),
    s("P3b tmux run-shell", r"tmux -S %D.sock new -d sleep 3 \; run-shell '%V %F'; tmux -S %D.sock kill-server"),
    s("P3b tmux new-window", r"tmux -S %D.sock new -d sleep 3 \; new-window -d '%V %F'; sleep 1; tmux -S %D.sock kill-server"),
    s("P3b tmux if-shell", r"tmux -S %D.sock new -d sleep 3 \; if-shell '%V %F' ''; sleep 1; tmux -S %D.sock kill-server"),
    s("P3b tmux split-window", r"tmux -S %D.sock new -d sleep 3 \; split-window -d '%V %F'; sleep 1; tmux -S %D.sock kill-server"),
    s("P3b screen -dm", "screen -dm %V %F; sleep 1"),
    s("P3b parallel command", "parallel %V ::: %F"),
    s("P3b parallel inputs as commands", "parallel ::: '%V %F'"),
    s("P3b parallel with a replacement string", "parallel '%V {}' ::: %F"),
    s("P3b sshpass", "sshpass -p x %V %F"),
    s("P3b ltrace", "ltrace -o /dev/null %V %F"),
    s("P3b valgrind", "valgrind -q %V %F"),
    s("P3b strace -f", "strace -f -o /dev/null %V %F"),
    s("P3b gdb -ex shell", "gdb -batch -ex 'shell %V %F'"),
    s("P3b gdb -ex !", "gdb -batch -ex '!%V %F'"),
    s("P3b gdb --args", "gdb -batch -ex run --args %V %F"),
    s("P3b dbus-run-session", "dbus-run-session -- %V %F"),

    // ---- issue 29: environment that runs commands (P3b) ----
    s("P3b BASH_ENV file", "echo '%V %F' > %D.env; BASH_ENV=%D.env bash -c :"),
    s("P3b env BASH_ENV file", "echo '%V %F' > %D.env; env BASH_ENV=%D.env bash -c :"),
    s("P3b ENV file for sh -i", "echo '%V %F' > %D.env; ENV=%D.env sh -i -c :"),
    s("P3b PROMPT_COMMAND", "PROMPT_COMMAND='%V %F' bash -i <<< ''"),
    s("P3b GIT_SSH_COMMAND", "GIT_SSH_COMMAND='%V %F;:' git ls-remote ssh://h/x"),
    s("P3b env GIT_SSH_COMMAND", "env GIT_SSH_COMMAND='%V %F;:' git ls-remote ssh://h/x"),
    s("P3b export GIT_SSH_COMMAND", "export GIT_SSH_COMMAND='%V %F;:'; git ls-remote ssh://h/x"),
    s("P3b GIT_EXTERNAL_DIFF", "git init -q; echo a > f; git add f; echo b > f; GIT_EXTERNAL_DIFF='%V %F;:' git diff"),
    s("P3b GIT_EDITOR", "git init -q; GIT_EDITOR='%V %F;:' git -c user.name=a -c user.email=a@b commit -q --allow-empty"),
    s("P3b EDITOR", "git init -q; EDITOR='%V %F;:' git -c user.name=a -c user.email=a@b commit -q --allow-empty"),
    // git ignores VISUAL on a dumb terminal.
    s("P3b VISUAL", "git init -q; TERM=xterm VISUAL='%V %F;:' git -c user.name=a -c user.email=a@b commit -q --allow-empty"),
    s("P3b BROWSER for xdg-open", "BROWSER='%V %F' xdg-open http://x"),
    s("P3b env BROWSER for xdg-open", "env BROWSER='%V %F' xdg-open http://x"),

    // ---- issue 29: inline code given to an interpreter (P8) ----
    s("P8 python3 -c os.system", r#"python3 -c "import os; os.system('%V %F')""#),
    s("P8 python3 -c subprocess list", r#"python3 -c "import subprocess; subprocess.run(['%V', '%F'])""#),
    s("P8 python3 -c a name built from pieces", r#"python3 -c "import os; os.system('%0'+'%1%S %F')""#),
    s("P8 perl -e system", r#"perl -e 'system("%V %F")'"#),
    s("P8 perl -e backticks", "perl -e '`%V %F`'"),
    s("P8 perl -E qx", "perl -E 'qx(%V %F)'"),
    s("P8 node -e child_process", r#"node -e "require('child_process').execSync('%V %F')""#),
    s("P8 node -p child_process", r#"node -p "require('child_process').execSync('%V %F')+''""#),
    s("P8 ruby -e system", r#"ruby -e 'system("%V %F")'"#),
    s("P8 php -r system", r#"php -r 'system("%V %F");'"#),
    s("P8 lua -e os.execute", r#"lua5.4 -e 'os.execute("%V %F")'"#),
    s("P8 awk system", r#"awk 'BEGIN{system("%V %F")}'"#),
    s("P8 awk print to a pipe", r#"awk 'BEGIN{print "x" | "%V %F"}'"#),
    s("P8 awk system of a name built from pieces", r#"awk 'BEGIN{c="%0" "%1%S %F"; system(c)}'"#),
    s("P8 sed s///e", "echo x | sed 's/.*/%V %F/e'"),
    s("P8 sed e command", "echo x | sed '1e %V %F'"),
    s("P8 sed -n e", "sed -n 'e %V %F' /etc/hostname"),
    s("P8 sed s///e of a name built from pieces", "echo x | sed -e 's/x/%0%1%S %F/e'"),

    // ---- issue 41: options read as the real interpreter reads them (P8) ----
    s("P8 node -pe cluster", r#"node -pe "require('child_process').execSync('%V %F')+''""#),
    s("P8 node --title value before -e", r#"node --title t -e "require('child_process').execSync('%V %F')""#),
    s("P8 node --import data: URL", r#"node --import 'data:text/javascript,import {execSync} from "child_process"; execSync("%V %F")' -e 1"#),
    s("P8 python3 -m timeit runs its argument", r#"python3 -m timeit -n1 "__import__('os').system('%V %F')""#),
    s("P8 perl -C before -e", r#"perl -C -e 'system("%V %F")'"#),
    s("P8 perl -M with code after the module", "perl '-Mstrict;system q(%V %F)' -e 1"),
    s("P8 perl -le cluster", r#"perl -le 'system("%V %F")'"#),
    s("P8 perl -0777 -ne", r#"perl -0777 -ne 'system("%V %F")' /etc/hostname"#),
    s("P8 python3 -Ic cluster", r#"python3 -Ic "import os; os.system('%V %F')""#),
    s("P8 python3 -W value before -c", r#"python3 -W ignore -c "import os; os.system('%V %F')""#),
    s("P8 node --eval=", r#"node --eval="require('child_process').execSync('%V %F')""#),
    // ---- issue 41: code that starts a process without the words a scan looks for (P8) ----
    s("P8 python3 getattr of a built name", r#"python3 -c "import os; getattr(os, 'sys'+'tem')('%0'+'%1%S %F')""#),
    s("P8 python3 PYTHONBREAKPOINT", r#"PYTHONBREAKPOINT=os.system python3 -c 'breakpoint("%0"+"%1%S %F")'"#),
    s("P8 python3 a function held in a variable", r#"python3 -c "import os; f = os.system; f('%0'+'%1%S %F')""#),
    s("P8 python3 exec of a built string", r#"python3 -c "exec('import os; os.sys'+'tem(\"%0\"+\"%1%S %F\")')""#),
    s("P8 python3 subprocess under another name", r#"python3 -c "import subprocess as s; s.run(['%0'+'%1%S', '%F'])""#),
    s("P8 perl IPC::Open3", r#"perl -e 'use IPC::Open3; my $p = open3(my $i, my $o, undef, "%0"."%1%S", "%F"); waitpid($p, 0)'"#),
    s("P8 perl s///e", "perl -e '$_ = q(%0).q(%1%S %F); s/(.*)/system($1)/e'"),
    s("P8 perl system after a division", r#"perl -e '$x = 4 / 2; system("%0"."%1%S %F"); $y = 1 / 2'"#),
    s("P8 node require of a built name", r#"node -e "require('chi'+'ld_process').execSync('%0'+'%1%S %F')""#),
    s("P8 node a module held in a variable", r#"node -e 'const c = require("child_process"); c.execSync("%0" + "%1%S %F")'"#),
    s("P8 node destructured execSync", r#"node -e "const {execSync: x} = require('child_process'); x('%0'+'%1%S %F')""#),
    s("P8 awk print to a pipe after a division", r#"awk 'BEGIN{c="%0" "%1%S %F"; s="sh"; x = 4/2; print c | s; y = 1/2}'"#),
    s("P8 sed --expr= abbreviated", "sed --expr='1e %V %F' /etc/hostname"),
    // ---- issue 41: code fed on stdin by the line (P8) ----
    s("P8 perl here-string", r#"perl <<< 'system("%V %F")'"#),
    s("P8 python3 here-string", r#"python3 <<< "import os; os.system('%V %F')""#),
    s("P8 node here-string", r#"node <<< "require('child_process').execSync('%V %F')""#),
    s("P8 python3 - here-document of a built name", "python3 - <<'EOF'\nimport os\nos.system('%0'+'%1%S %F')\nEOF"),
    s("P8 python3 /dev/stdin here-string", r#"python3 /dev/stdin <<< "import os; os.system('%V %F')""#),
    s("P8 perl from a pipe", r#"echo "system('%0'.'%1%S %F')" | perl"#),
    s("P8 awk -f /dev/stdin", r#"awk -f /dev/stdin /etc/hostname <<< 'BEGIN{system("%V %F")}'"#),
    s("P8 sed -f process substitution", "sed -f <(echo '1e %V %F') /etc/hostname"),
    s("P8 sqlite3 here-string", "sqlite3 <<< '.shell %V %F'"),
    s("P8 ed here-string", "ed -s /etc/hostname <<< '!%V %F'"),
    s("P8 vim -es here-string", "vim -es <<< '!%V %F'"),
    s("P8 tclsh here-string", "tclsh <<< 'exec %V %F'"),
    // ---- issue 41: programs that run a string (P8) ----
    s("P8 sqlite3 .shell", "sqlite3 :memory: '.shell %V %F'"),
    s("P8 sqlite3 .shell split by quotes", r#"sqlite3 :memory: ".shell %0''%1%S %F""#),
    s("P8 vim -es -c !", "vim -es -c '!%V %F' -c 'q!'"),
    s("P8 zip -TT", "zip -q %D.zip /etc/hostname -T -TT '%V %F #'"),
    s("P8 make --eval", "make --eval='x: ; %V %F' x"),
    // ---- issue 41: variables judged by their value (P3b, P8) ----
    s("P3b CC for make", "echo 'int main(){return 0;}' > p.c; CC='%V %F;:' make p"),
    // ---- issue 41: builtins that evaluate, judged in auto as in read-only (P8) ----
    s("P8 let with a subscript", "let 'a[$(%V %F)]=1'"),
    s("P8 declare -i", "declare -i x='a[$(%V %F)]'"),
    s("P8 printf -v into a subscript", "printf -v 'a[$(%V %F)]' x"),
    s("P8 read into a subscript", "read 'a[$(%V %F)]' <<< x"),
    s("P8 mapfile -C", "mapfile -C '%V %F;:' -c 1 a <<< x"),
    s("P8 compgen -C", "compgen -C '%V %F' x"),
    s("P8 test -v with a subscript", "test -v 'a[$(%V %F)]'"),
    s("P8 prompt expansion @P", "x='$(%V %F)'; echo ${x@P}"),
    s("P8 bash --rcfile from the line", "bash --rcfile <(echo '%V %F') -i <<< ''"),
    // ---- issue 41, class 5's rest: programs with a row, in every spelling (P3b) ----
    s("P3b gdb shell abbreviated", "gdb -batch -ex 'she %V %F'"),
    s("P3b gdb --eval-command= abbreviated", "gdb -batch --eval-c='shell %V %F'"),
    s("P3b gdb -ev abbreviated", "gdb -batch -ev 'shell %V %F'"),
    s("P3b gdb with ... --", "gdb -batch -ex 'with print pretty -- shell %V %F'"),
    s("P3b gdb eval of a formatted command", r#"gdb -batch -ex 'eval "shell %c%1%S %F", 0x%X'"#),
    s("P3b tmux new-session abbreviated", "tmux -S %D.sock new-ses -d '%V %F'; sleep 1"),
    s("P3b tmux run-shell abbreviated", r"tmux -S %D.sock new -d sleep 3 \; run-s '%V %F'; tmux -S %D.sock kill-server"),
    s("P3b tmux set default-command", r"tmux -S %D.sock new -d sleep 3 \; set default-command '%V %F' \; neww -d; sleep 1; tmux -S %D.sock kill-server"),
    s("P3b screen -m -d", "screen -m -d %V %F; sleep 1"),
    s("P3b screen -d -m -S", "screen -d -m -S w41 %V %F; sleep 1"),
    s("P3b git ext:: transport", "git -c protocol.ext.allow=always ls-remote 'ext::sh -c %V% %F'"),
    s("P3b git -c trailer.*.cmd", "git -c trailer.x.cmd='%V %F;:' interpret-trailers --trailer x=1 < /dev/null"),
    s("P3b git config -f then the alias", "git init -q; git config -f .git/config alias.x '!%V %F'; git x"),
    s("P3b git config set then the alias", "git init -q; git config set alias.x '!%V %F'; git x"),
    s("P3b git clone -c", "git clone -q -c core.sshCommand='%V %F;:' ssh://h/x %D.d"),
    s("P3b git clone -u", "git clone -q -u '%V %F;:' file:///nonexistent %D.d"),
    s("P3b git clone --upload-pack=", "git clone -q --upload-pack='%V %F;:' file:///nonexistent %D.d"),
    s("P3b git fetch-pack --exec=", "git init -q; git fetch-pack --exec='%V %F;:' file:///x"),
    s("P3b man -P under script -c", r#"script -qc "man -P '%V %F' ls" /dev/null"#),
    s("P3b MANPAGER under script -c", r#"script -qc "MANPAGER='%V %F' man ls" /dev/null"#),
    // ---- issue 41, class 7: an unknown wrapper handed the program as a pattern (P6) ----
    s("P6 logsave with a glob", "logsave /dev/null %G/%0[%1]%S %F"),
    s("P6 logsave with a brace", "logsave /dev/null %G/%0{%1,x}%S %F"),
    s("P6 logsave with a star", "logsave /dev/null %G/%0%1*%S %F"),
    // ---- issue 41 (brief 41b item 1): a variable exported for the commands after it (P8) ----
    s("P8 export PERL5OPT", "export PERL5OPT='-M5;system(q(%0).q(%1%S),q(%F))'; perl -e 1"),
    s("P8 export LUA_INIT", r#"export LUA_INIT='os.execute("%0".."%1%S %F")'; lua5.4 -e 'x=1'"#),
    s("P8 typeset -x LUA_INIT", r#"typeset -x LUA_INIT='os.execute("%0".."%1%S %F")'; lua5.4 -e 'x=1'"#),
    s("P8 declare -x PERL5DB", "declare -x PERL5DB='BEGIN{system(q(%0).q(%1%S %F))}'; perl -d -e 1 < /dev/null"),
    // ---- issue 41 (brief 41b item 2): a program the line itself wrote, then run (P5) ----
    s("P5 ln -s then logsave a path", "n=%0; ln -s /usr/bin/${n}%1%S x; logsave /dev/null ./x %F"),
    s("P5 cp then run", "n=%0; cp /usr/bin/${n}%1%S y && ./y %F"),
    s("P5 install then run", "n=%0; install /usr/bin/${n}%1%S z; ./z %F"),
    s("P5 cat into a file, chmod, run", "n=%0; cat /usr/bin/${n}%1%S > w; chmod +x w; ./w %F"),
    s("P5 mv then run by an absolute path", "n=%0; cp /usr/bin/${n}%1%S v0; mv v0 v; %D/v %F"),
    s("P5 tee then run under a wrapper", "n=%0; tee t < /usr/bin/${n}%1%S > /dev/null; chmod +x t; timeout 5 ./t %F"),
    // ---- issue 41, round 3 (brief h3): new spellings and neighbours, class by class ----
    // Class 1: options read as the real interpreter reads them.
    s("P8 python3 -Bc cluster", r#"python3 -Bc "import os; os.system('%V %F')""#),
    s("P8 python3 -X value before -c", r#"python3 -X dev -c "import os; os.system('%V %F')""#),
    s("P8 perl -we cluster", r#"perl -we 'system("%V %F")'"#),
    s("P8 ruby -W0 before -e", r#"ruby -W0 -e 'system("%V %F")'"#),
    s("P8 ruby a second -e", r#"ruby -e 'x=1' -e 'system("%V %F")'"#),
    s("P8 php -d value before -r", r#"php -d display_errors=1 -r 'system("%V %F");'"#),
    s("P8 php -R per input line", r#"php -R 'system("%V %F");' < /etc/hostname"#),
    s("P8 lua a second -e with io.popen", r#"lua5.4 -e 'x=1' -e 'io.popen("%0".."%1%S %F"):read()'"#),
    s("P8 node --input-type=module dynamic import", r#"node --input-type=module -e "import('child_process').then(c => c.execSync('%0'+'%1%S %F'))""#),
    // Class 2: code that starts a process without the words a scan looks for.
    s("P8 python3 os.popen", r#"python3 -c "import os; os.popen('%0'+'%1%S %F').read()""#),
    s("P8 python3 vars of a module", r#"python3 -c "import os; vars(os)['sys'+'tem']('%0'+'%1%S %F')""#),
    s("P8 python3 importlib of a built name", r#"python3 -c "import importlib; importlib.import_module('o'+'s').system('%0'+'%1%S %F')""#),
    s("P8 perl open to a pipe", r#"perl -Mstrict -we 'open(my $f, "|-", "%0"."%1%S %F")'"#),
    s("P8 ruby IO.popen", r#"ruby -e 'IO.popen("%0"+"%1%S %F").read'"#),
    s("P8 php backticks", "php -r 'echo `%V %F`;'"),
    s("P8 lua a function held in a local", r#"lua5.4 -e 'local e = os["exe".."cute"]; e("%0".."%1%S %F")'"#),
    s("P8 lua load of a string", r#"lua5.4 -e 'load("os.execute(\"%0\"..\"%1%S %F\")")()'"#),
    s("P8 node module.constructor._load", r#"node -e "module.constructor._load('child_'+'process').execSync('%0'+'%1%S %F')""#),
    s("P8 node eval of require", r#"node -e "eval('requ'+'ire')('child_process').execSync('%0'+'%1%S %F')""#),
    s("P8 awk system of a -v value", r#"awk -v c='%V %F' 'BEGIN{system(c)}'"#),
    s("P8 awk system of its input", "awk '{system($0)}' <<< '%V %F'"),
    s("P8 awk getline from a built command", r#"awk 'BEGIN{c="%0" "%1%S %F"; c | getline x}'"#),
    s("P8 sed e after a substitution", "echo x | sed 's/.*/%V %F/;e'"),
    s("P8 sed e as its own -e", "echo x | sed -e 's/x/%0%1%S %F/' -e e"),
    // Class 3: code fed on stdin by the line.
    s("P8 python3 -m code here-string", r#"python3 -m code <<< "import os; os.system('%V %F')""#),
    s("P8 python3 script from a process substitution", r#"python3 <(echo "import os; os.system('%V %F')")"#),
    s("P8 perl - here-string of a built name", r#"perl - <<< 'system("%0"."%1%S %F")'"#),
    s("P8 perl script from a process substitution", r#"perl <(echo 'system("%V %F")')"#),
    s("P8 ruby here-string of a built name", r#"ruby <<< 'system("%0"+"%1%S %F")'"#),
    s("P8 ruby from a pipe", r#"printf '%s' 'system("%V %F")' | ruby"#),
    s("P8 php here-string", r#"php <<< '<?php system("%0"."%1%S %F");'"#),
    s("P8 lua - here-string", r#"lua5.4 - <<< 'os.execute("%V %F")'"#),
    s("P8 node - here-string", r#"node - <<< "require('child_process').execSync('%V %F')""#),
    s("P8 make -f - here-string", "make -f - <<< $'x:\\n\\t%V %F'"),
    s("P8 make -f process substitution", r"make -f <(printf 'x:\n\t%V %F\n') x"),
    s("P8 erb template from a pipe", r#"echo '<%= system("%0"+"%1%S %F") %>' | erb"#),
    s("P8 erb here-string", r#"erb <<< '<%= system("%0"+"%1%S %F") %>'"#),
    s("P8 erb template from a process substitution", r#"erb -T - <(echo '<%= system("%0"+"%1%S %F") %>')"#),
    s("P8 tclsh8.6 versioned here-string", "tclsh8.6 <<< 'exec %0%1%S %F'"),
    // Class 4: variables that run code.
    s("P3b PYTHONSTARTUP from a process substitution", r#"PYTHONSTARTUP=<(echo "import os; os.system('%V %F')") python3 -i < /dev/null"#),
    s("P3b GIT_CONFIG_COUNT alias", "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0='!%V %F' git x"),
    s("P3b GIT_CONFIG_PARAMETERS alias", r#"GIT_CONFIG_PARAMETERS="'alias.x=!%V %F'" git x"#),
    s("P3b git --config-env=", "git init -q; X='%V %F; false' git --config-env=core.fsmonitor=X status"),
    s("P3b RSYNC_RSH", "RSYNC_RSH='%V %F --' rsync x:a %D.b"),
    s("P3b RSYNC_CONNECT_PROG", "RSYNC_CONNECT_PROG='%V %F' rsync rsync://h/x"),
    s("P3b make CC= as an argument", "echo 'int main(){return 0;}' > p.c; make CC='%V %F;:' p"),
    s("P3b TAR_OPTIONS", r#"TAR_OPTIONS="--to-command='%V %F'" tar -xf <(tar -cf - -C / etc/hostname)"#),
    s("P8 env BASH_FUNC_ function", "env 'BASH_FUNC_f%%=() { %V %F; }' bash -c f"),
    s("P8 env LUA_INIT", r#"env LUA_INIT='os.execute("%0".."%1%S %F")' lua5.4 -e 'x=1'"#),
    s("P8 env PERL5OPT", "env PERL5OPT='-M5;system(q(%0).q(%1%S),q(%F))' perl -e 1"),
    s("P8 env -S LUA_INIT", r#"env -S "LUA_INIT='os.execute(\"%0\"..\"%1%S %F\")' lua5.4 -e x=1""#),
    s("P8 export LUA_INIT bare, then set", r#"export LUA_INIT; LUA_INIT='os.execute("%0".."%1%S %F")'; lua5.4 -e 'x=1'"#),
    s("P8 set -a then LUA_INIT", r#"set -a; LUA_INIT='os.execute("%0".."%1%S %F")'; lua5.4 -e 'x=1'"#),
    // Classes 5 and 6: programs that run strings, in their other spellings.
    s("P3b sqlite3 .system", "sqlite3 :memory: '.system %V %F'"),
    s("P3b sqlite3 -cmd", "sqlite3 -cmd '.shell %V %F' :memory: .quit"),
    s("P3b sqlite3 .once to a pipe", "sqlite3 :memory: '.once |%V %F' 'select 1'"),
    s("P3b sqlite3 .output to a pipe", "sqlite3 :memory: '.output |%V %F' 'select 1'"),
    s("P3b sqlite3 -init process substitution", "sqlite3 -init <(echo '.shell %V %F') :memory: .quit"),
    s("P3b sqlite3 .import from a pipe", r#"sqlite3 :memory: ".import '|%V %F' t""#),
    s("P3b sqlite3 .read from a pipe", r#"sqlite3 :memory: ".read '|%V %F'""#),
    s("P3b sqlite3 edit()", r#"sqlite3 :memory: "select edit('', '%V %F;:')""#),
    s("P3b vim +!", "vim -es '+!%V %F' '+q!'"),
    s("P3b vim --cmd !", "vim -es --cmd '!%V %F' -c 'q!'"),
    s("P3b vim call system()", r#"vim -es -c 'call system("%V %F")' -c 'q!'"#),
    s("P3b vim -S process substitution", "vim -es -S <(echo '!%V %F') -c 'q!'"),
    s("P3b vi -es", "vi -es -c '!%V %F' -c 'q!'"),
    s("P3b gdb pipe", "gdb -batch -ex 'pipe p 1 | %V %F'"),
    s("P3b gdb python", r#"gdb -batch -ex 'python import os; os.system("%V %F")'"#),
    s("P3b gdb -iex", "gdb -batch -iex 'shell %V %F'"),
    s("P3b tmux respawn-pane", r"tmux -S %D.sock new -d sleep 3 \; respawn-pane -k '%V %F'; sleep 1; tmux -S %D.sock kill-server"),
    s("P3b tmux if -F then run", r#"tmux -S %D.sock new -d sleep 3 \; if -F 1 'run "%V %F"'; sleep 1; tmux -S %D.sock kill-server"#),
    s("P3b tmux source-file process substitution", r#"tmux -S %D.sock new -d sleep 3 \; source-file <(echo 'run "%V %F"'); sleep 1; tmux -S %D.sock kill-server"#),
    s("P3b npx -c", "npx -c '%V %F'"),
    s("P3b npm exec -c", "npm exec -c '%V %F'"),
    s("P3b parallel -a process substitution", "parallel -a <(echo '%V %F')"),
    s("P3b parallel :::: process substitution", "parallel %V :::: <(echo %F)"),
    s("P3b busybox xargs", "busybox xargs %V <<< %F"),
    s("P3b busybox timeout", "busybox timeout 5 %V %F"),
    s("P3b busybox ash here-string", "busybox ash <<< '%V %F'"),
    s("P8 busybox awk of a built name", r#"busybox awk 'BEGIN{system("%0" "%1%S %F")}'"#),
    s("P3b zip --unzip-command", "zip -q %D.zip /etc/hostname -T --unzip-command '%V %F #'"),
    s("P6 sem --fg", "sem --fg '%V %F'"),
    s("P6 sem --fg of a built name", "sem --fg 'x=%0; ${x}%1%S %F'"),
    // Class 7: an unknown wrapper handed what the line made, or a line that hides the name.
    s("P6 logsave sh -c of a built name", "logsave /dev/null sh -c 'x=%0; ${x}%1%S %F'"),
    s("P5 tar x then logsave a member no write named", "tar -cf x.tar -C %G .; tar -xf x.tar; n=%0; logsave /dev/null ./${n}%1%S %F"),
    s("P5 cp -r then logsave a path inside", "cp -r %G d; n=%0; logsave /dev/null d/${n}%1%S %F"),
    // Class 8: builtins that evaluate.
    s("P8 [[ -v with a subscript", "[[ -v 'a[$(%V %F)]' ]]"),
    s("P8 declare -n then assign", "declare -n r='a[$(%V %F)]'; r=1"),
    s("P8 compgen -W", "compgen -W '$(%V %F)' x"),
    s("P8 declare of a subscript", "declare 'a[$(%V %F)]=1'"),
    s("P5 indirection of a subscript", "x='a[$(%V %F)]'; echo ${!x}"),
    s("P5 [[ -eq on a variable holding a subscript", "x='a[$(%V %F)]'; [[ $x -eq 0 ]]"),
    s("P5 array index from a variable holding a subscript", "x='a[$(%V %F)]'; b=(); echo ${b[x]}"),
    s("P4 eval split by quotes", "ev''al '%V %F'"),
    s("P4 eval behind a backslash", r"\eval '%V %F'"),
    // Code the line writes to a file, then has a program run (a hook, an alias, a Makefile,
    // a script): the written words are read, and asked.
    s("P8 a hook written on the line, then git commit", r"git init -q; printf '#!/bin/sh\n%V %F\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x"),
    s("P8 an alias appended to .git/config, then used", r"git init -q; printf '[alias]\n\tx = !%V %F\n' >> .git/config; git x"),
    s("P8 a Makefile written on the line, then make", r"printf 'x:\n\t%V %F\n' > Makefile; make x"),
    s("P8 a python script written on the line, then run", r#"echo "import os; os.system('%V %F')" > x.py; python3 x.py"#),
    s("P8 a Makefile recipe split by quotes, then make", "echo 'x:' > Makefile; echo \"\t%0''%1%S %F\" >> Makefile; make x"),
    // Code the shell builds when the line runs is not the text the judge sees.
    s("P8 perl code from a command substitution", r#"perl -e "$(printf 'system("%s")' '%V %F')""#),
    s("P8 a Makefile recipe of a built name, then make", r"echo 'x:' > Makefile; printf '\tn=%0; $${n}%1%S %F\n' >> Makefile; make x"),
    // Values the line chooses, given to a program without a row (issue 41, fourth round):
    // read by their value when the judge knows it, asked when it does not.
    s("P6 a variable the line sets, as an argument", "x=%V; logsave /dev/null $x %F"),
    s("P6 a variable the line sets, inside a word", "x=%0; logsave /dev/null ${x}%1%S %F"),
    s("P6 a variable set from a variable", "y=%0; x=${y}%1%S; logsave /dev/null $x %F"),
    s("P6 a variable set from itself", "x=%0; x=${x}%1%S; logsave /dev/null $x %F"),
    s("P6 a variable split into words", r#"y=%0; x="${y}%1%S %F"; logsave /dev/null $x"#),
    s("P6 a for loop's variable", "for x in %V; do logsave /dev/null $x %F; done"),
    s("P6 a variable read from a here-string", "read x <<< %V; logsave /dev/null $x %F"),
    s("P6 mapfile from a here-string", "mapfile -t a <<< %V; logsave /dev/null ${a[0]} %F"),
    s("P6 printf -v", "printf -v x '%0%s' %1%S; logsave /dev/null $x %F"),
    s("P6 a variable the line sets, in a command line argument", r#"x=%V; sem --fg "$x %F""#),
    s("P6 a quoted variable the line sets", r#"x=%V; logsave /dev/null "$x" %F"#),
    s("P6 positional parameters set on the line", r#"set -- "$(printf %0)%1%S" %F; logsave /dev/null "$@""#),
    s("P6 a script's argument", "bash -c 'logsave /dev/null $1 %F' _ %V"),
    s("P6 a function's argument", r#"f() { logsave /dev/null "$1" %F; }; f "$(printf %0)%1%S""#),
    s("P6 a command's output", r#"logsave /dev/null "$(printf %0)%1%S" %F"#),
    s("P6 words piped to xargs", "printf '%0%s %F' %1%S | xargs logsave /dev/null"),
    s("P6 the last word of the command before", r#": "$(printf %0)%1%S"; logsave /dev/null $_ %F"#),
    s("P6 what =~ matched", "[[ %0%1%S =~ (.*) ]]; logsave /dev/null ${BASH_REMATCH[1]} %F"),
    s("P6 the names of variables", "%V=1; logsave /dev/null ${!%0*} %F"),
    s("P6 a default value", "logsave /dev/null ${unset_here:-%V} %F"),
    s("P6 an alternative value", "logsave /dev/null ${PATH:+%V} %F"),
    s("P6 empty parts of a variable around the name", "logsave /dev/null ${PATH:0:0}%0${PATH:0:0}%1%S %F"),
    s("P6 a replacement", "logsave /dev/null ${PATH/*/%0}${PATH:0:0}%1%S %F"),
    // A shell or an interpreter handed to a program without a row (issue 41, round 4).
    s("P6 a shell an unknown program is handed, reading a pipe", "printf '%0%s %F' %1%S | logsave /dev/null sh"),
    s("P6 a shell an unknown program is handed, reading a process substitution", "logsave /dev/null bash <(printf '%0%s %F' %1%S)"),
    s("P6 a shell an unknown program is handed, reading a here-string", "logsave /dev/null sh <<< '%V %F'"),
    s("P6 a shell an unknown program is handed, reading a here-document", "logsave /dev/null sh <<'E'\n%0''%1%S %F\nE"),
    s("P6 a wrapper an unknown program is handed, running stdin's words", "logsave /dev/null xargs -I{} sh -c {} <<< '%V %F'"),
    s("P6 a wrapper an unknown program is handed, running an interpreter", r#"logsave /dev/null env perl -e 'system("%0"."%1%S %F")'"#),
    s("P6 node an unknown program is handed", r#"logsave /dev/null node -e "require('child_process').execSync('%0'+'%1%S %F')""#),
    s("P6 an interpreter an unknown program is handed, with code", r#"logsave /dev/null perl -e 'system("%0"."%1%S %F")'"#),
    s("P6 an interpreter an unknown program is handed, reading a pipe", r#"printf 'system("%0%s %F")' %1%S | logsave /dev/null perl"#),
    // A wrapper, a program with a row or an interpreter finds its options in a value the line
    // sets (issue 41): each known value is judged as the line it makes.
    s("P8 an interpreter's -e in a variable the line sets", r#"e=-e; perl $e 'system("%V %F")'"#),
    s("P3b find's -exec in a variable the line sets", r#"o=-exec; find . -maxdepth 1 -name %C $o %V %F \;"#),
    s("P3b find's -exec in a loop's words", r#"for o in -print -exec; do find . -maxdepth 1 -name %C $o %V %F \; ; done"#),
    s("P6 a shell in a variable the line hands an unknown program", "p=sh; logsave /dev/null $p <<< '%V %F'"),
    // A value the judge cannot know (a command's output), where a row or an interpreter
    // reads its options: it may be the option that runs code (issue 41, round 5).
    s("P8 perl's -e from a command's output", r#"x=$(printf -- -e); perl $x 'system("%V %F")'"#),
    s("P8 python3's -c from a command's output", r#"x=$(printf -- -c); python3 "$x" 'import os; os.system("%V %F")'"#),
    s("P8 node's -e from a command's output", r#"x=$(printf -- -e); node $x 'require("child_process").execSync("%V %F")'"#),
    s("P8 perl's -e after code, from a command's output", r#"x=$(printf -- '-esystem("%V %F")'); perl -e '1;' "$x""#),
    s("P3b find's -exec from a command's output", r#"o=$(printf -- -exec); find . -maxdepth 1 -name %C $o %V %F \;"#),
    s("P3b git's -c alias from a command's output", r#"x=$(printf -- '-c alias.x=!%V'); git $x x %F"#),
    s("P8 python3's -c split out of an option's value", r#"x=$(printf '%s' 'ignore -c__import__("os").system("%V\x20%F")'); python3 -W $x -c 1"#),
    // What cat prints of a here-document is read as that text (the commit-message idiom),
    // so it names the command as the text would.
    s("P6 a command name cat prints from a here-document", "logsave /dev/null \"$(cat <<'E'\n%V\nE\n)\" %F"),
    s("P8 an interpreter's -e cat prints from a here-string", r#"perl "$(cat <<< -e)" 'system("%V %F")'"#),
    // Builtins that evaluate a subscript in a name the shell builds (issue 41, round 4).
    s("P8 printf -v into a name built at run time", r#"x=$(printf 'a[$(%0%s %F)]' %1%S); printf -v "$x" 1"#),
    s("P8 test -v of a name built at run time", r#"x=$(printf 'a[$(%0%s %F)]' %1%S); test -v "$x""#),
    s("P8 [[ -v of a name built at run time", r#"x=$(printf 'a[$(%0%s %F)]' %1%S); [[ -v $x ]]"#),
    s("P8 read into a name built at run time", r#"x=$(printf 'a[$(%0%s %F)]' %1%S); read "$x" <<< 1"#),
    s("P8 declare of a name built at run time", r#"x=$(printf 'a[$(%0%s %F)]' %1%S); declare "$x=1""#),
    // Issue 41 (brief h7): code the line writes to a file and runs with an interpreter, read
    // as the interpreter's language: names hidden from a scan, each language, each spelling of
    // the write (printf, echo, a here-document through cat, tee from a here-string), a text
    // the line hands the file without showing it, and a change in place before the run.
    s("P8 python3 script written by printf, a built name", r#"printf 'import os\nos.system("%0"+"%1%S %F")\n' > x.py; python3 x.py"#),
    s("P8 python3 script written by printf %s lines", r#"printf '%s\n' 'import os' 'os.system("%0"+"%1%S %F")' > x.py; python3 x.py"#),
    s("P8 python3 script written by a here-document through cat", "cat > x.py <<'E'\nimport os\nos.system('%0'+'%1%S %F')\nE\npython3 x.py"),
    s("P8 python3 script written by tee from a here-string", r#"tee x.py <<< 'import os; os.system("%0"+"%1%S %F")' > /dev/null; python3 -B x.py"#),
    s("P8 python3 script with a name in printf escapes", r#"printf 'import os\nos.system("\x%X%1%S %F")\n' > x.py; python3 x.py"#),
    s("P8 perl script written on the line, a built name", r#"echo 'system("%0"."%1%S %F")' > x.pl && perl x.pl"#),
    s("P8 perl script with a name in echo -e escapes", r#"echo -e 'system("\x%X%1%S %F")' > x.pl; perl x.pl"#),
    s("P8 ruby script written by a here-document, a built name", "cat <<'E' > x.rb\nsystem('%0'+'%1%S %F')\nE\nruby x.rb"),
    s("P8 node script written on the line, a built require", r#"echo 'require("child_"+"process").execSync("%0"+"%1%S %F")' > x.js; node x.js"#),
    s("P8 php script written on the line, a built name", r#"echo '<?php system("%0"."%1%S %F");' > x.php; php x.php"#),
    s("P8 lua script written on the line, a built name", r#"echo 'os.execute("%0".."%1%S %F")' > x.lua; lua5.4 x.lua"#),
    s("P8 awk program file written on the line, a built name", r#"echo 'BEGIN{system("%0" "%1%S %F")}' > p.awk; awk -f p.awk"#),
    s("P8 a script run by its shebang, a built name", r#"printf '#!/usr/bin/env python3\nimport os\nos.system("%0"+"%1%S %F")\n' > x; chmod +x x; ./x"#),
    s("P8 a shell script split by quotes, then sh", r#"echo '%0""%1%S %F' > x.sh; sh x.sh"#),
    s("P8 a bash script of a built name, then bash", r"printf 'n=%0; ${n}%1%S %F\n' > x.sh; bash x.sh"),
    s("P8 python3 script transformed by tr from a here-string", r#"tr A-Z a-z <<< 'IMPORT OS; OS.SYSTEM("%0"+"%1%S %F")' > x.py; python3 x.py"#),
    s("P8 python3 script from a pipe through tr", r#"echo 'IMPORT OS; OS.SYSTEM("%0"+"%1%S %F")' | tr A-Z a-z > x.py; python3 x.py"#),
    s("P8 python3 script changed by sed -i before it runs", r#"echo 'print("%0"+"%1%S %F")' > x.py; sed -i 's/print(/__import__("os").system(/' x.py; python3 x.py"#),
    s("P8 python3 script written in a loop after its run", r#"for i in 1 2; do [ -f x.py ] && python3 x.py; printf 'import os\nos.system("%0"+"%1%S %F")\n' > x.py; done"#),
    s("P8 a function runs the script written after it", r#"f() { python3 x.py; }; printf 'import os\nos.system("%0"+"%1%S %F")\n' > x.py; f"#),    s("P8 ruby -r of a library written on the line", r#"echo 'system("%0"+"%1%S %F")' > x.rb; ruby -r./x -e 1"#),
    s("P8 node -r of a module written on the line", r#"echo 'require("child_"+"process").execSync("%0"+"%1%S %F")' > x.js; node -r ./x.js -e 1"#),
    s("P8 lua -l of a module written on the line", r#"echo 'os.execute("%0".."%1%S %F")' > x.lua; lua5.4 -l x -e 1"#),
    s("P8 python3 -m of a module written on the line", r#"echo 'import os; os.system("%0"+"%1%S %F")' > x.py; python3 -m x"#),
    s("P8 sed -f of a script written on the line", r#"echo '1e %0""%1%S %F' > x.sed; sed -f x.sed /etc/hostname"#),
    s("P8 python3 script appended in pieces", r#"echo -n 'import os; os.sys' > x.py; echo 'tem("%0"+"%1%S %F")' >> x.py; python3 x.py"#),
    s("P8 python3 script written by dd from a here-string", r#"dd of=x.py status=none <<< 'import os; os.system("%0"+"%1%S %F")'; python3 x.py"#),
    s("P8 python3 script written by dd from a pipe", r#"echo 'import os; os.system("%0"+"%1%S %F")' | dd of=x.py status=none; python3 x.py"#),
    s("P8 python3 script by an expanding here-document", "cat > x.py <<E\nimport os; os.system(\"%0\"+\"$(echo %1)%S %F\")\nE\npython3 x.py"),    s("P8 python3 script written through exec 3>", r#"exec 3> x.py; echo 'import os; os.system("%0"+"%1%S %F")' >&3; python3 x.py"#),
    s("P8 python3 script written through a process substitution", r#"echo 'import os; os.system("%0"+"%1%S %F")' > >(cat > x.py); wait $!; python3 x.py"#),
    s("P8 python3 script hidden in xpg_echo escapes", r#"shopt -s xpg_echo; echo 'print("\x22); import os; os.system("%0"+"%1%S %F") #")' > x.py; python3 x.py"#),
    s("P8 python3 script written by a group's redirection", r#"{ echo 'import os'; echo 'os.system("%0"+"%1%S %F")'; } > x.py; python3 x.py"#),    s("P8 python3 -c imports a module written on the line", r#"echo 'import os; os.system("%0"+"%1%S %F")' > json.py; python3 -c 'import json; print(1)'"#),
    s("P8 python3 script printed by perl's code", r#"perl -e 'print "import os\nos.system(\"%0\"+\"%1%S %F\")\n"' > x.py; python3 x.py"#),
    s("P8 python3 script printed by jq -n", r#"jq -rn '"import os; os.system(\"%0\"+\"%1%S %F\")"' > x.py; python3 x.py"#),
    s("P8 python3 script printed by basename", r#"basename 'import os; os.system("%0"+"%1%S %F")' > x.py; python3 x.py"#),    s("P8 php -c of an ini file written on the line", r#"printf 'allow_url_include=1\nauto_prepend_file="data://text/plain,<?php system(\x27%0\x27.\x27%1%S %F\x27);"\n' > p.ini; php -c p.ini /etc/hostname"#),
    s("P8 python3 script changed by sed -i after its run in a loop", r#"echo 'print("%0"+"%1%S %F")' > x.py; for i in 1 2; do python3 x.py; sed -i 's/print(/__import__("os").system(/' x.py; done"#),
    s("P8 python3 script hiding code behind a utf-7 coding declaration", r"printf '# coding: utf-7\nx = 1 #+AAo-__import__(+ACI-os+ACI-).system(+ACI-%0+ACI-+-+ACI-%1%S %F+ACI-)\n' > x.py; python3 x.py"),
    s("P8 perl -x starts inside a string of the script written", r#"printf '\x24x = q{\n#!perl\nsystem("%0"."%1%S %F");\n__END__\n};\nprint 1;\n' > x.pl; perl -x x.pl"#),
    s("P8 python3 -x skips the line that opens a string", r#"printf 'x = """\nimport os; os.system("%0"+"%1%S %F") #"""\n' > x.py; python3 -x x.py"#),
    s("P8 tclsh script of a built name written on the line", "echo 'exec [string cat %0 %1%S] %F' > x.tcl; tclsh x.tcl"),
    // A write later in the text that runs first: a substitution in the run's own words, a
    // run sent to the background.
    s("P8 python3 script written by a substitution in its own words", r#"python3 x.py "$(echo 'import os; os.system("%0"+"%1%S %F")' > x.py)""#),
    s("P8 python3 script written after its run sent to the background", r#"sleep 1 && python3 x.py & echo 'import os; os.system("%0"+"%1%S %F")' > x.py; wait"#),
    // Files the line names apart from the script it runs are not read as it; each way the
    // line does not show that apart is read as before (brief h10).
    s("P8 python3 script copied to another name, then run", r#"echo 'import os; os.system("%V %F")' > x.py; cp x.py y.py; python3 y.py"#),
    s("P8 python3 script written to ./x.py, run as x.py", r#"printf 'import os\nos.system("%0"+"%1%S %F")\n' > ./x.py; python3 x.py"#),
    s("P8 python3 script written after cd, run from its parent", r#"mkdir sub; cd sub; echo 'import os; os.system("%0"+"%1%S %F")' > x.py; cd ..; python3 sub/x.py"#),
    s("P8 python3 script written to a name held in a variable", r#"f=x.py; echo 'import os; os.system("%0"+"%1%S %F")' > "$f"; python3 x.py"#),
    s("P8 python3 script written to a name from a substitution", r#"echo 'import os; os.system("%0"+"%1%S %F")' > $(echo x.py); python3 x.py"#),
    s("P8 python3 script appended to, then run", r#"echo 'import os; os.system("%0"+"%1%S %F")' >> x.py; python3 x.py"#),
    s("P8 python3 script written as notes, then copied", r#"echo 'import os; os.system("%0"+"%1%S %F")' > notes.txt; cp notes.txt y.py; python3 y.py"#),
    s("P8 python3 script written as notes, then moved", r#"echo 'import os; os.system("%0"+"%1%S %F")' > notes.txt; mv notes.txt y.py; python3 y.py"#),
    s("P8 python3 script written as notes, then linked", r#"echo 'import os; os.system("%0"+"%1%S %F")' > notes.txt; ln -s notes.txt y.py; python3 y.py"#),
    s("P8 python3 script linked before it is written as notes", r#"ln -s notes.txt y.py; echo 'import os; os.system("%0"+"%1%S %F")' > notes.txt; python3 y.py"#),
    s("P8 python3 script written as notes, then copied by dd", r#"echo 'import os; os.system("%0"+"%1%S %F")' > notes.txt; dd if=notes.txt of=y.py status=none; python3 y.py"#),
    s("P8 python3 script written as notes, then copied by sort -o", r#"echo 'import os; os.system("%0"+"%1%S %F")' > notes.txt; sort -o y.py notes.txt; python3 y.py"#),
    s("P8 python3 script written by tee to two names", r#"echo 'import os; os.system("%0"+"%1%S %F")' | tee notes.txt x.py > /dev/null; python3 x.py"#),
    s("P8 python3 script written as notes, run through /dev/fd", r#"echo 'import os; os.system("%0"+"%1%S %F")' > notes.txt; python3 /dev/fd/3 3< notes.txt"#),
];

/// Issue 29's families that are asked about rather than denied: the command is in a file
/// (P3b: opaque, P5) or built from pieces the code joins (P8: it calls a shell, so it is
/// asked in mode auto).
const ISSUE_29_ASKED: &[&str] = &[
    "P3b BASH_ENV file",
    "P3b env BASH_ENV file",
    "P3b ENV file for sh -i",
    "P8 python3 -c a name built from pieces",
    "P8 awk system of a name built from pieces",
    // Issue 41: code not shown harmless that hides the name is opaque, and asked.
    "P8 python3 getattr of a built name",
    "P8 python3 PYTHONBREAKPOINT",
    "P8 python3 a function held in a variable",
    "P8 python3 exec of a built string",
    "P8 python3 subprocess under another name",
    "P8 perl IPC::Open3",
    "P8 perl s///e",
    "P8 perl system after a division",
    "P8 node require of a built name",
    "P8 node a module held in a variable",
    "P8 node destructured execSync",
    "P8 awk print to a pipe after a division",
    "P8 python3 - here-document of a built name",
    "P8 perl from a pipe",
    "P8 vim -es here-string",
    "P8 tclsh here-string",
    "P8 prompt expansion @P",
    // Issue 41: a formatted gdb command does not show the name.
    "P3b gdb eval of a formatted command",
    // Issue 41 (41b): an exported variable not shown harmless is asked, as in front.
    "P8 export PERL5OPT",
    "P8 export LUA_INIT",
    "P8 typeset -x LUA_INIT",
    "P8 declare -x PERL5DB",
    // Issue 41, round 3: code not shown harmless whose command's name the line hides, code
    // read from stdin, a file or a template, and variables the judge cannot show harmless.
    "P8 lua a second -e with io.popen",
    "P8 node --input-type=module dynamic import",
    "P8 python3 os.popen",
    "P8 python3 vars of a module",
    "P8 python3 importlib of a built name",
    "P8 perl open to a pipe",
    "P8 ruby IO.popen",
    "P8 lua a function held in a local",
    "P8 lua load of a string",
    "P8 node module.constructor._load",
    "P8 node eval of require",
    "P8 awk system of a -v value",
    "P8 awk system of its input",
    "P8 awk getline from a built command",
    "P8 sed e after a substitution",
    "P8 sed e as its own -e",
    "P8 python3 -m code here-string",
    "P8 python3 script from a process substitution",
    "P8 perl - here-string of a built name",
    "P8 perl script from a process substitution",
    "P8 ruby here-string of a built name",
    "P8 ruby from a pipe",
    "P8 php here-string",
    "P8 make -f - here-string",
    "P8 make -f process substitution",
    "P8 erb template from a pipe",
    "P8 erb here-string",
    "P8 erb template from a process substitution",
    "P8 tclsh8.6 versioned here-string",
    "P3b GIT_CONFIG_COUNT alias",
    "P3b GIT_CONFIG_PARAMETERS alias",
    "P3b git --config-env=",
    "P3b TAR_OPTIONS",
    "P8 env BASH_FUNC_ function",
    "P8 env LUA_INIT",
    "P8 env PERL5OPT",
    "P8 env -S LUA_INIT",
    "P8 export LUA_INIT bare, then set",
    "P8 set -a then LUA_INIT",
    "P8 busybox awk of a built name",
    "P8 a hook written on the line, then git commit",
    "P8 an alias appended to .git/config, then used",
    "P8 a Makefile written on the line, then make",
    "P8 a Makefile recipe split by quotes, then make",
    "P8 a Makefile recipe of a built name, then make",
    "P8 printf -v into a name built at run time",
    "P8 test -v of a name built at run time",
    "P8 [[ -v of a name built at run time",
    "P8 read into a name built at run time",
    "P8 declare of a name built at run time",
    // Issue 41 (brief h7): code written on the line and run, read as its language: hidden
    // names are asked; shown names (`printf`'s escapes decoded, a shell script) are denied.
    "P8 python3 script written by printf, a built name",
    "P8 python3 script written by printf %s lines",
    "P8 python3 script written by a here-document through cat",
    "P8 python3 script written by tee from a here-string",
    "P8 perl script written on the line, a built name",
    "P8 ruby script written by a here-document, a built name",
    "P8 node script written on the line, a built require",
    "P8 php script written on the line, a built name",
    "P8 lua script written on the line, a built name",
    "P8 awk program file written on the line, a built name",
    "P8 a script run by its shebang, a built name",
    "P8 a bash script of a built name, then bash",
    "P8 python3 script transformed by tr from a here-string",
    "P8 python3 script from a pipe through tr",
    "P8 python3 script changed by sed -i before it runs",
    "P8 python3 script written in a loop after its run",
    "P8 a function runs the script written after it",
    "P8 ruby -r of a library written on the line",
    "P8 node -r of a module written on the line",
    "P8 lua -l of a module written on the line",
    "P8 python3 -m of a module written on the line",
    "P8 sed -f of a script written on the line",
    "P8 python3 script appended in pieces",
    "P8 python3 script written by dd from a here-string",
    "P8 python3 script written by dd from a pipe",
    "P8 python3 script by an expanding here-document",
    "P8 python3 script written through exec 3>",
    "P8 python3 script written through a process substitution",
    "P8 python3 script hidden in xpg_echo escapes",
    "P8 python3 script written by a group's redirection",
    "P8 python3 -c imports a module written on the line",
    "P8 python3 script printed by perl's code",
    "P8 python3 script printed by jq -n",
    "P8 python3 script printed by basename",
    "P8 php -c of an ini file written on the line",
    "P8 python3 script changed by sed -i after its run in a loop",
    "P8 python3 script hiding code behind a utf-7 coding declaration",
    "P8 perl -x starts inside a string of the script written",
    "P8 python3 -x skips the line that opens a string",
    "P8 tclsh script of a built name written on the line",
    "P8 python3 script written by a substitution in its own words",
    "P8 python3 script written after its run sent to the background",
    "P8 python3 script written to ./x.py, run as x.py",
    "P8 python3 script written after cd, run from its parent",
    "P8 python3 script written to a name held in a variable",
    "P8 python3 script written to a name from a substitution",
    "P8 python3 script appended to, then run",
    "P8 python3 script written as notes, then copied",
    "P8 python3 script written as notes, then moved",
    "P8 python3 script written as notes, then linked",
    "P8 python3 script linked before it is written as notes",
    "P8 python3 script written as notes, then copied by dd",
    "P8 python3 script written as notes, then copied by sort -o",
    "P8 python3 script written by tee to two names",
    "P8 python3 script written as notes, run through /dev/fd",
    // Issue 41, round 5: the option that runs code is in a value the judge cannot know.
    "P8 perl's -e from a command's output",
    "P8 python3's -c from a command's output",
    "P8 node's -e from a command's output",
    "P8 perl's -e after code, from a command's output",
    "P3b find's -exec from a command's output",
    "P3b git's -c alias from a command's output",
    "P6 a command name cat prints from a here-document",
    "P8 python3's -c split out of an option's value",
];

/// What the judge promises an issue-29 shape in mode auto under `rm` -> deny (P3b, P8):
/// `deny` when the line shows the command, `ask` for [`ISSUE_29_ASKED`]; `None` for the
/// other families.
fn issue_29_decision(family: &str) -> Option<&'static str> {
    if !(family.starts_with("P3b ") || family.starts_with("P8 ")) {
        return None;
    }
    Some(if ISSUE_29_ASKED.contains(&family) {
        "ask"
    } else {
        "deny"
    })
}

/// The inner command of a pass: its name and the suffix of its file argument.
struct Verb {
    name: &'static str,
    ext: &'static str,
}

/// Pass 1: deletes the canary.
const RM: Verb = Verb {
    name: "rm",
    ext: "",
};

/// Pass 2: creates `canary.new` next to the canary.
const TOUCH: Verb = Verb {
    name: "touch",
    ext: ".new",
};

/// Fills a template's placeholders:
/// `%V` the command's name (`rm`, `touch`); `%0`, `%1` its first and second
/// letter and `%S` the rest after them; `%X`, `%O` its first letter in hex and
/// octal; `%C` the canary's name; `%E` the file suffix (`""`, `".new"`); `%F`
/// the file argument, relative (`canary`, `canary.new`); `%P` the same,
/// absolute; `%D` the shape's directory (the command's cwd); `%L` a lock file
/// outside it; `%G` a directory holding only links to the verbs' programs (see
/// [`prepare`]), where a glob can match nothing else. Any other `%` is kept.
fn expand(line: &str, verb: &Verb, dir: &Path, lock: &Path) -> String {
    let v = verb.name;
    let first = v.as_bytes()[0];
    let file = format!("canary{}", verb.ext);
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' {
            let value = match chars.peek() {
                Some('V') => Some(v.to_string()),
                Some('0') => Some(v[..1].to_string()),
                Some('1') => Some(v[1..2].to_string()),
                Some('S') => Some(v[2..].to_string()),
                Some('X') => Some(format!("{first:x}")),
                Some('O') => Some(format!("{first:o}")),
                Some('C') => Some("canary".to_string()),
                Some('E') => Some(verb.ext.to_string()),
                Some('F') => Some(file.clone()),
                Some('P') => Some(dir.join(&file).display().to_string()),
                Some('D') => Some(dir.display().to_string()),
                Some('L') => Some(lock.display().to_string()),
                Some('G') => Some(verbs_dir(dir).display().to_string()),
                _ => None,
            };
            if let Some(value) = value {
                out.push_str(&value);
                chars.next();
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Beside the shapes' directories: a directory with only `rm` and `touch` in it (links
/// to the real programs), so a glob shape's premise, that it matches the verb and
/// nothing else, holds whatever the machine's /usr/bin holds.
fn verbs_dir(shape_dir: &Path) -> PathBuf {
    shape_dir
        .parent()
        .expect("a shape's directory is inside the workspace")
        .join("verbs")
}

/// The directory of shape `i` under `ws` (with its canary) and its lock file.
fn prepare(ws: &Path, i: usize) -> (String, PathBuf, PathBuf) {
    let verbs = ws.join("verbs");
    if !verbs.exists() {
        std::fs::create_dir_all(&verbs).expect("mkdir verbs");
        for verb in [RM.name, TOUCH.name] {
            let program = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| Path::new(d).join(verb))
                .find(|p| p.exists())
                .unwrap_or_else(|| {
                    panic!("the walk-around table needs {verb} in /usr/bin or /bin")
                });
            match std::os::unix::fs::symlink(program, verbs.join(verb)) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                made => made.expect("link a verb"),
            }
        }
    }
    let name = format!("s{i:03}");
    let dir = ws.join(&name);
    std::fs::create_dir_all(&dir).expect("mkdir shape dir");
    std::fs::write(dir.join("canary"), "canary\n").expect("write canary");
    let lock = ws.join(format!("{name}.lock"));
    (name, dir, lock)
}

/// What is in `dir` besides the canary.
fn extra_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "canary")
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Distinct templates: a repeated row would count twice.
#[test]
fn the_table_has_over_300_distinct_shapes() {
    let mut seen = std::collections::HashSet::new();
    for shape in SHAPES {
        assert!(seen.insert(shape.line), "repeated shape: {}", shape.line);
        assert!(
            ["%V", "%0", "%X", "%O"]
                .iter()
                .any(|p| shape.line.contains(p)),
            "no inner command in {}",
            shape.line
        );
        assert!(!shape.family.is_empty());
    }
    assert!(SHAPES.len() >= 300, "only {} shapes", SHAPES.len());
}

/// Runs `line` the way the local executor does: `bash -c` in `dir`, a new
/// session, stdin /dev/null, TERM=dumb; bounded to 20 s.
async fn plain_bash(line: &str, dir: &Path) -> String {
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(line)
        .current_dir(dir)
        .env("TERM", "dumb")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    match tokio::time::timeout(Duration::from_secs(20), cmd.output()).await {
        Ok(Ok(out)) => format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Ok(Err(e)) => format!("spawn failed: {e}"),
        Err(_) => "timed out".to_string(),
    }
}

/// Every shape really runs its inner command in plain bash: `rm` deletes the
/// canary, `touch` creates `canary.new`. Otherwise its row proves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_every_shape_really_runs_its_inner_command_in_plain_bash() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "ws");
    let is_root = nix::unistd::geteuid().is_root();
    let mut jobs = tokio::task::JoinSet::new();
    let limit = std::sync::Arc::new(tokio::sync::Semaphore::new(8));
    for (pass, verb) in [RM, TOUCH].into_iter().enumerate() {
        let verb = std::sync::Arc::new(verb);
        for (i, shape) in SHAPES.iter().enumerate() {
            if shape.root && !is_root {
                continue;
            }
            let (_, shape_dir, lock) = prepare(&ws, pass * 1000 + i);
            let line = expand(shape.line, &verb, &shape_dir, &lock);
            let verb = verb.clone();
            let limit = limit.clone();
            jobs.spawn(async move {
                let _permit = limit.acquire_owned().await.unwrap();
                let output = plain_bash(&line, &shape_dir).await;
                let canary = shape_dir.join("canary").exists();
                let new = shape_dir.join("canary.new").exists();
                let worked = if verb.ext.is_empty() { !canary } else { new };
                (!worked).then(|| format!("{:?}: {line:?}\n    {}", shape.family, output.trim()))
            });
        }
    }
    let mut broken: Vec<String> = jobs.join_all().await.into_iter().flatten().collect();
    broken.sort();
    assert!(
        broken.is_empty(),
        "{} shapes do nothing in plain bash:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

/// A daemon with [`CONFIG`], one session in `ws` in `mode`, and a check that
/// commands really run there (`probe` must succeed), so that no row passes
/// only because nothing runs at all.
async fn daemon_session(dir: &Path, mode: &str, probe: &str) -> (SocketDaemon, Client, String) {
    let daemon = SocketDaemon::start(dir, CONFIG).await;
    let mut client = daemon.connect().await;
    let ws = workspace(dir, "ws");
    let session = client.new_session(&ws).await;
    client.set_mode(&session, mode).await;
    let (text, is_error) = client.bash(&session, probe).await;
    assert!(
        !is_error,
        "the probe {probe:?} failed in mode {mode}: {text}"
    );
    (daemon, client, session)
}

/// Runs one shape as a bash tool call in `workdir`, every question rejected.
async fn run_shape(client: &mut Client, session: &str, workdir: &str, line: &str) -> String {
    client.permission_answers = std::iter::repeat_n("reject_once", 16).collect();
    let (text, is_error) = client
        .tool(
            Some(session),
            "bash",
            json!({"command": line, "description": "walk-around", "workdir": workdir,
                   "timeoutMs": 15000}),
        )
        .await;
    client.permission_answers.clear();
    let mut text = text.trim().replace('\n', " | ");
    if text.len() > 160 {
        let mut cut = 160;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    format!("{}{text}", if is_error { "error: " } else { "ran: " })
}

/// P1-P6, P3b, P8 (P8 limits the table): with the rule `rm` -> deny in mode `auto` and
/// every question rejected, no shape deletes the canary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_p6_p3b_p8_deny_rule_on_rm_survives_every_walk_around() {
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, mut c, s) = daemon_session(dir.path(), "auto", "touch alive").await;
    assert!(
        dir.path().join("ws/alive").exists(),
        "auto mode ran nothing"
    );
    let ws = dir.path().join("ws");
    let mut holes = Vec::new();
    let mut disagreements = Vec::new();
    let mut weaker = Vec::new();
    for (i, shape) in SHAPES.iter().enumerate() {
        let (name, shape_dir, lock) = prepare(&ws, i);
        let line = expand(shape.line, &RM, &shape_dir, &lock);
        // What `_dsh/policy/explain` says this call gets, asked before it runs.
        let explained = c
            .request(
                "_dsh/policy/explain",
                json!({"sessionId": s, "command": line}),
            )
            .await
            .unwrap_or_else(|e| panic!("explain {line:?}: {e}"));
        let explained = explained["judgement"]["decision"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let asked_before = c.permission_requests.len();
        let result = run_shape(&mut c, &s, &name, &line).await;
        let asked = c.permission_requests.len() > asked_before;
        let vetoed = result.starts_with("error: Error: vetoed by policy");
        let real = match (vetoed, asked) {
            (true, _) => "deny",
            (false, true) => "ask",
            (false, false) => "allow",
        };
        if real != explained {
            disagreements.push(format!("{line:?}: explain {explained}, the call {real}"));
        }
        if let Some(expected) = issue_29_decision(shape.family)
            && explained != expected
        {
            weaker.push(format!(
                "{:?}: {line:?}: {explained}, not {expected}",
                shape.family
            ));
        }
        if !shape_dir.join("canary").exists() {
            holes.push(format!("{:?}: {line:?}\n    {result}", shape.family));
        }
    }
    assert!(
        holes.is_empty(),
        "{} of {} shapes deleted the canary despite `rm` -> deny:\n{}",
        holes.len(),
        SHAPES.len(),
        holes.join("\n")
    );
    // P3b, P8: a command the line shows is denied, not only asked about.
    assert!(
        weaker.is_empty(),
        "issue 29's forms not judged as promised:\n{}",
        weaker.join("\n")
    );
    // The explain method and the waterfall call one function: they never disagree.
    assert!(
        disagreements.is_empty(),
        "explain and the real call disagree:\n{}",
        disagreements.join("\n")
    );
}

/// P5, P7: in mode `read-only`, no shape creates a file (or deletes the canary).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3b_p5_p7_p8_read_only_mode_creates_nothing_through_any_walk_around() {
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, mut c, s) = daemon_session(dir.path(), "read-only", "ls").await;
    let ws = dir.path().join("ws");
    let mut holes = Vec::new();
    for (i, shape) in SHAPES.iter().enumerate() {
        let (name, shape_dir, lock) = prepare(&ws, i);
        let line = expand(shape.line, &TOUCH, &shape_dir, &lock);
        let result = run_shape(&mut c, &s, &name, &line).await;
        let extra = extra_entries(&shape_dir);
        let canary = shape_dir.join("canary").exists();
        if !extra.is_empty() || !canary {
            let what = if canary {
                format!("created {extra:?}")
            } else {
                format!("deleted the canary, created {extra:?}")
            };
            holes.push(format!("{:?}: {line:?} {what}\n    {result}", shape.family));
        }
    }
    assert!(
        holes.is_empty(),
        "{} of {} shapes wrote in read-only mode:\n{}",
        holes.len(),
        SHAPES.len(),
        holes.join("\n")
    );
}

/// P7, P8 (issue 41): a variable naming a file the program writes is a write in read-only
/// mode. Each line first writes its trace file in plain bash; through dsh it is refused
/// and writes nothing, while the same command without the variable runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p7_p8_a_trace_variable_naming_a_file_writes_nothing_in_read_only_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, mut c, s) = daemon_session(dir.path(), "read-only", "git status; true").await;
    let ws = dir.path().join("ws");
    for (i, variable) in ["GIT_TRACE2", "GIT_TRACE2_EVENT", "GIT_TRACE_PERFORMANCE"]
        .iter()
        .enumerate()
    {
        let control = tempfile::tempdir().unwrap();
        let control_line = format!("{variable}={}/trace git status", control.path().display());
        let output = plain_bash(&control_line, control.path()).await;
        assert!(
            control.path().join("trace").exists(),
            "{control_line:?} wrote nothing in plain bash: {output}"
        );
        let (name, shape_dir, _) = prepare(&ws, 900 + i);
        let line = format!("{variable}={}/trace git status", shape_dir.display());
        let result = run_shape(&mut c, &s, &name, &line).await;
        assert_eq!(
            extra_entries(&shape_dir),
            Vec::<String>::new(),
            "{line}: {result}"
        );
        assert!(
            result.starts_with("error: Error: vetoed by policy"),
            "{line}: {result}"
        );
        let without = run_shape(&mut c, &s, &name, "git status").await;
        assert!(!without.contains("vetoed"), "git status: {without}");
    }
}

/// Everyday command lines from projects' CI scripts and READMEs, with the decision each
/// got before issue 29 under [`CONFIG`]'s rule (`rm` -> deny) in modes auto, ask and
/// read-only. Reading commands in options, config, environment and inline code (P3b, P8)
/// must not change any of them: a `git commit -m "rm old files"` is a message, a `sed`
/// script without `e` runs nothing.
#[rustfmt::skip]
const EVERYDAY: &[(&str, [&str; 3])] = &[
    (r#"cargo build"#, ["allow", "ask", "deny"]),
    (r#"cargo build --release --locked"#, ["allow", "ask", "deny"]),
    (r#"cargo test --all-features"#, ["allow", "ask", "deny"]),
    (r#"cargo clippy --all-targets -- -D warnings"#, ["allow", "ask", "deny"]),
    (r#"cargo fmt --check"#, ["allow", "ask", "deny"]),
    (r#"cargo run --release -- --help"#, ["allow", "ask", "deny"]),
    (r#"cargo doc --no-deps --document-private-items"#, ["allow", "ask", "deny"]),
    (r#"cargo update -p serde"#, ["allow", "ask", "deny"]),
    (r#"cargo add tokio --features full"#, ["allow", "ask", "deny"]),
    (r#"cargo install cargo-nextest --locked"#, ["allow", "ask", "deny"]),
    (r#"rustup component add clippy rustfmt"#, ["allow", "ask", "deny"]),
    (r#"git status"#, ["allow", "ask", "allow"]),
    (r#"git status --short"#, ["allow", "ask", "allow"]),
    (r#"git diff --stat"#, ["allow", "ask", "allow"]),
    (r#"git log --oneline -20"#, ["allow", "ask", "allow"]),
    (r#"git add -A"#, ["allow", "ask", "deny"]),
    (r#"git commit -m "Fix parser bug""#, ["allow", "ask", "deny"]),
    (r#"git commit -m "rm old files""#, ["allow", "ask", "deny"]),
    (r#"git commit -am "remove rm -rf usage from scripts""#, ["allow", "ask", "deny"]),
    (r#"git push origin main"#, ["allow", "ask", "deny"]),
    (r#"git pull --rebase"#, ["allow", "ask", "deny"]),
    (r#"git checkout -b feature/login"#, ["allow", "ask", "deny"]),
    (r#"git stash pop"#, ["allow", "ask", "deny"]),
    (r#"git fetch --all --prune"#, ["allow", "ask", "deny"]),
    (r#"git tag -a v1.0.0 -m "Release 1.0.0""#, ["allow", "ask", "deny"]),
    (r#"git clone https://github.com/org/repo.git"#, ["allow", "ask", "deny"]),
    (r#"git submodule update --init --recursive"#, ["allow", "ask", "deny"]),
    (r#"git config user.email "ci@example.com""#, ["allow", "ask", "deny"]),
    (r#"git config --global core.autocrlf input"#, ["allow", "ask", "deny"]),
    (r#"git -c color.ui=always log --graph"#, ["allow", "ask", "deny"]),
    (r#"git -c core.pager=cat log -5"#, ["allow", "ask", "deny"]),
    (r#"git log --grep="rm -rf" --oneline"#, ["allow", "ask", "allow"]),
    (r#"git grep -n "rm -rf""#, ["allow", "ask", "deny"]),
    (r#"git show HEAD:README.md"#, ["allow", "ask", "allow"]),
    (r#"git blame src/main.rs"#, ["allow", "ask", "allow"]),
    (r#"git reset --hard origin/main"#, ["allow", "ask", "deny"]),
    (r#"git clean -fdx"#, ["allow", "ask", "deny"]),
    (r#"git rm --cached secrets.env"#, ["ask", "ask", "deny"]),
    (r#"git diff HEAD~1 -- src/"#, ["allow", "ask", "allow"]),
    (r#"npm install"#, ["allow", "ask", "deny"]),
    (r#"npm ci"#, ["allow", "ask", "deny"]),
    (r#"npm run build"#, ["allow", "ask", "deny"]),
    (r#"npm test -- --coverage"#, ["allow", "ask", "deny"]),
    (r#"npm run lint -- --fix"#, ["allow", "ask", "deny"]),
    (r#"npx prettier --check ."#, ["allow", "ask", "deny"]),
    (r#"npx eslint . --ext .ts,.tsx"#, ["allow", "ask", "deny"]),
    (r#"yarn install --frozen-lockfile"#, ["allow", "ask", "deny"]),
    (r#"pnpm install --frozen-lockfile"#, ["allow", "ask", "deny"]),
    (r#"node scripts/build.js"#, ["allow", "ask", "deny"]),
    (r#"node -e "console.log(process.version)""#, ["allow", "ask", "deny"]),
    (r#"node -p "require('./package.json').version""#, ["allow", "ask", "deny"]),
    (r#"pip install -r requirements.txt"#, ["allow", "ask", "deny"]),
    (r#"pip install -e ".[dev]""#, ["allow", "ask", "deny"]),
    (r#"python -m pip install --upgrade pip"#, ["allow", "ask", "deny"]),
    (r#"python3 -m pytest -q tests/"#, ["allow", "ask", "deny"]),
    (r#"python3 -m venv .venv"#, ["allow", "ask", "deny"]),
    (r#"python3 -c "import sys; print(sys.version)""#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])' < package.json"#, ["allow", "ask", "deny"]),
    (r#"python -m black --check ."#, ["allow", "ask", "deny"]),
    (r#"make"#, ["allow", "ask", "deny"]),
    (r#"make -j4"#, ["allow", "ask", "deny"]),
    (r#"make test"#, ["allow", "ask", "deny"]),
    (r#"make install PREFIX=$HOME/.local"#, ["allow", "ask", "deny"]),
    (r#"make clean && make"#, ["allow", "ask", "deny"]),
    (r#"cmake -S . -B build -DCMAKE_BUILD_TYPE=Release"#, ["allow", "ask", "deny"]),
    (r#"cmake --build build -j 4"#, ["allow", "ask", "deny"]),
    (r#"docker build -t app:latest ."#, ["allow", "ask", "deny"]),
    (r#"docker run --rm -it app:latest"#, ["allow", "ask", "deny"]),
    (r#"docker run --rm -v "$PWD":/src -w /src rust:1 cargo test"#, ["allow", "ask", "deny"]),
    (r#"docker compose up -d"#, ["allow", "ask", "deny"]),
    (r#"docker ps -a"#, ["allow", "ask", "deny"]),
    (r#"docker logs -f web"#, ["allow", "ask", "deny"]),
    (r#"docker exec web sh -c "ls /app""#, ["allow", "ask", "deny"]),
    (r#"kubectl get pods -A"#, ["allow", "ask", "deny"]),
    (r#"kubectl apply -f k8s/"#, ["allow", "ask", "deny"]),
    (r#"kubectl describe pod web-0"#, ["allow", "ask", "deny"]),
    (r#"kubectl logs -f deploy/web"#, ["allow", "ask", "deny"]),
    (r#"kubectl rollout restart deploy/web"#, ["allow", "ask", "deny"]),
    (r#"kubectl exec -it web-0 -- sh"#, ["allow", "ask", "deny"]),
    (r#"kubectl config use-context prod"#, ["allow", "ask", "deny"]),
    (r#"helm upgrade --install web ./chart -f values.yaml"#, ["allow", "ask", "deny"]),
    (r#"terraform plan -out plan.tfplan"#, ["allow", "ask", "deny"]),
    (r#"sed -i 's/foo/bar/g' src/lib.rs"#, ["allow", "ask", "deny"]),
    (r#"sed -n '1,20p' README.md"#, ["allow", "ask", "deny"]),
    (r#"sed -e 's/^v//' VERSION"#, ["allow", "ask", "deny"]),
    (r#"sed -E 's/([0-9]+)\.([0-9]+)/\2.\1/' versions.txt"#, ["allow", "ask", "deny"]),
    (r#"sed '/^$/d' notes.txt"#, ["allow", "ask", "deny"]),
    (r#"sed 's/#.*//' config.ini"#, ["allow", "ask", "deny"]),
    (r#"sed -i -e 's/rm -f/rm -rf/' Makefile"#, ["allow", "ask", "deny"]),
    (r#"awk '{print $1}' access.log"#, ["allow", "ask", "deny"]),
    (r#"awk -F: '{print $1}' /etc/passwd"#, ["allow", "ask", "deny"]),
    (r#"awk 'NR==2{print}' data.txt"#, ["allow", "ask", "deny"]),
    (r#"awk '{s+=$2} END {print s}' data.txt"#, ["allow", "ask", "deny"]),
    (r#"awk '/error/ {c++} END {print c}' app.log"#, ["allow", "ask", "deny"]),
    (r#"awk -v OFS=, '{$1=$1; print}' data.txt"#, ["allow", "ask", "deny"]),
    (r#"awk 'length > 100' src/main.rs"#, ["allow", "ask", "deny"]),
    (r#"awk '!seen[$0]++' list.txt"#, ["allow", "ask", "deny"]),
    (r#"grep -rn TODO src/"#, ["allow", "ask", "allow"]),
    (r#"grep -E "rm -rf|sudo" scripts/install.sh"#, ["allow", "ask", "allow"]),
    (r#"rg -n "fn main" src"#, ["allow", "ask", "allow"]),
    (r#"find . -name '*.rs' -newer Cargo.toml"#, ["allow", "ask", "allow"]),
    (r#"find . -type f -name '*.log' -mtime +7"#, ["allow", "ask", "allow"]),
    (r#"ls -la"#, ["allow", "ask", "allow"]),
    (r#"cat Cargo.toml"#, ["allow", "ask", "allow"]),
    (r#"head -n 50 src/lib.rs"#, ["allow", "ask", "allow"]),
    (r#"tail -n 100 log/app.log"#, ["allow", "ask", "allow"]),
    (r#"wc -l src/*.rs"#, ["allow", "ask", "allow"]),
    (r#"du -sh target"#, ["allow", "ask", "allow"]),
    (r#"curl -fsSL https://sh.rustup.rs -o rustup.sh"#, ["allow", "ask", "deny"]),
    (r#"tar -xzf release.tar.gz"#, ["allow", "ask", "deny"]),
    (r#"tar -czf dist.tgz dist/"#, ["allow", "ask", "deny"]),
    (r#"tar -tf archive.tar"#, ["allow", "ask", "deny"]),
    (r#"tar xzf node.tar.gz -C /tmp"#, ["allow", "ask", "deny"]),
    (r#"unzip -o pkg.zip -d out"#, ["allow", "ask", "deny"]),
    (r#"ssh deploy@host uptime"#, ["allow", "ask", "deny"]),
    (r#"ssh -i ~/.ssh/id_ed25519 host 'systemctl status nginx'"#, ["allow", "ask", "deny"]),
    (r#"scp build.tgz host:/tmp/"#, ["allow", "ask", "deny"]),
    (r#"rsync -avz --delete dist/ host:/var/www/"#, ["allow", "ask", "deny"]),
    (r#"rsync -az -e "ssh -p 2222" dist/ host:/srv/app/"#, ["allow", "ask", "deny"]),
    (r#"tmux ls"#, ["allow", "ask", "deny"]),
    (r#"tmux attach -t main"#, ["allow", "ask", "deny"]),
    (r#"go build ./..."#, ["allow", "ask", "deny"]),
    (r#"go test ./... -race"#, ["allow", "ask", "deny"]),
    (r#"go mod tidy"#, ["allow", "ask", "deny"]),
    (r#"jq -r '.version' package.json"#, ["allow", "ask", "deny"]),
    (r#"echo "rm -rf is dangerous""#, ["allow", "ask", "allow"]),
    (r#"printf '%s\n' "rm the file""#, ["allow", "ask", "allow"]),
    (r#"env RUST_LOG=debug cargo run"#, ["allow", "ask", "deny"]),
    (r#"RUST_BACKTRACE=1 cargo test"#, ["allow", "ask", "deny"]),
    (r#"timeout 60 cargo test"#, ["allow", "ask", "deny"]),
    (r#"nice -n 10 make -j8"#, ["allow", "ask", "deny"]),
    (r#"find . -name '*.o' | xargs ls -l"#, ["allow", "ask", "deny"]),
    (r#"mkdir -p build && cd build && cmake .."#, ["allow", "ask", "deny"]),
    (r#"cp -r assets dist/"#, ["allow", "ask", "deny"]),
    (r#"perl -pi -e 's/foo/bar/g' file.txt"#, ["allow", "ask", "deny"]),
    (r#"perl -ne 'print if /version/' Cargo.toml"#, ["allow", "ask", "deny"]),
    (r#"bash scripts/ci.sh"#, ["ask", "ask", "deny"]),
    (r#"sh -c 'cargo build && cargo test'"#, ["allow", "ask", "deny"]),
    (r#"./gradlew build --no-daemon"#, ["allow", "ask", "deny"]),
    (r#"mvn -B package --file pom.xml"#, ["allow", "ask", "deny"]),
    (r#"bundle exec rspec"#, ["allow", "ask", "deny"]),
    (r#"journalctl -u nginx --since today"#, ["allow", "ask", "deny"]),
    (r#"gh pr create --title "Fix login" --body "Closes #12""#, ["allow", "ask", "deny"]),
    (r#"gh run watch"#, ["allow", "ask", "deny"]),
    // Issue 41: inline code shown harmless, awk and sed, code on stdin from the line.
    (r#"python3 -c 'import platform; print(platform.system())'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import sys; print(sys.executable)'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c "import json; print(json.dumps({'a': 1}, indent=2))""#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import os; print(os.getcwd())'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import math; print(math.sqrt(2))'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c "import sys; print(chr(10).join(sorted(sys.path)))""#, ["allow", "ask", "deny"]),
    (r#"python3 -m json.tool package.json"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import datetime; print(datetime.date.today().isoformat())'"#, ["allow", "ask", "deny"]),
    ("python3 - <<'EOF'\nimport sys\nprint(sys.version_info[:2])\nEOF", ["allow", "ask", "deny"]),
    (r#"python3 -c 'from pathlib import Path; print(Path.cwd())'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import sys; [print(l.rstrip()) for l in sys.stdin]' < f.txt"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import sys; sys.stdout.write(sys.stdin.read().upper())' < in.txt"#, ["allow", "ask", "deny"]),
    (r#"echo '{"a":1}' | python3 -m json.tool"#, ["allow", "ask", "deny"]),
    ("node -e 'const n = 2; console.log(`n=${n}`)'", ["allow", "ask", "deny"]),
    (r#"node -p 'process.versions.v8'"#, ["allow", "ask", "deny"]),
    (r#"node -e "console.log(require('./package.json').name)""#, ["allow", "ask", "deny"]),
    (r#"node -pe 'require("os").cpus().length'"#, ["allow", "ask", "deny"]),
    (r#"node -e 'console.log(JSON.stringify(process.argv.slice(1)))' a b"#, ["allow", "ask", "deny"]),
    (r#"node --no-warnings -e 'console.log(Math.max(1, 2))'"#, ["allow", "ask", "deny"]),
    (r#"node -p "Object.keys(require('./package.json').dependencies || {}).join(' ')""#, ["allow", "ask", "deny"]),
    (r#"node -e 'process.stdout.write("ok\n")'"#, ["allow", "ask", "deny"]),
    (r#"node -e 'for (const f of require("fs").readdirSync(".")) console.log(f)'"#, ["allow", "ask", "deny"]),
    (r#"perl -ne 'print if /TODO/' src/main.rs"#, ["allow", "ask", "deny"]),
    (r#"perl -lane 'print $F[0]' data.txt"#, ["allow", "ask", "deny"]),
    (r#"perl -pe 's/\r$//' file.txt"#, ["allow", "ask", "deny"]),
    (r#"perl -MList::Util=sum -le 'print sum(1..10)'"#, ["allow", "ask", "deny"]),
    (r#"perl -0777 -pe 's/\n+/\n/g' notes.txt"#, ["allow", "ask", "deny"]),
    (r#"perl -le 'print scalar localtime'"#, ["allow", "ask", "deny"]),
    (r#"perl -i -pe 's/foo/bar/' a.txt"#, ["allow", "ask", "deny"]),
    (r#"awk 'BEGIN{FS="|"} {print $2}' data.psv"#, ["allow", "ask", "deny"]),
    (r#"awk -F, 'NR>1 {sum+=$3} END {printf "%.2f\n", sum}' sales.csv"#, ["allow", "ask", "deny"]),
    (r#"awk 'NF' file.txt"#, ["allow", "ask", "deny"]),
    (r#"awk '{ print length($0) }' file.txt"#, ["allow", "ask", "deny"]),
    (r#"awk -v n=3 'NR<=n' file.txt"#, ["allow", "ask", "deny"]),
    (r#"awk '{a[$1]++} END {for (k in a) print k, a[k]}' words.txt"#, ["allow", "ask", "deny"]),
    (r#"awk 'BEGIN{OFS="\t"} {$1=$1} 1' data.txt"#, ["allow", "ask", "deny"]),
    (r#"awk '/^#/ {next} {print toupper($0)}' conf.txt"#, ["allow", "ask", "deny"]),
    (r#"awk 'END{print NR}' file.txt"#, ["allow", "ask", "deny"]),
    (r#"git log --format='%h %s' | awk '{print $1}'"#, ["allow", "ask", "deny"]),
    (r#"sed -n '/start/,/end/p' log.txt"#, ["allow", "ask", "deny"]),
    (r#"sed 's/[[:space:]]*$//' file.txt"#, ["allow", "ask", "deny"]),
    (r#"sed -E 's/v([0-9]+)/\1/' tags.txt"#, ["allow", "ask", "deny"]),
    (r#"sed '1d' data.csv"#, ["allow", "ask", "deny"]),
    (r#"sed -i.bak 's/old/new/' config.yml"#, ["allow", "ask", "deny"]),
    (r#"sed -n '$p' log.txt"#, ["allow", "ask", "deny"]),
    (r#"sed 's/,/\t/g' data.csv"#, ["allow", "ask", "deny"]),
    (r#"sed = file.txt | sed 'N;s/\n/ /'"#, ["allow", "ask", "deny"]),
    (r#"lua5.4 -e 'print(_VERSION)'"#, ["allow", "ask", "deny"]),
    (r#"ruby -e 'puts RUBY_VERSION'"#, ["allow", "ask", "deny"]),
    (r#"ruby -rjson -e 'puts JSON.pretty_generate({a: 1})'"#, ["allow", "ask", "deny"]),
    (r#"php -r 'echo PHP_VERSION, PHP_EOL;'"#, ["allow", "ask", "deny"]),
    (r#"php -r 'echo json_encode(["ok" => true]), "\n";'"#, ["allow", "ask", "deny"]),
    (r#"sqlite3 app.db 'select count(*) from users'"#, ["allow", "ask", "deny"]),
    (r#"sqlite3 app.db .tables"#, ["allow", "ask", "deny"]),
    (r#"rg --pretty fn src"#, ["allow", "ask", "allow"]),    // Issue 41: variables judged by their value.
    (r#"PAGER=cat git log -3"#, ["allow", "ask", "allow"]),
    (r#"GIT_EDITOR=true git commit -q --amend --allow-empty"#, ["allow", "ask", "deny"]),
    (r#"GIT_SSH_COMMAND='ssh -o BatchMode=yes' git ls-remote ."#, ["allow", "ask", "deny"]),
    (r#"MANPAGER=cat man ls"#, ["allow", "ask", "deny"]),
    (r#"GIT_PAGER=cat git diff --stat"#, ["allow", "ask", "allow"]),
    (r#"EDITOR=true git rebase -i HEAD~2"#, ["allow", "ask", "deny"]),
    (r#"CC=clang make"#, ["allow", "ask", "deny"]),
    // Issue 41: variables by an allowlist, and the rows of class 5 read in full.
    (r#"LC_ALL=C sort names.txt"#, ["allow", "ask", "allow"]),
    (r#"NODE_ENV=production npm run build"#, ["allow", "ask", "deny"]),
    (r#"CI=true npm test"#, ["allow", "ask", "deny"]),
    (r#"TZ=UTC date"#, ["allow", "ask", "allow"]),
    (r#"GIT_TRACE=1 git status"#, ["allow", "ask", "allow"]),
    (r#"PYTHONUNBUFFERED=1 python3 -m pytest -q"#, ["allow", "ask", "deny"]),
    (r#"NO_COLOR=1 cargo test"#, ["allow", "ask", "deny"]),
    (r#"tmux kill-session -t dev"#, ["allow", "ask", "deny"]),
    (r#"tmux list-windows"#, ["allow", "ask", "deny"]),
    (r#"gdb -batch -ex run -ex bt --args ./target/debug/app"#, ["allow", "ask", "deny"]),
    (r#"gdb -batch -ex 'thread apply all bt' -p 1234"#, ["allow", "ask", "deny"]),
    (r#"man -P cat ls"#, ["allow", "ask", "deny"]),
    (r#"git clone --depth 1 https://github.com/rust-lang/log.git"#, ["allow", "ask", "deny"]),
    (r#"git config --global user.email a@b.c"#, ["allow", "ask", "deny"]),
    (r#"git config -f .gitmodules --get-regexp path"#, ["allow", "ask", "deny"]),
    (r#"screen -ls"#, ["allow", "ask", "deny"]),
    (r#"screen -r dev"#, ["allow", "ask", "deny"]),
    (r#"cat *.txt"#, ["allow", "ask", "allow"]),
    // Issue 41 (41b): exports of variables shown harmless, and paths run with no write
    // before them on the line.
    (r#"export PATH=$PATH:$HOME/.local/bin"#, ["allow", "ask", "deny"]),
    (r#"export RUST_BACKTRACE=1; cargo test"#, ["allow", "ask", "deny"]),
    (r#"export NODE_ENV=production && npm run build"#, ["allow", "ask", "deny"]),
    (r#"export LANG=C.UTF-8; sort names.txt"#, ["allow", "ask", "deny"]),
    (r#"export CI=true; npm test"#, ["allow", "ask", "deny"]),
    (r#"./configure && make"#, ["allow", "ask", "deny"]),
    (r#"timeout 60 ./gradlew build"#, ["allow", "ask", "deny"]),
    (r#"mkdir -p build && cd build && ../configure"#, ["allow", "ask", "deny"]),
    // Issue 41, round 3: interpreters with harmless code, pagers and editors in variables
    // set to harmless programs, awk, sed and jq (no process: data).
    (r#"python3 -c 'import sys; print(len(sys.argv))' a b"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'print(sum(range(10)))'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import os; print(os.environ.get("HOME"))'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import re; print(re.sub(r"a", "b", "banana"))'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import hashlib; print(hashlib.sha256(b"x").hexdigest())'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import base64; print(base64.b64encode(b"hi").decode())'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import uuid; print(uuid.uuid4())'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import time; print(int(time.time()))'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import csv, sys; [print(r[0]) for r in csv.reader(sys.stdin)]' < data.csv"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import random; print(random.randint(1, 6))'"#, ["allow", "ask", "deny"]),
    (r#"python3 -c 'import shutil; print(shutil.which("git"))'"#, ["allow", "ask", "deny"]),
    ("python3 - <<'EOF2'\nimport json\nprint(json.dumps({\"ok\": True}))\nEOF2", ["allow", "ask", "deny"]),
    (r#"node -e 'console.log(new Date().toISOString())'"#, ["allow", "ask", "deny"]),
    (r#"node -p 'Number.MAX_SAFE_INTEGER'"#, ["allow", "ask", "deny"]),
    (r#"node -e 'console.log([3,1,2].sort().join(","))'"#, ["allow", "ask", "deny"]),
    (r#"node -p 'require("path").join("a", "b")'"#, ["allow", "ask", "deny"]),
    (r#"node -e 'console.log(require("os").platform())'"#, ["allow", "ask", "deny"]),
    (r#"node -p 'JSON.parse(require("fs").readFileSync("package.json", "utf8")).scripts'"#, ["allow", "ask", "deny"]),
    (r#"perl -e 'print "hello\n"'"#, ["allow", "ask", "deny"]),
    (r#"perl -ne 'print if 5..10' file.txt"#, ["allow", "ask", "deny"]),
    (r#"perl -pe 'tr/a-z/A-Z/' file.txt"#, ["allow", "ask", "deny"]),
    (r#"perl -MPOSIX -le 'print strftime("%Y", localtime)'"#, ["allow", "ask", "deny"]),
    (r#"perl -MJSON::PP -e 'print encode_json({a => 1})'"#, ["allow", "ask", "deny"]),
    (r#"ruby -e 'puts [1, 2, 3].sum'"#, ["allow", "ask", "deny"]),
    (r#"ruby -e 'puts Time.now.year'"#, ["allow", "ask", "deny"]),
    (r#"php -r 'echo strtoupper("abc"), "\n";'"#, ["allow", "ask", "deny"]),
    (r#"php -r 'echo date("Y-m-d"), PHP_EOL;'"#, ["allow", "ask", "deny"]),
    (r#"lua5.4 -e 'print(string.format("%d", 42))'"#, ["allow", "ask", "deny"]),
    (r#"lua5.4 -e 'print(math.floor(3.7))'"#, ["allow", "ask", "deny"]),
    (r#"awk -F'\t' '{print $3}' data.tsv"#, ["allow", "ask", "deny"]),
    (r#"awk '{ $1 = ""; print substr($0, 2) }' file.txt"#, ["allow", "ask", "deny"]),
    (r#"awk 'BEGIN { printf "%s\n", "hi" }'"#, ["allow", "ask", "deny"]),
    (r#"awk '{ gsub(/foo/, "bar"); print }' file.txt"#, ["allow", "ask", "deny"]),
    (r#"awk -F= '/^version/ {print $2}' Cargo.toml"#, ["allow", "ask", "deny"]),
    (r#"awk '{print NR": "$0}' file.txt"#, ["allow", "ask", "deny"]),
    (r#"awk 'NR % 2 == 0' file.txt"#, ["allow", "ask", "deny"]),
    (r#"awk '{ split($0, a, ","); print a[1] }' data.csv"#, ["allow", "ask", "deny"]),
    (r#"awk 'BEGIN { x = 10 / 3; print x }'"#, ["allow", "ask", "deny"]),
    (r#"sed -n '5,10p' file.txt"#, ["allow", "ask", "deny"]),
    (r#"sed 's/\s\+$//' file.txt"#, ["allow", "ask", "deny"]),
    (r#"sed -e '/^#/d' -e '/^$/d' config.ini"#, ["allow", "ask", "deny"]),
    (r#"sed 's|/usr/local|/opt|g' paths.txt"#, ["allow", "ask", "deny"]),
    (r#"sed -i '' 's/a/b/' file.txt"#, ["allow", "ask", "deny"]),
    (r#"sed 'y/abc/xyz/' file.txt"#, ["allow", "ask", "deny"]),
    (r#"sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml"#, ["allow", "ask", "deny"]),
    (r#"PAGER=less git log -3"#, ["allow", "ask", "deny"]),
    (r#"GIT_PAGER=less git log -3"#, ["allow", "ask", "deny"]),
    (r#"PAGER='less -R' git log -3"#, ["allow", "ask", "deny"]),
    (r#"MANPAGER='less -R' man ls"#, ["allow", "ask", "deny"]),
    (r#"EDITOR=vim git commit"#, ["allow", "ask", "deny"]),
    (r#"EDITOR='code --wait' git commit"#, ["allow", "ask", "deny"]),
    (r#"VISUAL=nano git commit"#, ["allow", "ask", "deny"]),
    (r#"GIT_EDITOR='vim -c startinsert' git commit"#, ["allow", "ask", "deny"]),
    (r#"GIT_SEQUENCE_EDITOR=true git rebase -i HEAD~3"#, ["allow", "ask", "deny"]),
    (r#"export EDITOR=vim; git commit"#, ["allow", "ask", "deny"]),
    (r#"export PAGER=less; git log"#, ["allow", "ask", "deny"]),
    (r#"git -c core.editor=vim commit"#, ["allow", "ask", "deny"]),
    (r#"git -c core.pager='less -FRX' log"#, ["allow", "ask", "deny"]),
    (r#"LESS=-R git log"#, ["allow", "ask", "allow"]),
    (r#"jq -n '1 + 1'"#, ["allow", "ask", "deny"]),
    (r#"jq '.dependencies | keys' package.json"#, ["allow", "ask", "deny"]),
    (r#"jq -r '.[] | .name' items.json"#, ["allow", "ask", "deny"]),
    (r#"jq --arg v 1.0 '.version = $v' package.json"#, ["allow", "ask", "deny"]),
    (r#"yq '.spec' deploy.yaml"#, ["allow", "ask", "deny"]),
    (r#"VERSION=1.2.3; echo $VERSION"#, ["allow", "ask", "allow"]),
    (r#"name=app; docker build -t $name ."#, ["allow", "ask", "deny"]),
    (r#"for f in *.txt; do echo "$f"; done"#, ["allow", "ask", "allow"]),
    (r#"python3 -c 'import tomllib, sys; print(tomllib.loads(sys.stdin.read())["package"]["name"])' < Cargo.toml"#, ["allow", "ask", "deny"]),
    // Issue 41, round 4: values the line chooses, read by value, and what they give.
    (r#"for p in core cli; do cargo test -p $p; done"#, ["allow", "ask", "deny"]),
    (r#"dir=build; mkdir -p $dir && cd $dir && cmake .."#, ["allow", "ask", "deny"]),
    (r#"i=0; while [ $i -lt 3 ]; do i=$((i+1)); done"#, ["allow", "ask", "allow"]),
    (r#"n=0; for f in *.rs; do n=$((n+1)); done; echo $n"#, ["allow", "ask", "allow"]),
    (r#"export PATH=$PATH:$HOME/.local/bin; cargo build"#, ["allow", "ask", "deny"]),
    (r#"x=$(git rev-parse --short HEAD); echo "$x""#, ["allow", "ask", "allow"]),
    (r#"cd "$(git rev-parse --show-toplevel)" && cargo build"#, ["allow", "ask", "deny"]),
    (r#"mkdir -p "$(dirname out/a/b.txt)""#, ["allow", "ask", "deny"]),
    (r#"f=README.md; wc -l "$f""#, ["allow", "ask", "allow"]),
    (r#"branch=main; git checkout "$branch""#, ["allow", "ask", "deny"]),
    (r#"kill $(pgrep -f myserver)"#, ["allow", "ask", "deny"]),
    // Issue 41, round 5: a command's output where a program reads only data.
    (r#"git diff "$(git merge-base HEAD main)""#, ["allow", "ask", "deny"]),
    (r#"git log "$(git describe --tags --abbrev=0)"..HEAD --oneline"#, ["allow", "ask", "deny"]),
    (r#"out=$(mktemp); python3 gen.py "$out""#, ["allow", "ask", "deny"]),
    ("git commit -m \"$(cat <<'EOF'\nFix the parser\n\nCo-Authored-By: A <a@b>\nEOF\n)\"", ["allow", "ask", "deny"]),
    ("gh pr create --title Fix --body \"$(cat <<'EOF'\n## Summary\n- fix the parser\nEOF\n)\"", ["allow", "ask", "deny"]),
    (r#"grep -rn "$(cat word.txt)" src"#, ["allow", "ask", "allow"]),
    (r#"find . -name '*.py' | xargs sed -i 's/foo/bar/g'"#, ["allow", "ask", "deny"]),
    (r#"grep -rl foo src | xargs perl -i -pe 's/foo/bar/'"#, ["allow", "ask", "deny"]),
    // A wrapper's option from a value the line sets, read by that value.
    (r#"t=5; timeout $t cargo test"#, ["allow", "ask", "deny"]),
    (r#"for t in 60 120; do timeout $t make check; done"#, ["allow", "ask", "deny"]),
    (r#"for f in src/*.rs; do rustfmt --check "$f"; done"#, ["allow", "ask", "deny"]),
    (r#"docker build -t "${PWD##*/}" ."#, ["allow", "ask", "deny"]),
    (r#"cargo build --target ${TARGET:-x86_64-unknown-linux-gnu}"#, ["allow", "ask", "deny"]),
    (r#"apt-get install -y python3 perl"#, ["allow", "ask", "deny"]),
    (r#"docker run --rm img bash -c 'make test'"#, ["allow", "ask", "deny"]),
    (r#"cat f | sort | uniq -c | grep python"#, ["allow", "ask", "allow"]),
    (r#"read -r -p "$prompt" line <<< x"#, ["allow", "ask", "deny"]),
    // Issue 41 (brief h7): code written on the line and run by its interpreter, shown
    // harmless in its language, and writes no interpreter runs (each the same as before).
    (r"printf 'print(1)\n' > x.py; python3 x.py", ["allow", "ask", "deny"]),
    (r"echo '# notes' > README.md; git add README.md", ["allow", "ask", "deny"]),
    ("cat > x.json <<E\n{\"a\": 1}\nE\njq . x.json", ["allow", "ask", "deny"]),
    (r"echo hello > out.txt && cat out.txt", ["allow", "ask", "deny"]),
    ("cat > x.js <<'E'\nconsole.log(JSON.stringify({a: 1}))\nE\nnode x.js", ["allow", "ask", "deny"]),
    (r#"echo 'print("hi")' > x.lua; lua5.4 x.lua"#, ["allow", "ask", "deny"]),
    (r"printf '%s\n' 'puts 1' > x.rb; ruby x.rb", ["allow", "ask", "deny"]),
    (r"echo 'BEGIN{print 1}' > p.awk; awk -f p.awk data.txt", ["allow", "ask", "deny"]),
    (r"printf '<?php echo 1;\n' > x.php; php x.php", ["allow", "ask", "deny"]),
    (r"echo '# notes' > README.md; python3 build.py", ["allow", "ask", "deny"]),
    (r"python3 gen.py > out.json; python3 check.py out.json", ["allow", "ask", "deny"]),
    (r"make > build.log; python3 report.py", ["allow", "ask", "deny"]),
    (r"echo 'print(1)' > x.py; chmod +x x.py; python3 x.py", ["allow", "ask", "deny"]),
    (r#"echo '{"a": 1}' > x.json && python3 -m json.tool x.json"#, ["allow", "ask", "deny"]),
    ("cat > t.pl <<'E'\nprint \"ok\\n\";\nE\nperl t.pl", ["allow", "ask", "deny"]),
    // Brief h10: a line that names the files it writes apart from the script it runs writes
    // no code of it (each asked before: `hello` is no harmless python). `sh build.sh` is
    // asked as a shell running a script file (P5), as it was.
    (r"echo hello > out.txt; python3 x.py", ["allow", "ask", "deny"]),
    (r"pytest tests/ > log; python3 x.py", ["allow", "ask", "deny"]),
    (r"ls > files.txt && sh build.sh", ["ask", "ask", "deny"]),
    (r"git diff > changes.patch; python3 apply.py", ["allow", "ask", "deny"]),
    (r"echo done >> progress.log; python3 next.py", ["allow", "ask", "deny"]),
    (r"git log --oneline -5 > recent.txt; python3 summarize.py", ["allow", "ask", "deny"]),
    (r"echo hello > out.txt; ruby x.rb", ["allow", "ask", "deny"]),
    (r"echo hello > out.txt; perl x.pl", ["allow", "ask", "deny"]),
    (r"echo hello > out.txt; node build.js", ["allow", "ask", "deny"]),
    (r"git status --short > status.txt; python3 x.py", ["allow", "ask", "deny"]),
    (r"mkdir -p out && echo hi > out/log.txt && python3 x.py", ["allow", "ask", "deny"]),
    (r"printf '%s\n' a b c > list.txt && python3 x.py", ["allow", "ask", "deny"]),
    (r"echo hello | tee out.txt; python3 x.py", ["allow", "ask", "deny"]),
];

/// P3b, P8: no false alarm. Every everyday line keeps the decision it had before the
/// judge read options, config keys, environment and inline code.
#[test]
fn p3b_p8_everyday_command_lines_keep_their_decision() {
    let config = dsh::config::Config::from_toml(CONFIG, Path::new("walkaround.toml"))
        .expect("the walk-around config");
    let policy = dsh::policy::Policy::of_config(&config);
    let modes = [
        dsh::config::Mode::Auto,
        dsh::config::Mode::Ask,
        dsh::config::Mode::ReadOnly,
    ];
    let mut changed = Vec::new();
    let mut distinct = std::collections::HashSet::new();
    for (line, before) in EVERYDAY {
        assert!(distinct.insert(*line), "repeated line: {line}");
        for (mode, before) in modes.iter().zip(before) {
            let judged = policy.judge("bash", &json!({"command": line}), *mode, &[]);
            let now = dsh::policy::action(judged.decision);
            if now != *before {
                changed.push(format!(
                    "{line:?} in mode {}: {before} before, {now} now ({})",
                    mode.id(),
                    judged.reason
                ));
            }
        }
    }
    println!(
        "{} everyday command lines, {} judgements: {} changed",
        EVERYDAY.len(),
        EVERYDAY.len() * modes.len(),
        changed.len()
    );
    assert!(EVERYDAY.len() >= 150, "only {} lines", EVERYDAY.len());
    assert!(
        changed.is_empty(),
        "{} judgements changed:\n{}",
        changed.len(),
        changed.join("\n")
    );
}
