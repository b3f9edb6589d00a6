//! `dsh serve`: the daemon's bootstrap (the process's set-up before any thread, the
//! forking main thread and the runtime beside it), and `--handover-check`.

use crate::cli::check_config::check_rules;
use crate::cli::reach::{Where, runtime};
use dsh::config::Config;
use dsh::daemon::Daemon;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// `dsh serve`: the process is set up before any thread exists, then the main thread
/// forks commands while the daemon runs on a thread beside it.
pub(crate) fn run(at: Where, stdio: bool, idle_exit: bool) -> Result<(), String> {
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

/// A daemon started with no PATH at all (`env -i`, as the ACP Registry's check starts
/// agents) gives its commands the usual system one: bash's own fallback when PATH is
/// unset ends in `.`, which would run a program of the command's directory by name.
pub(crate) fn default_path() {
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
pub(crate) fn limit_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; called before any thread
    // but main exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Logs go to stderr and `state_dir/daemon.log`, never to a protocol stream. The log
/// rotates by `[state] log_max_bytes` and `log_keep`.
pub(crate) fn init_logging(state_dir: &Path, state: &dsh::config::StateConfig) {
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
pub(crate) async fn serve(
    at: Where,
    stdio: bool,
    idle_exit: bool,
    handover: Option<Result<dsh::upgrade::Handover, dsh::upgrade::HandoverError>>,
) -> Result<(), String> {
    let handover = handover.transpose().map_err(|e| e.to_string())?;
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
pub(crate) fn build_daemon(at: &Where, config: Config, idle_exit: bool) -> Result<Daemon, String> {
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
pub(crate) fn check_handover(at: &Where, format: u32) -> ExitCode {
    let checked = dsh::upgrade::reads_format(format)
        .map_err(|e| e.to_string())
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
