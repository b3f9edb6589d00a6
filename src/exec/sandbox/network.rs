//! The network of a sandbox in `network = "proxy"` mode (E10): a private network
//! namespace whose only way out is dsh's proxy, listening on its loopback.
//!
//! For each command: bwrap is told to report its first process (`--info-fd`) and to
//! wait before it runs the command (`--block-fd`); when it has started, the daemon
//! makes the proxy's listener inside that namespace ([`netns`]), starts a
//! [`ProxyServer`] on it with the command's gate, and lets bwrap go on. So the
//! proxy is up before the command's first connection, nothing outside the namespace
//! can reach it, and nothing inside resolves a name. The command's environment
//! points `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` (and their lower-case forms) at
//! it. When the sandbox is gone its proxy stops, closing every connection, and the
//! hosts the gate refused are told at the end of the command's output.

use super::netns;
use crate::exec::ExecSpec;
use crate::exec::netproxy::{
    Admission, CommandOrigin, ConnectRequest, ConnectionGate, ConnectionJudge, NoJudge,
    OpenConnections, ProxyServer,
};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The port the proxy listens on, on the sandbox's own loopback (no other process
/// shares that namespace: a command's own test server may use any other port).
pub const PROXY_PORT: u16 = 3128;

/// How long bwrap may take to report the sandbox it made.
const INFO_TIMEOUT: Duration = Duration::from_secs(10);

/// A command's network between its command line and its start.
struct Pending {
    /// bwrap's report (`--info-fd`), read end; taken by [`Proxies::started`].
    info: Option<OwnedFd>,
    /// What lets bwrap run the command (`--block-fd`), write end. It stays here until
    /// the proxy is up: bwrap also goes on when it is closed, so a failed start
    /// leaves it to [`Proxies::release`], after the sandbox was ended (the command
    /// never runs). A command stopped meanwhile has it closed by
    /// [`Proxies::abandon`]: it then runs without a proxy, so without any network,
    /// and meets the stop's signal like any command.
    go: OwnedFd,
    /// The start failed: `go` stays shut until the sandbox is gone.
    failed: bool,
    gate: Arc<Recording>,
    owner: Option<String>,
}

/// A running command's proxy.
struct Running {
    /// Dropped when the sandbox is gone: the proxy stops and closes its connections.
    _server: ProxyServer,
    gate: Arc<Recording>,
    /// Its connections open now.
    open: OpenConnections,
    /// The task or call it serves, as `dsh status` names it.
    owner: Option<String>,
}

/// The proxies of a sandbox executor's commands, by their marks.
#[derive(Default)]
pub struct Proxies {
    judge: OnceLock<Arc<dyn ConnectionJudge>>,
    pending: Mutex<HashMap<String, Pending>>,
    running: Mutex<HashMap<String, Running>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Proxies {
    /// Who judges the connections (once: the daemon's tool registry).
    pub fn set_judge(&self, judge: Arc<dyn ConnectionJudge>) {
        let _ = self.judge.set(judge);
    }

    /// The bwrap options for command `mark`, and the descriptors bwrap must inherit
    /// at the numbers they name.
    pub fn prepare(
        &self,
        spec: &ExecSpec,
        mark: &str,
    ) -> Result<(Vec<OsString>, Vec<OwnedFd>), String> {
        let pipe = || {
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|e| format!("cannot make a pipe for the sandbox's network: {e}"))
        };
        let (info, info_w) = pipe()?;
        let (block_r, go) = pipe()?;
        let origin = CommandOrigin {
            session: spec.scope.clone(),
            command: spec.command.clone(),
            call_id: spec.call_id.clone(),
            task_id: spec.task_id,
        };
        let gate: Arc<dyn ConnectionGate> = match self.judge.get() {
            Some(judge) => judge.gate_for(origin),
            None => Arc::new(NoJudge),
        };
        let mut args: Vec<OsString> = vec![
            "--info-fd".into(),
            info_w.as_raw_fd().to_string().into(),
            "--block-fd".into(),
            block_r.as_raw_fd().to_string().into(),
        ];
        for (name, value) in environment() {
            args.extend(["--setenv".into(), name.into(), value.into()]);
        }
        lock(&self.pending).insert(
            mark.to_string(),
            Pending {
                info: Some(info),
                go,
                failed: false,
                gate: Arc::new(Recording::new(gate)),
                owner: spec
                    .task_id
                    .map(|t| t.to_string())
                    .or_else(|| spec.call_id.clone()),
            },
        );
        Ok((args, vec![info_w, block_r]))
    }

    /// Command `mark`'s bwrap has started: makes its proxy and lets it run the
    /// command. Nothing to do for a command without one.
    pub async fn started(&self, mark: &str) -> Result<(), String> {
        let (info, gate) = match lock(&self.pending).get_mut(mark) {
            Some(pending) => (pending.info.take(), pending.gate.clone()),
            None => return Ok(()),
        };
        let Some(info) = info else {
            return Err("the sandbox's network was already being made".into());
        };
        let server = match Self::serve(info, gate.clone()).await {
            Ok(server) => server,
            Err(why) => {
                if let Some(pending) = lock(&self.pending).get_mut(mark) {
                    pending.failed = true;
                }
                return Err(why);
            }
        };
        let Some(Pending { go, owner, .. }) = lock(&self.pending).remove(mark) else {
            return Err("the command was stopped while its network was made".into());
        };
        let open = server.open_connections();
        lock(&self.running).insert(
            mark.to_string(),
            Running {
                _server: server,
                gate,
                open,
                owner,
            },
        );
        nix::unistd::write(&go, b"x").map_err(|e| format!("cannot start the command: {e}"))?;
        Ok(())
    }

