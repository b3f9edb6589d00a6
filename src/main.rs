//! The `dsh` command line: the daemon (`serve`), the editor's launcher (`acp`),
//! and `status` / `stop` for people.

mod cli;

use cli::reach::{Where, connect_or_start, runtime, warn_if_daemon_is_older};

use clap::{Parser, Subcommand};
use dsh::config::Config;
use dsh::daemon::Daemon;
use dsh::rpc::client::{ClientError, DaemonClient};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Exec(args) => return cli::exec::run(args),
        Command::Chat(args) => return cli::chat::run(args),
        Command::CheckConfig { config } => check_config(config.as_deref()),
        Command::Hooks {
            command: HooksCommand::Import { path },
        } => import_hooks(&path),
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
            return test_hooks(
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
        } => shadow_report(audit, json),
        Command::Policy {
            command: PolicyCommand::Grants { revoke, at },
        } => runtime().and_then(|rt| rt.block_on(user_grants(at, revoke))),
        Command::Policy {
            command:
                PolicyCommand::Replay {
                    audit,
                    config,
                    hooks,
                    json,
                    fail_on,
                },
        } => return replay(&audit, config.as_deref(), hooks, json, fail_on.as_deref()),
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
        } => explain(
            config.as_deref(),
            state_dir,
            cwd,
            mode.as_deref(),
            &grants,
            Explained {
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
        } => return check_handover(&at, format),
        Command::Serve {
            at,
            stdio,
            idle_exit,
            handover_check: None,
        } => {
            // Untraceable before the hand-over is read (an `execve` made this process
            // traceable again, and the hand-over may hold an MCP server's secrets).
            let untraceable = dsh::exec::lineage::untraceable();
            // Before any thread: the hand-over's variable leaves the environment here.
            let handover = dsh::upgrade::take();
            dsh::program::remember(
                handover
                    .as_ref()
                    .and_then(|h| h.as_ref().ok())
                    .and_then(|h| h.program.as_ref())
                    .map(|p| p.0.as_slice()),
            );
            limit_malloc_arenas();
            default_path();
            untraceable.and_then(|()| {
                // The main thread forks every command and is the one an upgrade executes
                // on (dsh::exec::forker); the runtime runs on a thread beside it.
                let (jobs, forks) = std::sync::mpsc::channel();
                dsh::exec::forker::install(jobs);
                let daemon = std::thread::Builder::new()
                    .name("dsh-runtime".into())
                    .spawn(move || {
                        let result = runtime().and_then(|rt| {
                            let result = rt.block_on(serve(at, stdio, idle_exit, handover));
                            // `serve` returns once the daemon has stopped and waited for
                            // all of its work; only the stdin reader of `--stdio` may
                            // still sit in a blocking read that only the editor can end,
                            // and it must not keep the process.
                            rt.shutdown_background();
                            result
                        });
                        dsh::exec::forker::stop();
                        result
                    })
                    .map_err(|e| format!("cannot start the daemon's thread: {e}"))?;
                dsh::exec::forker::serve(forks);
                daemon
                    .join()
                    .unwrap_or_else(|_| Err("the daemon's thread failed".into()))
            })
        }
        Command::Login { config }
        | Command::Acp {
            at: Where { config, .. },
            then: Some(_),
        } => runtime().and_then(|rt| rt.block_on(login(config.as_deref()))),
        Command::Logout { config } => logout(config.as_deref()),
        Command::Acp { at, then: None } => dsh::exec::lineage::untraceable()
            .and_then(|()| runtime())
            .and_then(|rt| {
                let result = rt.block_on(acp(at));
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
        Command::Trust { dir, at } => at.config().and_then(|config| {
            let dir = dir.unwrap_or_else(|| PathBuf::from("."));
            print!("{}", dsh::project::pins::trust(&dir, &config)?);
            Ok(())
        }),
        Command::Status { at } => runtime().and_then(|rt| rt.block_on(status(at))),
        Command::Stop { at } => runtime().and_then(|rt| rt.block_on(stop(at))),
        Command::Gc { dry_run, at } => runtime().and_then(|rt| rt.block_on(gc(at, dry_run))),
        Command::Reload { at } => runtime().and_then(|rt| rt.block_on(reload(at))),
        Command::Upgrade { at } | Command::Restart { at } => {
            runtime().and_then(|rt| rt.block_on(upgrade(at)))
        }
        Command::Kill { task_id, at } => runtime().and_then(|rt| rt.block_on(kill(at, task_id))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("dsh: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `dsh login` (and `dsh acp login`): prints what was done.
async fn login(config: Option<&Path>) -> Result<(), String> {
    let (config, _) = Config::load_layered(config).map_err(|e| e.to_string())?;
    println!("{}", dsh::login::login(&config.model).await?);
    Ok(())
}

/// `dsh logout`: prints what was done.
fn logout(config: Option<&Path>) -> Result<(), String> {
    let (config, _) = Config::load_layered(config).map_err(|e| e.to_string())?;
    println!("{}", dsh::login::logout(&config.model)?);
    Ok(())
}

/// A daemon started with no PATH at all (`env -i`, as the ACP Registry's check starts
/// agents) gives its commands the usual system one: bash's own fallback when PATH is
/// unset ends in `.`, which would run a program of the command's directory by name.
fn default_path() {
    if std::env::var_os("PATH").is_none() {
        // SAFETY: called first thing in main for `serve`, before any thread exists.
        unsafe {
            std::env::set_var(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
        };
    }
}

/// A long-lived daemon must give memory back after a burst. glibc gives every
/// thread that contends for the heap an arena of its own (up to 8 per core), and the
/// daemon's threads come and go (tokio's blocking pool, the shell parsers, the
/// /proc scanner): memory freed in one arena is not reused by another, so RSS
/// ratchets up under load and stays there (the 60 s soak test grew 12 % once with
/// the default). Two arenas: one per core of the machines dsh is measured on.
fn limit_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; called before any thread
    // but main exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

fn check_config(path: Option<&Path>) -> Result<(), String> {
    let (config, read) = Config::load_layered(path).map_err(|e| e.to_string())?;
    check_rules(&config)?;
    print!("{}", config.to_toml()?);
    match &read {
        Some(file) => println!("# read: {}", file.display()),
        None => println!("# read: no config file (the built-in defaults)"),
    }
    let here = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    if let Some(project) = project_of(&here, &config) {
        println!(
            "# project file for sessions in {}: {} ({}, {} rule(s) in force, {} hook(s))",
            here.display(),
            project.file.display(),
            if project.trusted {
                "trusted"
            } else {
                "untrusted"
            },
            project.permissions.rules.len(),
            project.hooks.len()
        );
        for warning in &project.warnings {
            println!("#   ignored: {warning}");
        }
    }
    println!(
        "# state_dir in force: {}",
        config.exec.state_dir().display()
    );
    Ok(())
}

/// The project file a session working in `cwd` would get, read against `user`.
fn project_of(cwd: &Path, user: &Config) -> Option<dsh::project::Project> {
    dsh::project::find_for(cwd).map(|file| dsh::project::load(&file, user))
}

/// Loads a config (the named file, else the user's own when it exists) and refuses it
/// when an example or test its rules carry fails: what `dsh serve` and the policy
/// commands run with.
fn load_checked(path: Option<&Path>) -> Result<Config, String> {
    let (config, _) = Config::load_layered(path).map_err(|e| e.to_string())?;
    check_rules(&config)?;
    Ok(config)
}

/// Runs the examples and tests the permission rules carry; a daemon never runs rules that
/// fail their own examples.
fn check_rules(config: &Config) -> Result<(), String> {
    let mut failed = dsh::policy::check_config(&config.permissions);
    failed.extend(dsh::policy::check_network(&config.exec.sandbox.network));
    if failed.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = failed.iter().map(|f| format!("  {f}")).collect();
    Err(format!(
        "the permission rules' examples or tests fail:\n{}",
        lines.join("\n")
    ))
}

/// The call `dsh policy explain` judges: a bash command line (with its `sandbox: "off"`
/// and `justification` when `leave_sandbox` gives one), or for `network` HOST[:PORT].
struct Explained<'a> {
    tool: &'a str,
    text: &'a str,
    leave_sandbox: Option<String>,
}

/// A file tool's call for `dsh policy explain`.
struct ExplainedFile<'a> {
    tool: &'a str,
    path: &'a str,
    leave_sandbox: Option<&'a str>,
}

/// `dsh policy explain --tool read_file|edit_file|write_file -- PATH`: the policy's
/// judgement and, under the sandbox, which entry of its layout decides the file
/// (issue 39), as the daemon would for a session in `cwd`.
fn explain_file(
    config: &dsh::config::Config,
    cwd: &Path,
    call: &ExplainedFile<'_>,
    (policy, mode, grants): (
        &dsh::policy::Policy,
        dsh::config::Mode,
        &[dsh::policy::Grant],
    ),
    json: bool,
) -> Result<(), String> {
    let mut arguments = serde_json::json!({ "path": call.path });
    if let Some(justification) = call.leave_sandbox {
        arguments["sandbox"] = "off".into();
        arguments["justification"] = justification.into();
    }
    let sandbox = dsh::tools::bash::SandboxTerms::of(&config.exec);
    let roots = vec![cwd.to_path_buf()];
    let at = dsh::hooks::rules::SessionPlace::new(
        cwd.to_path_buf(),
        roots.clone(),
        sandbox.as_ref().map(|t| t.writable.as_slice()),
    );
    let judged = policy.judge_in(call.tool, &arguments, mode, grants, Some(&at.place(false)));
    let intent = if dsh::tools::files::writes(call.tool) {
        dsh::exec::FileIntent::Write
    } else {
        dsh::exec::FileIntent::Read
    };
    let path = dsh::tools::files::resolve(cwd, call.path);
    let containment = match sandbox {
        Some(_) => Some(dsh::exec::sandbox::explain_file(
            &config.exec,
            &roots,
            &path,
            intent,
        )?),
        None => None,
    };
    if json {
        let value = serde_json::json!({
            "tool": call.tool,
            "path": path,
            "mode": mode.id(),
            "judgement": judged,
            "containment": containment,
        });
        println!("{value:#}");
        return Ok(());
    }
    print!(
        "{}",
        dsh::policy::explain::render_file(call.tool, &path.to_string_lossy(), mode.id(), &judged)
    );
    match (&containment, &judged.escalation) {
        (Some(c), None) => println!("  sandbox: {c}"),
        (Some(c), Some(_)) => println!("  sandbox (left if allowed): {c}"),
        (None, _) => println!("  sandbox: none ([exec] kind is not \"sandbox\")"),
    }
    Ok(())
}

/// `dsh policy explain`: the policy's judgement of one call, with nothing run, judged as
/// the policy hook judges it in a session working in `cwd`.
fn explain(
    path: Option<&Path>,
    state_dir: Option<PathBuf>,
    cwd: Option<PathBuf>,
    mode: Option<&str>,
    grants: &[String],
    call: Explained<'_>,
    json: bool,
) -> Result<(), String> {
    let Explained {
        tool,
        text: command,
        leave_sandbox,
    } = call;
    let mut config = load_checked(path)?;
    if let Some(dir) = state_dir {
        config.exec.state_dir = Some(dir);
    }
    // The user's "always" answers, as the daemon reads them at its start.
    let user = dsh::registry::UserGrants::of_config(&config)?;
    let cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    // Judged as a session there is: the user's rules and what its project adds.
    let project = project_of(&cwd, &config);
    if let Some(project) = &project {
        config.permissions = project.permissions.clone();
        if let Some(mode) = project.default_mode {
            config.permissions.default_mode = mode;
        }
    }
    let mode = match mode {
        Some(id) => dsh::config::Mode::from_id(id).ok_or_else(|| format!("unknown mode {id}"))?,
        None => config.permissions.default_mode,
    };
    // As `dsh policy grants` shows them: `git push`, or `network HOST` for a host; then
    // the user's, as a session holding these grants is judged.
    let grants: Vec<dsh::policy::Grant> = grants
        .iter()
        .flat_map(|g| dsh::policy::Grant::named(g))
        .collect();
    let grants = user.applied_to(&grants);
    let policy = dsh::policy::Policy::of_config(&config);
    if tool == dsh::policy::NETWORK_TOOL {
        let arguments = dsh::policy::network::explain_arguments(command)?;
        let judged = policy.judge(tool, &arguments, mode, &grants);
        let target = dsh::policy::network::target(
            arguments["host"].as_str().unwrap_or_default(),
            arguments["port"].as_u64().unwrap_or_default() as u16,
        );
        if json {
            let value = serde_json::json!({
                "tool": tool,
                "host": arguments["host"],
                "port": arguments["port"],
                "mode": mode.id(),
                "judgement": judged,
            });
            println!("{value:#}");
        } else {
            print!(
                "{}",
                dsh::policy::explain::render_network(&target, mode.id(), &judged)
            );
        }
        return Ok(());
    }
    if dsh::tools::files::is_file_tool(tool) {
        let explained = ExplainedFile {
            tool,
            path: command,
            leave_sandbox: leave_sandbox.as_deref(),
        };
        return explain_file(&config, &cwd, &explained, (&policy, mode, &grants), json);
    }
    let mut arguments = serde_json::json!({ "command": command });
    if let Some(justification) = &leave_sandbox {
        arguments["sandbox"] = "off".into();
        arguments["justification"] = justification.as_str().into();
    }
    let sandbox = dsh::tools::bash::SandboxTerms::of(&config.exec);
    let at = dsh::hooks::rules::SessionPlace::new(
        cwd.clone(),
        vec![cwd.clone()],
        sandbox.as_ref().map(|t| t.writable.as_slice()),
    );
    let judged = policy.judge_in("bash", &arguments, mode, &grants, Some(&at.place(false)));
    let warnings = project
        .as_ref()
        .map(|p| p.warnings.clone())
        .unwrap_or_default();
    if json {
        let mut value = serde_json::json!({
            "command": command,
            "mode": mode.id(),
            "judgement": judged,
        });
        if let Some(project) = &project {
            value["project"] = project.file.to_string_lossy().into_owned().into();
            if !warnings.is_empty() {
                value["warnings"] = warnings.into();
            }
        }
        println!("{value:#}");
    } else {
        print!(
            "{}",
            dsh::policy::explain::render(command, mode.id(), &judged)
        );
        if leave_sandbox.is_some() && judged.escalation.is_none() {
            println!(
                "  sandbox \"off\" changes nothing: {}",
                if sandbox.is_some() {
                    "the justification is blank"
                } else {
                    "commands run in no sandbox ([exec] kind is not \"sandbox\")"
                }
            );
        }
        if let Some(project) = &project {
            println!("project: {}", project.file.display());
        }
        for warning in &warnings {
            println!("  ignored: {warning}");
        }
    }
    Ok(())
}

/// The audit lines `path` names, oldest first: a state directory or its live
/// `audit.jsonl` brings the rotated files before it (`state_dir::rotate::in_order`).
fn read_audit(path: &Path) -> Result<dsh::state_dir::rotate::Concatenated, String> {
    let files = dsh::state_dir::rotate::in_order(path, dsh::state_dir::AUDIT_LOG);
    dsh::state_dir::rotate::Concatenated::read(&files)
}

/// Where line `line` of a rotated set's text is: its file and its own line.
fn place_in(audit: &dsh::state_dir::rotate::Concatenated, line: usize) -> (Option<PathBuf>, usize) {
    match audit.position(line) {
        Some((file, own)) => (Some(file), own),
        None => (None, line),
    }
}

/// `dsh policy shadow-report`.
fn shadow_report(audit: Option<PathBuf>, json: bool) -> Result<(), String> {
    let path = audit.unwrap_or_else(|| Config::default().exec.state_dir());
    let audit = read_audit(&path)?;
    let mut report = dsh::policy::replay::shadow_report(&audit.text)
        .map_err(|u| format!("{}: {}", audit.locate(u.line), u.why))?;
    if audit.files() > 1 {
        for d in &mut report.differences {
            (d.file, d.line) = place_in(&audit, d.line);
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", dsh::policy::replay::render_shadows(&report));
    }
    Ok(())
}

/// `dsh policy replay`: exit 0, 1 when `--fail-on` matches, 2 when the input cannot be
/// read (the line named).
fn import_hooks(path: &Path) -> Result<(), String> {
    use dsh::config::claude_settings;
    let imported = claude_settings::read(path)?;
    print!("{}", claude_settings::to_toml(&imported, path)?);
    Ok(())
}

fn test_hooks(
    config: Option<&Path>,
    event: &str,
    tool: String,
    input: Option<&Path>,
    json: bool,
    command: &[String],
) -> ExitCode {
    use dsh::hooks::tester::{TestInput, run};
    let prepare = || -> Result<(dsh::config::Config, TestInput), String> {
        let (config, _) = Config::load_layered(config).map_err(|e| e.to_string())?;
        let event: dsh::config::HookEvent =
            serde_json::from_value(serde_json::Value::String(event.to_string()))
                .map_err(|_| format!("unknown event {event}"))?;
        let text = command.join(" ");
        let mut test = TestInput {
            event,
            arguments: match tool.as_str() {
                "bash" => serde_json::json!({"command": text, "description": "dsh hooks test"}),
                _ if text.trim().is_empty() => serde_json::json!({}),
                _ => serde_json::from_str(&text)
                    .map_err(|e| format!("the arguments of {tool} must be JSON: {e}"))?,
            },
            tool,
            result: None,
            prompt: (event == dsh::config::HookEvent::Prompt).then_some(text),
        };
        if let Some(file) = input {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Full {
                tool: Option<String>,
                arguments: Option<serde_json::Value>,
                result: Option<Result_>,
                prompt: Option<String>,
            }
            #[derive(serde::Deserialize)]
            #[serde(rename_all = "camelCase")]
            struct Result_ {
                text: String,
                #[serde(default)]
                is_error: bool,
            }
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let full: Full =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            test.tool = full.tool.unwrap_or(test.tool);
            test.arguments = full.arguments.unwrap_or(test.arguments);
            test.prompt = full.prompt.or(test.prompt);
            test.result = full.result.map(|r| dsh::hooks::waterfall::ToolOutput {
                text: r.text,
                is_error: r.is_error,
                ..Default::default()
            });
        }
        Ok((config, test))
    };
    let outcome = prepare().and_then(|(config, test)| {
        let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
        Ok(runtime()?.block_on(run(&config, test, &cwd)))
    });
    let report = match outcome {
        Ok(report) => report,
        Err(message) => {
            eprintln!("dsh: {message}");
            return ExitCode::from(3);
        }
    };
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("dsh: {e}");
                return ExitCode::from(3);
            }
        }
    } else {
        print!("{}", report.render());
    }
    ExitCode::from(report.exit_code())
}

fn replay(
    audit: &Path,
    config: Option<&Path>,
    hooks: bool,
    json: bool,
    fail_on: Option<&str>,
) -> ExitCode {
    let run = || -> Result<dsh::policy::replay::Report, String> {
        let config = load_checked(config)?;
        let files = read_audit(audit)?;
        let text = &files.text;
        let report = if hooks {
            let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
            runtime()?.block_on(dsh::hooks::replay::replay_with_hooks(text, &config, &cwd))
        } else {
            let network = &config.exec.sandbox.network;
            let policy = dsh::policy::Policy::of_config(&config);
            dsh::policy::replay::audited_calls(text).map(|audited| {
                // A call judged with a project's rules is judged with them again, on top
                // of the candidate's (the project file as it is now).
                let projects: std::collections::HashMap<_, _> = audited
                    .calls
                    .iter()
                    .filter_map(|c| c.project.clone())
                    .map(|file| {
                        let project = dsh::project::load(&file, &config);
                        let policy = dsh::policy::Policy::new(&project.permissions);
                        (file, policy.with_network(network))
                    })
                    .collect();
                let policy_of = |call: &dsh::policy::replay::AuditedCall| {
                    call.project
                        .as_ref()
                        .and_then(|file| projects.get(file))
                        .unwrap_or(&policy)
                };
                dsh::policy::replay::replay_calls(
                    &audited,
                    config.permissions.default_mode,
                    policy_of,
                )
            })
        };
        let mut report = report.map_err(|u| format!("{}: {}", files.locate(u.line), u.why))?;
        if files.files() > 1 {
            for c in &mut report.changes {
                (c.file, c.line) = place_in(&files, c.line);
            }
        }
        Ok(report)
    };
    let report = match run() {
        Ok(report) => report,
        Err(message) => {
            eprintln!("dsh: {message}");
            return ExitCode::from(2);
        }
    };
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("dsh: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        print!("{}", dsh::policy::replay::render(&report));
    }
    let failed = match fail_on {
        Some("loosen") => report.loosens(),
        Some("change") => !report.changes.is_empty(),
        _ => false,
    };
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Logs go to stderr and `state_dir/daemon.log`, never to a protocol stream. The log
/// rotates by `[state] log_max_bytes` and `log_keep`.
fn init_logging(state_dir: &Path, state: &dsh::config::StateConfig) {
    use dsh::state_dir::rotate::{RotatingFile, SharedLog};
    use tracing_subscriber::fmt::writer::MakeWriterExt;
    let filter = tracing_subscriber::EnvFilter::try_from_env("DSH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let file = dsh::fsutil::ensure_private_dir(state_dir)
        .and_then(|()| {
            RotatingFile::open(
                &state_dir.join(dsh::state_dir::DAEMON_LOG),
                dsh::state_dir::log_rotation(state),
            )
        })
        .ok();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    match file {
        Some(file) => builder
            .with_writer(std::io::stderr.and(SharedLog::new(file)))
            .init(),
        None => builder.with_writer(std::io::stderr).init(),
    }
}

/// Runs the daemon; with a `handover`, as the program `dsh upgrade` started in place
/// of the one before (dsh::upgrade), which it gives everything back to when it cannot
/// take over.
async fn serve(
    at: Where,
    stdio: bool,
    idle_exit: bool,
    handover: Option<Result<dsh::upgrade::Handover, String>>,
) -> Result<(), String> {
    let handover = handover.transpose()?;
    let config = match &handover {
        // Given back by a program that could not take over: the config that was in
        // force, not the file (which may be what failed).
        Some(h) if h.rolled_back.is_some() => {
            Config::from_toml(&h.config, Path::new("(handed back)")).map_err(|e| e.to_string())
        }
        _ => at.config(),
    };
    let daemon = match config.and_then(|config| build_daemon(&at, config, idle_exit)) {
        Ok(daemon) => daemon,
        Err(why) => {
            return Err(match handover {
                Some(handover) if handover.rolled_back.is_none() => {
                    dsh::upgrade::roll_back(handover, why)
                }
                _ => why,
            });
        }
    };
    match handover {
        Some(handover) => daemon.resume_socket(&at.socket(), handover).await,
        None if stdio => {
            daemon.serve_stdio().await;
            Ok(())
        }
        None => daemon.serve_socket(&at.socket()).await,
    }
}

/// The daemon as its config and arguments say.
fn build_daemon(at: &Where, config: Config, idle_exit: bool) -> Result<Daemon, String> {
    check_rules(&config)?;
    init_logging(&config.exec.state_dir(), &config.state);
    // What a command leaves behind becomes the daemon's child: found without a
    // scan of /proc after every command (dsh::exec::children).
    if !dsh::exec::children::adopt_orphans() {
        // E7 (exec::lineage) knows a command's detached descendants only because
        // they stay below the daemon: without that, refuse rather than hold less.
        return Err(
            "dsh serve must be the subreaper of what it runs (E7: a command must never drive \
             its daemon), and this kernel refused it (see daemon.log)"
                .into(),
        );
    }
    let source: dsh::acp::ConfigSource = {
        let at = at.clone();
        std::sync::Arc::new(move || at.config())
    };
    let idle = idle_exit.then(|| Duration::from_secs(config.daemon.idle_exit_secs));
    Ok(Daemon::build(config, &at.socket())?
        .reload_from(source)
        .idle_exit(idle))
}

/// `dsh serve ... --handover-check FORMAT` (see `dsh::upgrade::check`): exit 0 when this
/// program reads the format and the config as the daemon would.
fn check_handover(at: &Where, format: u32) -> ExitCode {
    let checked = dsh::upgrade::reads_format(format)
        .and_then(|()| at.config())
        .and_then(|config| check_rules(&config));
    match checked {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("{why}");
            ExitCode::from(2)
        }
    }
}

/// `dsh upgrade` / `dsh restart`: asks the daemon to hand over, then asks on the same
/// connection how it went; that question waits (unread, through the freeze) for the
/// program that serves next to answer it.
async fn upgrade(at: Where) -> Result<(), String> {
    let client = DaemonClient::connect(&at.socket())
        .await
        .map_err(|e| e.to_string())?;
    let started = client
        .request("_dsh/upgrade", serde_json::json!({}))
        .await
        .map_err(|e| format!("upgrade refused: {e}"))?;
    let started: dsh::acp::UpgradeStarted = serde_json::from_value(started)
        .map_err(|e| format!("the daemon's answer is not what this dsh reads: {e}"))?;
    let outcome = client
        .request("_dsh/upgrade/outcome", serde_json::json!({}))
        .await
        .map_err(|e| format!("the daemon did not say how the upgrade went: {e}"))?;
    let outcome: Option<dsh::acp::UpgradeOutcome> = serde_json::from_value(outcome)
        .map_err(|e| format!("the daemon's answer is not what this dsh reads: {e}"))?;
    match outcome {
        Some(dsh::acp::UpgradeOutcome::Upgraded { from_version }) => {
            let status = client
                .request("_dsh/status", serde_json::json!({}))
                .await
                .map_err(|e| e.to_string())?;
            println!(
                "upgraded: dsh {from_version} -> {} (pid {}); connections and sessions kept",
                status["version"].as_str().unwrap_or("?"),
                status["pid"]
            );
            Ok(())
        }
        Some(dsh::acp::UpgradeOutcome::RolledBack { reason }) => Err(format!(
            "the upgrade from {} failed and the daemon serves on as it was: {reason}",
            started.from_version
        )),
        None => Err("the daemon did not record an upgrade".into()),
    }
}

async fn acp(at: Where) -> Result<(), String> {
    let stream = connect_or_start(&at).await?;
    warn_if_daemon_is_older(&stream, &at.socket());
    // Editors start agents on pipes: hand them to the daemon and step out of the
    // path (`rpc::handover`); copy only when that cannot be done.
    match dsh::rpc::handover::offer(&stream).await {
        Ok(true) => {
            dsh::rpc::handover::wait_for_end(stream).await;
            return Ok(());
        }
        Ok(false) => {}
        Err(e) => return Err(format!("cannot hand the connection to the daemon: {e}")),
    }
    // Registered for reads only, as the daemon's side is (`rpc::socket`).
    let (mut from_daemon, mut to_daemon) = dsh::rpc::socket::split(stream)
        .map_err(|e| format!("cannot use the daemon's socket: {e}"))?;
    let (mut stdin, mut stdout) = dsh::rpc::stdio::stdio();
    let up = async {
        let _ = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        let _ = to_daemon.shutdown().await;
    };
    let down = async {
        let _ = tokio::io::copy(&mut from_daemon, &mut stdout).await;
        let _ = stdout.flush().await;
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
    Ok(())
}

/// One question to the daemon (`status`, `kill`...), on a connection of its own, for a
/// command that only reports what went wrong.
async fn ask_daemon(at: &Where, method: &str) -> Result<serde_json::Value, String> {
    ask_daemon_with(at, method, serde_json::json!({})).await
}

async fn ask_daemon_with(
    at: &Where,
    method: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, String> {
    ask_daemon_typed(at, method, params)
        .await
        .map_err(|e| e.to_string())
}

/// [`ask_daemon_with`] for a command that acts on why there was no answer (no daemon,
/// a daemon that went away, a refusal).
async fn ask_daemon_typed(
    at: &Where,
    method: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, ClientError> {
    DaemonClient::connect(&at.socket())
        .await?
        .request(method, params)
        .await
}

async fn status(at: Where) -> Result<(), String> {
    let answer = ask_daemon(&at, "_dsh/status").await?;
    let s: dsh::acp::StatusResponse = serde_json::from_value(answer)
        .map_err(|e| format!("the daemon's status is not what this dsh reads: {e}"))?;
    println!(
        "dsh {} (pid {}), executor {}, started {}, up {}s, {} connection(s)",
        s.version,
        s.pid,
        s.executor,
        s.started_at,
        s.uptime_ms / 1000,
        s.connections
    );
    let kinds = [
        ("spill", s.state.spill),
        ("sessions", s.state.sessions),
        ("logs", s.state.logs),
        ("audit", s.state.audit),
        ("other", s.state.other),
    ];
    let total: u64 = kinds.iter().map(|(_, k)| k.bytes).sum();
    println!(
        "state directory {}: {}",
        s.state_dir.display(),
        dsh::state_dir::retention::human_bytes(total)
    );
    for (kind, usage) in kinds {
        println!(
            "  {kind:<9}{} in {} file(s)",
            dsh::state_dir::retention::human_bytes(usage.bytes),
            usage.files
        );
    }
    println!("sessions: {}", s.sessions.len());
    for session in &s.sessions {
        println!(
            "  {}  {}  {}  mode {}{}",
            session.session_id,
            session.state,
            session.cwd.display(),
            session.mode,
            if session.closed {
                "  (closed)"
            } else if session.connected {
                ""
            } else {
                "  (no connection)"
            },
        );
    }
    println!("running tasks: {}", s.running_tasks.len());
    for task in &s.running_tasks {
        println!(
            "  {}  owner {}  {}{}{}",
            task.task_id,
            task.owner.clone().flatten().as_deref().unwrap_or("(none)"),
            if task.outside_sandbox {
                "(outside the sandbox)  "
            } else {
                ""
            },
            match task.proxied_connections {
                0 => String::new(),
                n => format!("({n} proxied connection(s) open)  "),
            },
            task.command,
        );
    }
    let checks = s.exit_checks;
    if checks.adopting {
        println!(
            "after command exits: {} cleanup scan(s) skipped, {} run (scans run while a \
             process that left its session is alive)",
            checks.skipped, checks.scanned
        );
    } else {
        println!("after command exits: the session scan runs every time (not a subreaper)");
    }
    Ok(())
}

/// `dsh gc [--dry-run]`: through the daemon when one answers; with none, directly on
/// the state directory (`state_dir::collect_alone`: the task records keep what running
/// tasks write, the sessions used in the last day what they name).
async fn gc(at: Where, dry_run: bool) -> Result<(), String> {
    let params = serde_json::json!({ "dryRun": dry_run });
    let (report, through) = match ask_daemon_typed(&at, "_dsh/state/gc", params).await {
        Ok(answer) => (
            serde_json::from_value::<dsh::state_dir::GcReport>(answer)
                .map_err(|e| format!("the daemon's answer is not what this dsh reads: {e}"))?,
            "by the running daemon",
        ),
        Err(ClientError::Io { .. }) => {
            let config = at.config()?;
            let state_dir = config.exec.state_dir();
            let report = tokio::task::spawn_blocking(move || {
                dsh::state_dir::collect_alone(&state_dir, &config.state, dry_run)
            })
            .await
            .map_err(|e| format!("the collection failed: {e}"))?;
            (
                report,
                "no daemon runs: applied to the state directory directly",
            )
        }
        Err(e) => return Err(e.to_string()),
    };
    let human = dsh::state_dir::retention::human_bytes;
    let verb = if dry_run { "would remove" } else { "removed" };
    for r in &report.removed {
        println!(
            "{verb} {} ({}; {})",
            r.path.display(),
            human(r.bytes),
            r.why
        );
    }
    println!(
        "{verb} {} file(s), {} (spill files: {} holding {}, {} kept in use; {through})",
        report.removed.len(),
        human(report.removed_bytes()),
        report.spill_files,
        human(report.spill_bytes),
        report.in_use,
    );
    Ok(())
}

async fn reload(at: Where) -> Result<(), String> {
    let answer = ask_daemon(&at, "_dsh/config/reload").await?;
    let done: dsh::acp::ReloadResponse = serde_json::from_value(answer)
        .map_err(|e| format!("the daemon's answer is not what this dsh reads: {e}"))?;
    println!("reloaded: policy version {}", done.policy_version);
    for section in done.restart_needed {
        println!("needs a restart to take effect: [{section}]");
    }
    Ok(())
}

/// `dsh policy grants [--revoke PREFIX]`: through the running daemon when one answers
/// (it holds the list in memory and is the file's writer), else from the file itself.
async fn user_grants(at: Where, revoke: Option<String>) -> Result<(), String> {
    if let Some(prefix) = revoke {
        let params = serde_json::json!({ "prefix": prefix });
        match ask_daemon_typed(&at, "_dsh/user/revoke", params).await {
            Ok(_) => {}
            Err(ClientError::Io { .. }) => {
                let state_dir = at.config()?.exec.state_dir();
                let grants = dsh::registry::UserGrants::open(&state_dir)?;
                let mut found = false;
                for grant in dsh::policy::Grant::named(&prefix) {
                    found |= grants.revoke(&grant)?;
                }
                if !found {
                    return Err(format!("no user grant or rejection of `{prefix}`"));
                }
            }
            Err(e) => return Err(e.to_string()),
        }
        println!("revoked: {prefix}");
        return Ok(());
    }
    let lists = match ask_daemon_typed(&at, "_dsh/user/grants", serde_json::json!({})).await {
        Ok(answer) => serde_json::from_value(answer)
            .map_err(|e| format!("the daemon's answer is not what this dsh reads: {e}"))?,
        Err(ClientError::Io { .. }) => {
            let state_dir = at.config()?.exec.state_dir();
            let grants = dsh::registry::UserGrants::open(&state_dir)?;
            dsh::acp::GrantsResponse::of(&grants.allowed(), &grants.rejected())
        }
        Err(e) => return Err(e.to_string()),
    };
    for prefix in lists.allowed {
        println!("allow  {prefix}");
    }
    for prefix in lists.rejected {
        println!("reject {prefix}");
    }
    Ok(())
}

async fn kill(at: Where, task_id: dsh::exec::TaskId) -> Result<(), String> {
    let answer = ask_daemon_with(
        &at,
        "_dsh/tasks/kill",
        serde_json::json!({ "taskId": task_id.to_string() }),
    )
    .await?;
    match answer["outcome"].as_str() {
        Some("killed") => println!("killed {task_id}"),
        _ => println!("{task_id} had already finished"),
    }
    Ok(())
}

async fn stop(at: Where) -> Result<(), String> {
    // Known first, so `stop` can return only once the process itself is gone.
    let pid = ask_daemon_with(&at, "_dsh/status", serde_json::json!({"stateUsage": false}))
        .await
        .ok()
        .and_then(|s| s["pid"].as_i64());
    match ask_daemon_typed(&at, "_dsh/stop", serde_json::json!({})).await {
        // The daemon may close the connection as it starts shutting down, before
        // its answer is written; the socket going away below is the real proof.
        Ok(_) | Err(ClientError::Closed) => {}
        Err(e) => return Err(e.to_string()),
    }
    // The daemon removes its socket as the last step of a clean shutdown.
    let socket = at.socket();
    let mut pause = Duration::from_millis(5);
    for _ in 0..400 {
        let running = pid.is_some_and(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|st| st.rfind(')').and_then(|i| st[i + 2..].chars().next()))
                .is_some_and(|state| state != 'Z' && state != 'X')
        });
        if !socket.exists() && !running {
            println!("dsh daemon stopped");
            return Ok(());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
    Err("the daemon did not finish shutting down in time".into())
}
