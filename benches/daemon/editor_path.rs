//! A1: the path an editor's messages really take. An editor does not connect to
//! the daemon's socket: it starts `dsh acp` (the command in its agent settings)
//! and speaks ACP on that process's stdin and stdout, which `dsh acp` hands to the
//! daemon (or, where it cannot, copies to and from the socket). Every other
//! scenario talks to the socket directly, so this one measures what that path adds: the same calls through `dsh acp` and
//! directly, interleaved, on one daemon; and, beside them, through a daemon an
//! editor starts on its own stdio (`dsh serve --stdio`). It reports; it judges
//! nothing (no issue sets a target for it).

use crate::*;
use serde_json::json;
use std::process::Stdio;

/// A1: no-process calls and `bash true` calls through `dsh acp` against the same
/// calls on the socket.
pub(crate) async fn a1(env: &Env) -> Res<Outcome> {
    let n = env.counts.b1_calls;
    let daemon = Daemon::start(&env.root, "a1").await?;
    let mut direct = daemon.client().await?;
    let direct_session = direct.auto_session(&env.work).await?;
    let stderr = std::fs::File::create(env.root.join("a1/launcher.stderr"))
        .map_err(|e| format!("launcher stderr: {e}"))?;
    let mut acp = tokio::process::Command::new(dsh_bin());
    acp.arg("acp")
        .arg("--socket")
        .arg(&daemon.socket)
        .stderr(stderr);
    let (mut launcher, mut editor) = started_as_an_editor_does(acp).await?;
    let session = editor.auto_session(&env.work).await?;
    // The other way an editor can start dsh: a daemon of its own on its stdio.
    let own = env.root.join("a1-stdio");
    std::fs::create_dir_all(&own).map_err(|e| format!("{}: {e}", own.display()))?;
    std::fs::write(own.join("dsh.toml"), "[exec]\nkind = \"local\"\n")
        .map_err(|e| e.to_string())?;
    let mut serve = tokio::process::Command::new(dsh_bin());
    serve
        .args(["serve", "--stdio", "--state-dir"])
        .arg(own.join("state"))
        .arg("--config")
        .arg(own.join("dsh.toml"))
        .stderr(Stdio::null());
    let (mut stdio_daemon, mut on_stdio) = started_as_an_editor_does(serve).await?;
    let stdio_session = on_stdio.auto_session(&env.work).await?;
    for _ in 0..env.counts.warmup {
        editor.no_process_call(&session).await?;
        direct.no_process_call(&direct_session).await?;
        on_stdio.no_process_call(&stdio_session).await?;
        editor.bash_true(&session).await?;
        direct.bash_true(&direct_session).await?;
        on_stdio.bash_true(&stdio_session).await?;
    }
    let mut times: [Vec<std::time::Duration>; 6] = std::array::from_fn(|_| Vec::with_capacity(n));
    let [
        via_empty,
        direct_empty,
        stdio_empty,
        via_bash,
        direct_bash,
        stdio_bash,
    ] = &mut times;
    for i in 0..n {
        // Rotate which goes first, so none always follows another.
        for k in 0..3 {
            match (i + k) % 3 {
                0 => {
                    via_empty.push(timed(editor.no_process_call(&session)).await?.0);
                    via_bash.push(timed(editor.bash_true(&session)).await?.0);
                }
                1 => {
                    direct_empty.push(timed(direct.no_process_call(&direct_session)).await?.0);
                    direct_bash.push(timed(direct.bash_true(&direct_session)).await?.0);
                }
                _ => {
                    stdio_empty.push(timed(on_stdio.no_process_call(&stdio_session)).await?.0);
                    stdio_bash.push(timed(on_stdio.bash_true(&stdio_session)).await?.0);
                }
            }
        }
    }
    // The editor closing its pipes ends `dsh acp`, and the stdio daemon.
    drop((editor, on_stdio));
    let _ = tokio::time::timeout(REQUEST_LIMIT, launcher.wait()).await;
    let _ = tokio::time::timeout(REQUEST_LIMIT, stdio_daemon.wait()).await;
    daemon.stop().await?;
    let [ve, de, se, vb, db, sb] = times.each_ref().map(|v| Stats::of(v));
    Ok(Outcome {
        rows: Vec::new(),
        notes: vec![
            ve.line("A1 no-process call through dsh acp"),
            de.line("A1 no-process call on the socket  "),
            vb.line("A1 `bash true` through dsh acp    "),
            db.line("A1 `bash true` on the socket      "),
            se.line("A1 no-process call, dsh serve --stdio"),
            sb.line("A1 `bash true`, dsh serve --stdio    "),
            format!(
                "A1 dsh acp adds {:.3} ms to a no-process call and {:.3} ms to a `bash true` call at the median \
                 (ratios {:.3} and {:.3})",
                ve.p50 - de.p50,
                vb.p50 - db.p50,
                ve.p50 / de.p50,
                vb.p50 / db.p50
            ),
        ],
        details: json!({"via_launcher_no_process": ve.json(), "direct_no_process": de.json(),
                        "via_launcher_bash": vb.json(), "direct_bash": db.json(),
                        "serve_stdio_no_process": se.json(), "serve_stdio_bash": sb.json()}),
    })
}

/// Starts `cmd` as an editor starts an agent (stdin and stdout pipes, killed when
/// dropped) and speaks ACP on its stdio.
async fn started_as_an_editor_does(
    mut cmd: tokio::process::Command,
) -> Res<(tokio::process::Child, Client)> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("start {cmd:?}: {e}"))?;
    let input = child.stdin.take().ok_or("the child's stdin")?;
    let output = child.stdout.take().ok_or("the child's stdout")?;
    let client = Client::over(Box::new(output), Box::new(input)).await?;
    Ok((child, client))
}
