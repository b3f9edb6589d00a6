//! `dsh status`.

use crate::cli::reach::{Where, ask_daemon};

pub(crate) async fn status(at: Where) -> Result<(), String> {
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
