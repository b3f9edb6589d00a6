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
    /// at the numbers they name. `own` is what the person set for the command
    /// (`[exec] env_set`, then a service's own `env`: later wins), read for the names
    /// the proxy sets ([`environment`]).
    pub fn prepare(
        &self,
        spec: &ExecSpec,
        mark: &str,
        own: &[(OsString, OsString)],
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
        for (name, value) in environment(own) {
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
///
/// The person's own value (`own`, the last of each name) wins for `NO_PROXY` and
/// `no_proxy`, each name on its own, narrowed to its loopback entries
/// ([`direct_narrowed`]): clearing it sends even loopback through the proxy (a model
/// on the host's loopback, reached by a rule naming its port), and an entry beyond
/// loopback could only fail direct (the namespace has no other way out), so it goes
/// through the proxy, judged like any host. The proxy variables themselves stay
/// dsh's whatever `own` says: a proxy elsewhere is unreachable from the namespace
/// (`wrapped_agents::e10_*` shows a connection to one going nowhere), so the
/// person's value could only cut the command off from the network.
fn environment(own: &[(OsString, OsString)]) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{PROXY_PORT}");
    let socks = format!("socks5h://127.0.0.1:{PROXY_PORT}");
    let direct = "localhost,127.0.0.1,::1".to_string();
    let asked = |name: &str| {
        own.iter()
            .rev()
            .find(|(n, _)| n.as_os_str() == name)
            .map(|(_, value)| direct_narrowed(value.to_str().unwrap_or("")))
    };
    let mut vars = Vec::new();
    for (name, value) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
    ] {
        vars.push((name.to_string(), value.clone()));
        vars.push((name.to_lowercase(), value.clone()));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        let value = asked(name).unwrap_or_else(|| direct.clone());
        vars.push((name.to_string(), value));
    }
    vars
}

/// A `NO_PROXY` list keeping only the entries that name this namespace's loopback
/// (`localhost`, a loopback address, with a port or a prefix inside loopback): the
/// only places a connection that skips the proxy can reach. A value that is not
/// UTF-8 keeps nothing.
fn direct_narrowed(value: &str) -> String {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| names_loopback(entry))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether one `NO_PROXY` entry names only loopback: `localhost`, `127.0.0.1`,
/// `::1`, `[::1]`, each with a `:port` or (an address) a `/prefix` inside loopback.
fn names_loopback(entry: &str) -> bool {
    use std::net::IpAddr;
    let loopback = |host: &str| {
        host.eq_ignore_ascii_case("localhost")
            || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    };
    if let Some((address, prefix)) = entry.split_once('/') {
        let Ok(ip) = address.parse::<IpAddr>() else {
            return false;
        };
        // Loopback is 127.0.0.0/8 and ::1/128: a shorter prefix reaches beyond it.
        let inside = if ip.is_ipv4() { 8..=32 } else { 128..=128 };
        return ip.is_loopback() && prefix.parse::<u8>().is_ok_and(|p| inside.contains(&p));
    }
    if let Some(bracketed) = entry.strip_prefix('[') {
        let Some((host, rest)) = bracketed.split_once(']') else {
            return false;
        };
        return loopback(host) && (rest.is_empty() || is_port(rest));
    }
    if loopback(entry) {
        return true;
    }
    entry.rsplit_once(':').is_some_and(|(host, port)| {
        !host.contains(':') && loopback(host) && is_port(&format!(":{port}"))
    })
}

/// `:N` with N a port number.
fn is_port(text: &str) -> bool {
    text.strip_prefix(':')
        .is_some_and(|p| !p.is_empty() && p.parse::<u16>().is_ok())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn env(own: &[(&str, &str)]) -> HashMap<String, String> {
        let own: Vec<(OsString, OsString)> = own
            .iter()
            .map(|(n, v)| ((*n).into(), (*v).into()))
            .collect();
        environment(&own).into_iter().collect()
    }

    /// Nothing asked: loopback direct, everything else through the proxy.
    #[test]
    fn e10_without_the_persons_values_loopback_goes_direct() {
        let vars = env(&[]);
        assert_eq!(vars["NO_PROXY"], "localhost,127.0.0.1,::1");
        assert_eq!(vars["no_proxy"], "localhost,127.0.0.1,::1");
        assert_eq!(vars["HTTPS_PROXY"], "http://127.0.0.1:3128");
    }

    /// The person's `NO_PROXY` wins, each name on its own, narrowed to loopback; their
    /// proxy variables never do.
    #[test]
    fn e10_the_persons_no_proxy_wins_narrowed_and_their_proxy_never() {
        let vars = env(&[
            ("NO_PROXY", "localhost"),
            ("NO_PROXY", ""),
            (
                "no_proxy",
                " example.com,LOCALHOST:8080, 127.0.0.0/8,10.0.0.0/8,[::1]:9,::1,*,.local,127.0.0.1:x,0.0.0.0/0,127.0.0.1/4",
            ),
            ("HTTP_PROXY", "http://proxy.example:8080"),
            ("https_proxy", "http://127.0.0.1:9999"),
            ("ALL_PROXY", "socks5://elsewhere:1080"),
        ]);
        assert_eq!(vars["NO_PROXY"], "", "the last value wins");
        assert_eq!(vars["no_proxy"], "LOCALHOST:8080,127.0.0.0/8,[::1]:9,::1");
        for name in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"] {
            assert_eq!(vars[name], "http://127.0.0.1:3128", "{name}");
        }
        assert_eq!(vars["ALL_PROXY"], "socks5h://127.0.0.1:3128");
        assert_eq!(vars["all_proxy"], "socks5h://127.0.0.1:3128");
    }
}
