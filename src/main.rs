//! The `dsh` command line: the daemon (`serve`), the editor's launcher (`acp`),
//! and `status` / `stop` for people. Only the clap types and the dispatch live here;
//! each command's body is `cli/<command>.rs`.

mod cli;

use cli::reach::{Where, runtime};

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// dsh: a per-user agent daemon for editors.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: serve ACP on the socket (or on stdin/stdout with --stdio).
    Serve {
        #[command(flatten)]
        at: Where,
        /// Serve exactly one connection on stdin/stdout instead of a socket.
        #[arg(long)]
        stdio: bool,
        /// Stop after `[daemon] idle_exit_secs` with no connection and no running task:
        /// how `dsh acp` starts a daemon (not for people; theirs stays).
        #[arg(long, hide = true)]
        idle_exit: bool,
        /// Answer whether this program can take over a running daemon started with the
        /// same arguments (hand-over format FORMAT, the config as it is now) and exit:
        /// what `dsh upgrade` asks the program on disk before it freezes anything.
        #[arg(long, hide = true, value_name = "FORMAT")]
        handover_check: Option<u32>,
    },
    /// What an editor launches: connect stdin/stdout to the daemon, starting it if needed.
    Acp {
        #[command(flatten)]
        at: Where,
        /// `login`: the same as `dsh login`. ACP's terminal auth appends its arguments
        /// to the agent's command in some clients, which makes `dsh acp login`.
        #[arg(hide = true, value_parser = ["login"])]
        then: Option<String>,
        /// Serve this connection with the `[[agents]]` entry NAME (another ACP agent,
        /// behind dsh's waterfall, executor and audit) instead of dsh's own agent.
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
    },
    /// One turn from a script: the prompt (argument or stdin) in a new session, the final
    /// message on stdout (or JSON lines with --json), questions answered by --ask (deny
    /// unless told), the exit status from the stop reason (docs/cli.md).
    Exec(cli::exec::ExecArgs),
    /// An interactive session at the terminal (a session like an editor's): streamed
    /// text, tool calls, questions answered at the prompt, `!command` and slash commands.
    Chat(cli::chat::ChatArgs),
    /// Ask for the model endpoint's API key on the terminal (not echoed), check it with one
    /// cheap request when the endpoint answers, and keep it 0600 in the config directory.
    Login {
        /// Config file (default: your own), for the endpoint to check the key against.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Remove the key `dsh login` stored.
    Logout {
        /// Config file (default: your own).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Show the daemon's connections, sessions and running tasks.
    Status {
        #[command(flatten)]
        at: Where,
    },
    /// Make the running daemon read its config again: rules and hooks at once, model
    /// settings from the next request; a config that fails leaves the old one in force.
    Reload {
        #[command(flatten)]
        at: Where,
    },
    /// Replace the running daemon's program with the dsh binary now on disk, in the same
    /// process: editors stay connected (through `dsh acp` too), sessions stay open,
    /// turns in flight finish first (`[daemon] upgrade_drain_secs`). A failure leaves the
    /// old program serving everything. Running background tasks are carried under the
    /// local executor; under the sandbox or ssh executor they refuse it.
    Upgrade {
        #[command(flatten)]
        at: Where,
    },
    /// The same as `dsh upgrade`: the daemon starts its program again, keeping every
    /// connection and session (for a daemon whose binary did not change).
    Restart {
        #[command(flatten)]
        at: Where,
    },
    /// Kill a background task and everything it started, whichever session owns it.
    Kill {
        /// The task's id (`bash-N`, as `dsh status` lists it); read as one here, so a
        /// text that is not a task id is refused before the daemon is asked.
        task_id: dsh::exec::TaskId,
        #[command(flatten)]
        at: Where,
    },
    /// Apply the state directory's `[state]` limits now (spill files by age and total
    /// size, rotated logs past the number kept) and print what was removed: through the
    /// running daemon when one answers (it knows which files running tasks write and
    /// which sessions it loaded), else directly on the state directory.
    Gc {
        /// Print what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        at: Where,
    },
    /// Stop the daemon gracefully (every task is killed).
    Stop {
        #[command(flatten)]
        at: Where,
    },
    /// Load a config file (or the built-in defaults), run the examples and tests its rules
    /// carry, and print the configuration in force as TOML, saying which files were read
    /// (and what the project file of the current directory adds, if it has one).
    CheckConfig {
        /// The config file; without it your own (~/.config/dsh/config.toml) when it
        /// exists, else the built-in defaults.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// The ssh executor's remote end: runs commands for the daemon that started it
    /// over ssh, speaking JSON-RPC on stdin/stdout, until stdin ends (not for people).
    #[command(hide = true)]
    ExecHelper {
        /// Where its spill files and task counter live (on the remote host).
        #[arg(long)]
        state_dir: PathBuf,
    },
    /// Pin what dsh runs for a trusted project: its `.dsh/config.toml`, its
    /// `.claude/settings.json` and every script their hooks (or yours, through
    /// `$CLAUDE_PROJECT_DIR`) name inside it, by content. Prints what it pinned; while
    /// any of it differs, the project's calls are refused (review, then run this again).
    Trust {
        /// The project's directory (default: the current directory).
        dir: Option<PathBuf>,
        #[command(flatten)]
        at: Where,
    },
    /// Hooks without a daemon: import Claude Code's, test a config's.
    Hooks {
        #[command(subcommand)]
        command: HooksCommand,
    },
    /// Ask the permission policy about a command line; nothing runs.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Subcommand)]
enum HooksCommand {
    /// Print the `[[hooks.command]]` TOML equivalent to Claude Code's hooks in PATH: a
    /// settings file (`~/.claude/settings.json`) or a plugin folder (`hooks/hooks.json`);
    /// what has no dsh counterpart is listed as skipped.
    Import {
        /// The settings file or plugin folder.
        path: PathBuf,
    },
    /// Run the config's hooks of one event on one call, for real, in the current
    /// directory, without a daemon or a session: each hook's raw answer, its decision and
    /// time, and the decision they make together. Exit 0 allow, 1 deny, 2 ask, 3 a hook
    /// failed.
    Test {
        /// The config file (default: your own, else the built-in defaults).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The event: pre_tool (default), post_tool, permission, prompt.
        #[arg(long, default_value = "pre_tool")]
        event: String,
        /// The call's tool.
        #[arg(long, default_value = "bash")]
        tool: String,
        /// A file holding the whole input instead: `{"tool", "arguments", "result":
        /// {"text", "isError"}, "prompt"}` (each optional).
        #[arg(long, value_name = "FILE")]
        input: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// The bash command line (for another tool: its arguments as JSON; for a prompt:
        /// the prompt), after `--`.
        #[arg(last = true)]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Show the decision a bash call of COMMAND gets, and per segment what decided it;
    /// with `--tool network`, the decision a sandboxed command's connection to
    /// HOST[:PORT] (port 443 if none) gets.
    Explain {
        /// The tool of the call: `bash` (the default), `network` for a connection, or a
        /// file tool (`read_file`, `edit_file`, `write_file`) on a path.
        #[arg(long, value_parser = ["bash", "network", "read_file", "edit_file", "write_file"],
              default_value = "bash")]
        tool: String,
        /// The config file whose rules judge (default: your own, else the built-in defaults).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Judge as a session working in DIR would be, with its project's
        /// `.dsh/config.toml` (default: the current directory).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// The session mode (default: the config's default_mode).
        #[arg(long, value_parser = ["ask", "auto", "read-only"])]
        mode: Option<String>,
        /// An "allow always" grant of the session, as a command prefix (repeatable). The
        /// user's own grants (`grants.json` in the state directory) apply too, as in the daemon.
        #[arg(long = "grant", value_name = "PREFIX")]
        grants: Vec<String>,
        /// The state directory whose `grants.json` holds the user's "always" answers, as
        /// `dsh serve --state-dir` (default: from config, else $XDG_STATE_HOME/dsh).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// The call's `sandbox` argument: `off` asks to run it outside the sandbox, which
        /// under `[exec] kind = "sandbox"` only a rule naming the command allows unasked.
        #[arg(long, value_parser = ["off"], requires = "justification")]
        sandbox: Option<String>,
        /// The call's `justification`, with `--sandbox off`.
        #[arg(long, requires = "sandbox")]
        justification: Option<String>,
        /// Print the judgement as JSON (the shape is in the README).
        #[arg(long)]
        json: bool,
        /// The command line, after `--` (with `--tool network`: HOST[:PORT]; with a file
        /// tool: the path).
        #[arg(required = true, last = true)]
        command: Vec<String>,
    },
    /// Judge every call of an audit log again under a candidate config (with the mode and
    /// grants each was judged with) and show the calls whose decision changes.
    Replay {
        /// The audit log: the state directory, or its `audit.jsonl` (either reads the
        /// rotated `audit.jsonl.N` first, oldest first), or any one file.
        #[arg(long)]
        audit: PathBuf,
        /// The candidate config (default: your own, else the built-in defaults).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Also run the candidate's pre_tool hooks on each call (for real, in the current
        /// directory; the tool itself never runs) and count what they say.
        #[arg(long)]
        hooks: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Exit 1 when a call would be allowed more than before (`loosen`) or when any
        /// decision changes (`change`).
        #[arg(long, value_parser = ["loosen", "change"])]
        fail_on: Option<String>,
        /// Only the calls of this batch (`dsh exec --prompts` prints its run id).
        #[arg(long, value_name = "ID")]
        run: Option<dsh::policy::audit::RunId>,
    },
    /// The user's own "always" answers (`[permissions] remember = "user"`), which apply
    /// to every session; `--revoke PREFIX` removes one.
    Grants {
        /// Remove the grant or rejection of this command prefix (`git push`).
        #[arg(long, value_name = "PREFIX")]
        revoke: Option<String>,
        #[command(flatten)]
        at: Where,
    },
    /// Where the shadows (hooks with `enforce = false`, `[permissions] shadow` rules)
    /// would have decided otherwise than what was enforced, from an audit log.
    ShadowReport {
        /// The audit log, as for `replay` (default: the default state directory's,
        /// rotated files included).
        #[arg(long)]
        audit: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Whether the command prints a report a person may pipe into `head` or `less`. Those
/// end quietly when the reader goes, as Unix tools do (SIGPIPE's default), rather than
/// panicking in `println!` on EPIPE. Only these: the daemon and the connecting commands
/// (`serve`, `acp`, `exec`, `chat`...) keep Rust's ignored SIGPIPE, so a vanished peer is
/// an error they handle, never a death.
fn prints_a_report(command: &Command) -> bool {
    matches!(
        command,
        Command::Policy { .. }
            | Command::CheckConfig { .. }
            | Command::Status { .. }
            | Command::Trust { .. }
    )
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if prints_a_report(&cli.command) {
        // SAFETY: setting a signal's disposition to its default before any thread is
        // started; no handler runs.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let result = match cli.command {
        Command::Exec(args) if args.prompts.is_some() => return cli::batch::run(args),
        Command::Exec(args) => return cli::exec::run(args),
        Command::Chat(args) => return cli::chat::run(args),
        Command::CheckConfig { config } => cli::check_config::check_config(config.as_deref()),
        Command::Hooks {
            command: HooksCommand::Import { path },
        } => cli::hooks::import_hooks(&path),
        Command::Hooks {
            command:
                HooksCommand::Test {
                    config,
                    event,
                    tool,
                    input,
                    json,
                    command,
                },
        } => {
            return cli::hooks::test_hooks(
                config.as_deref(),
                &event,
                tool,
                input.as_deref(),
                json,
                &command,
            );
        }
        Command::Policy {
            command: PolicyCommand::ShadowReport { audit, json },
        } => cli::policy::shadow_report(audit, json),
        Command::Policy {
            command: PolicyCommand::Grants { revoke, at },
        } => runtime().and_then(|rt| rt.block_on(cli::policy::user_grants(at, revoke))),
        Command::Policy {
            command:
                PolicyCommand::Replay {
                    audit,
                    config,
                    hooks,
                    json,
                    fail_on,
                    run,
                },
        } => {
            return cli::policy::replay(
                &audit,
                config.as_deref(),
                hooks,
                json,
                fail_on.as_deref(),
                run.as_ref(),
            );
        }
        Command::Policy {
            command:
                PolicyCommand::Explain {
                    tool,
                    config,
                    cwd,
                    mode,
                    grants,
                    state_dir,
                    sandbox,
                    justification,
                    json,
                    command,
                },
        } => cli::policy::explain(
            config.as_deref(),
            state_dir,
            cwd,
            mode.as_deref(),
            &grants,
            cli::policy::Explained {
                tool: &tool,
                text: &command.join(" "),
                leave_sandbox: sandbox.and(justification),
            },
            json,
        ),
        Command::Serve {
            at,
            handover_check: Some(format),
            ..
        } => return cli::serve::check_handover(&at, format),
        Command::Serve {
            at,
            stdio,
            idle_exit,
            handover_check: None,
        } => cli::serve::run(at, stdio, idle_exit),
        Command::Login { config }
        | Command::Acp {
            at: Where { config, .. },
            then: Some(_),
            ..
        } => runtime().and_then(|rt| rt.block_on(cli::login::login(config.as_deref()))),
        Command::Logout { config } => cli::login::logout(config.as_deref()),
        Command::Acp {
            at,
            then: None,
            agent,
        } => dsh::exec::lineage::untraceable()
            .and_then(|()| runtime())
            .and_then(|rt| {
                let result = rt.block_on(cli::acp::acp(at, agent));
                // The stdin reader sits in a blocking read that only the editor can end;
                // do not wait for it once either side has closed.
                rt.shutdown_background();
                result
            }),
        Command::ExecHelper { state_dir } => dsh::exec::lineage::untraceable()
            .and_then(|()| runtime())
            .and_then(|rt| {
                let result = rt.block_on(dsh::exec::helper::serve_stdio(state_dir));
                // The stdin reader may still sit in a blocking read: do not wait for it.
                rt.shutdown_background();
                result
            }),
        Command::Trust { dir, at } => cli::trust::trust(dir, at),
        Command::Status { at } => runtime().and_then(|rt| rt.block_on(cli::status::status(at))),
        Command::Stop { at } => runtime().and_then(|rt| rt.block_on(cli::stop::stop(at))),
        Command::Gc { dry_run, at } => {
            runtime().and_then(|rt| rt.block_on(cli::gc::gc(at, dry_run)))
        }
        Command::Reload { at } => runtime().and_then(|rt| rt.block_on(cli::reload::reload(at))),
        Command::Upgrade { at } | Command::Restart { at } => {
            runtime().and_then(|rt| rt.block_on(cli::upgrade::upgrade(at)))
        }
        Command::Kill { task_id, at } => {
            runtime().and_then(|rt| rt.block_on(cli::kill::kill(at, task_id)))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("dsh: {message}");
            ExitCode::FAILURE
        }
    }
}