    /// Makes the listener in the sandbox bwrap reports on `info` and serves it.
    async fn serve(info: OwnedFd, gate: Arc<Recording>) -> Result<ProxyServer, String> {
        let made = tokio::task::spawn_blocking(move || {
            let pid = first_process(info)?;
            netns::loopback_listener(pid, PROXY_PORT)
        });
        let listener = match tokio::time::timeout(INFO_TIMEOUT, made).await {
            Ok(Ok(made)) => made?,
            Ok(Err(e)) => return Err(format!("the sandbox's network could not be made: {e}")),
            Err(_) => return Err("bwrap did not report the sandbox it made in time".into()),
        };
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| format!("cannot serve the sandbox's proxy: {e}"))?;
        Ok(ProxyServer::start(listener, gate, CancellationToken::new()))
    }

    /// The commands `stopped` picks are being stopped: one still waiting for its
    /// network (and whose start did not fail) is let go without it, so it runs with
    /// no network at all and ends by the stop's signal, as any command does.
    pub fn abandon(&self, stopped: &impl Fn(&str) -> bool) {
        lock(&self.pending).retain(|mark, pending| pending.failed || !stopped(mark));
    }

    /// The proxied connections open now, by the task (or foreground call) whose
    /// command holds them; commands with none are left out.
    pub fn open_connections(&self) -> Vec<(String, usize)> {
        lock(&self.running)
            .values()
            .filter_map(|r| Some((r.owner.clone()?, r.open.get())))
            .filter(|(_, open)| *open > 0)
            .collect()
    }

    /// The sandboxes of the marks `ended` picks are gone: their proxies stop (each
    /// open connection is closed) and what their gates refused is returned, a line
    /// per host.
    pub fn release(&self, ended: &impl Fn(&str) -> bool) -> Vec<String> {
        lock(&self.pending).retain(|mark, _| !ended(mark));
        let gone: Vec<Running> = {
            let mut running = lock(&self.running);
            let marks: Vec<String> = running.keys().filter(|m| ended(m)).cloned().collect();
            marks.iter().filter_map(|m| running.remove(m)).collect()
        };
        gone.iter()
            .flat_map(|running| running.gate.refused())
            .collect()
    }
}

/// What a proxied command's environment says: the proxy for HTTP, HTTPS and the
/// rest (SOCKS5 with names resolved by the proxy: `socks5h`), and loopback direct.
fn environment() -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{PROXY_PORT}");
    let socks = format!("socks5h://127.0.0.1:{PROXY_PORT}");
    let direct = "localhost,127.0.0.1,::1".to_string();
    let mut vars = Vec::new();
    for (name, value) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("NO_PROXY", &direct),
    ] {
        vars.push((name.to_string(), value.clone()));
        vars.push((name.to_lowercase(), value.clone()));
    }
    vars
}

/// The pid of the sandbox's first process, from bwrap's `--info-fd` report (a JSON
/// object). Blocking: run off the runtime.
fn first_process(info: OwnedFd) -> Result<i32, String> {
    let mut file = std::fs::File::from(info);
    let mut text = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        if let Ok(report) = serde_json::from_slice::<serde_json::Value>(&text) {
            return report
                .get("child-pid")
                .and_then(|p| p.as_i64())
                .and_then(|p| i32::try_from(p).ok())
                .ok_or_else(|| format!("bwrap's report names no child: {report}"));
        }
        match file.read(&mut chunk) {
            Ok(0) => return Err("bwrap ended before it reported the sandbox".into()),
            Ok(n) if text.len() + n <= 64 * 1024 => text.extend_from_slice(&chunk[..n]),
            Ok(_) => return Err("bwrap's report is too long".into()),
            Err(e) => return Err(format!("cannot read bwrap's report: {e}")),
        }
    }
}

/// A command's gate, noting what it refused: the command's output ends with it, so
/// the model can say why a download failed.
struct Recording {
    gate: Arc<dyn ConnectionGate>,
    /// The first [`REFUSALS_TOLD`] refusals, and how many more there were.
    refused: Mutex<(Vec<String>, usize)>,
}

/// How many refused hosts a command's output names (the rest are counted).
const REFUSALS_TOLD: usize = 20;

impl Recording {
    fn new(gate: Arc<dyn ConnectionGate>) -> Self {
        Self {
            gate,
            refused: Mutex::new((Vec::new(), 0)),
        }
    }

    fn refused(&self) -> Vec<String> {
        let (told, more) = &*lock(&self.refused);
        let mut lines = told.clone();
        if *more > 0 {
            lines.push(format!(
                "the sandbox's network refused {more} more connection(s)"
            ));
        }
        lines
    }
}

#[async_trait::async_trait]
impl ConnectionGate for Recording {
    async fn admit(&self, request: &ConnectRequest) -> Admission {
        let admission = self.gate.admit(request).await;
        if let Admission::Deny { reason } = &admission {
            let line = format!(
                "the sandbox's network refused {} ({}): {reason}",
                request.destination, request.scheme
            );
            let (told, more) = &mut *lock(&self.refused);
            let known = told.contains(&line);
            match (known, told.len() < REFUSALS_TOLD) {
                (true, _) => {}
                (false, true) => told.push(line),
                (false, false) => *more += 1,
            }
        }
        admission
    }
}
