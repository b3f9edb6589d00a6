//! The CLI's ACP client of its daemon: one connection (the daemon started if none
//! answers, as for `dsh acp`), `initialize` sent, `session/request_permission` answered
//! by an [`Asker`], `session/update`s handed over in arrival order. `dsh exec` and
//! `dsh chat` are this with different faces.

use crate::cli::reach::Where;
use crate::cli::terminal;
use agent_client_protocol_schema::v1 as acp;
use dsh::policy::audit::RunId;
use dsh::rpc::{Options, Peer, RequestFailure, RpcError, Service, serve_connection};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How a question the agent asks is answered when nobody is at a terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AskAnswer {
    /// Reject once: the call is refused and the turn goes on (also what a question gets
    /// when nobody can be asked: fail closed).
    Deny,
    /// Allow once: the call runs, nothing is remembered.
    Allow,
}

impl AskAnswer {
    /// The option of the question this answer picks: "once", never "always", so a
    /// script's blanket answer is never remembered for other sessions.
    pub(crate) fn kind(self) -> acp::PermissionOptionKind {
        match self {
            AskAnswer::Deny => acp::PermissionOptionKind::RejectOnce,
            AskAnswer::Allow => acp::PermissionOptionKind::AllowOnce,
        }
    }
}

/// What reaches the command from the connection while the turn runs.
pub enum Incoming {
    /// A `session/update`'s params.
    Update(Value),
    /// A question and what was answered.
    Asked {
        tool_call_id: String,
        title: Option<String>,
        option_id: Option<String>,
        answer: AskAnswer,
    },
}

/// Who answers a permission question.
#[derive(Clone, Copy)]
pub enum Asker {
    /// `--ask`, or deny when nobody can be asked.
    Fixed(AskAnswer),
    /// The person at the controlling terminal (`/dev/tty`), asked there.
    Terminal,
}

impl Asker {
    /// `--ask` when given; else the terminal when one is reachable; else deny.
    pub fn of(ask: Option<AskAnswer>) -> Self {
        match ask {
            Some(answer) => Asker::Fixed(answer),
            None if terminal::reachable() => Asker::Terminal,
            None => Asker::Fixed(AskAnswer::Deny),
        }
    }
}

/// Answers the agent's requests on the connection: `session/request_permission` by
/// its [`Asker`]; everything else "method not found".
struct Answerer {
    asker: Asker,
    incoming: mpsc::UnboundedSender<Incoming>,
}

impl Answerer {
    async fn answer(
        &self,
        request: acp::RequestPermissionRequest,
    ) -> acp::RequestPermissionResponse {
        let option = match self.asker {
            Asker::Fixed(answer) => {
                let wanted = answer.kind();
                request.options.iter().find(|o| o.kind == wanted).cloned()
            }
            Asker::Terminal => {
                let question = request.clone();
                tokio::task::spawn_blocking(move || terminal::ask(&question))
                    .await
                    .ok()
                    .flatten()
            }
        };
        let option = option.as_ref();
        let _ = self.incoming.send(Incoming::Asked {
            tool_call_id: request.tool_call.tool_call_id.0.to_string(),
            title: request.tool_call.fields.title.clone(),
            option_id: option.map(|o| o.option_id.0.to_string()),
            // An allow only when an allow option was picked.
            answer: match option.map(|o| o.kind) {
                Some(
                    acp::PermissionOptionKind::AllowOnce | acp::PermissionOptionKind::AllowAlways,
                ) => AskAnswer::Allow,
                _ => AskAnswer::Deny,
            },
        });
        // A question without the option wanted is not answered with another one:
        // "cancelled", which the daemon takes as a refusal.
        let outcome = match option {
            Some(o) => acp::RequestPermissionOutcome::Selected(
                acp::SelectedPermissionOutcome::new(o.option_id.clone()),
            ),
            None => acp::RequestPermissionOutcome::Cancelled,
        };
        acp::RequestPermissionResponse::new(outcome)
    }
}

/// The service of the CLI's connection: the [`Answerer`]'s methods, updates into
/// the channel, the peer handed over once the connection opens.
struct ClientService {
    answerer: Arc<Answerer>,
    peer: Mutex<Option<oneshot::Sender<Peer>>>,
}

impl Service for ClientService {
    fn methods(&self) -> jsonrpsee::Methods {
        let mut m = jsonrpsee::RpcModule::from_arc(self.answerer.clone());
        let registered = m.register_async_method(
            "session/request_permission",
            |params, answerer: Arc<Answerer>, _| async move {
                let request: acp::RequestPermissionRequest = params
                    .parse()
                    .map_err(|e| RpcError::invalid_params(e.to_string()))?;
                serde_json::to_value(answerer.answer(request).await)
                    .map_err(|e| RpcError::internal(e.to_string()))
            },
        );
        if let Err(e) = registered {
            tracing::error!("cannot register the permission answerer: {e}");
        }
        m.into()
    }

    fn opened(&self, peer: &Peer) {
        if let Some(tx) = self.peer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(peer.clone());
        }
    }

    fn notification(&self, _peer: &Peer, method: &str, params: Option<Value>) {
        if method == "session/update"
            && let Some(params) = params
        {
            let _ = self.answerer.incoming.send(Incoming::Update(params));
        }
    }

    fn closed(&self, _peer: &Peer) {}
}

/// Why a request of the turn failed, in words.
fn failed(method: &str, failure: RequestFailure) -> String {
    match failure {
        RequestFailure::Answered(e) => format!("{method}: {}", e.message),
        _ => format!("{method}: the daemon closed the connection"),
    }
}

/// How waiting for a turn's answer ended.
pub enum Prompted {
    /// The daemon answered: the turn is over.
    Answered(acp::PromptResponse),
    /// A second Ctrl-C: the person stopped waiting.
    Left,
}

/// The person's Ctrl-Cs, counted from one handler installed when the command starts:
/// a Ctrl-C that comes while a turn is still connecting is counted too (a handler
/// installed only once the prompt is sent would never see it), and every turn of a
/// batch sees each one. A clone counts the same presses.
#[derive(Clone)]
pub struct Interrupts {
    presses: tokio::sync::watch::Receiver<u32>,
    /// The presses before [`Interrupts::begin`]: not this turn's.
    base: u32,
}

impl Interrupts {
    /// Installs the SIGINT handler (for the rest of the process: from now on Ctrl-C no
    /// longer kills it) and starts counting.
    pub fn watch() -> Result<Self, String> {
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .map_err(|e| format!("cannot wait for Ctrl-C: {e}"))?;
        let (tx, presses) = tokio::sync::watch::channel(0u32);
        tokio::spawn(async move {
            while sigint.recv().await.is_some() {
                tx.send_modify(|n| *n = n.saturating_add(1));
            }
        });
        Ok(Self { presses, base: 0 })
    }

    /// Counts from now: `dsh chat` calls it as each turn starts, since a Ctrl-C of an
    /// earlier turn says nothing about this one.
    pub fn begin(&mut self) {
        self.base = *self.presses.borrow_and_update();
    }

    /// The presses since the start (or [`Interrupts::begin`]), marked seen.
    pub fn seen(&mut self) -> u32 {
        self.presses.borrow_and_update().saturating_sub(self.base)
    }

    /// Waits for a press not yet seen; never ends once no handler runs.
    pub async fn next(&mut self) {
        if self.presses.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Waits until at least one press was made since the start.
    pub async fn first(&mut self) {
        while self.seen() == 0 {
            self.next().await;
        }
    }
}

/// Runs a command of the CLI's clients to its end on a runtime of its own; its error
/// is said on stderr. The runtime is shut down without waiting for blocking work (a
/// stdin reader, a question waiting for a line on the terminal): nothing else of the
/// command runs by then.
pub fn run_command<T>(command: impl std::future::Future<Output = Result<T, String>>) -> Option<T> {
    let result = crate::cli::reach::runtime().and_then(|rt| {
        let result = rt.block_on(command);
        rt.shutdown_background();
        result
    });
    result.map_err(|message| eprintln!("dsh: {message}")).ok()
}

/// The absolute directory a session works in: `dir` when given, else the current one.
pub fn session_dir(dir: Option<&Path>) -> Result<PathBuf, String> {
    let cwd = match dir {
        Some(dir) => {
            std::path::absolute(dir).map_err(|e| format!("bad --cwd {}: {e}", dir.display()))?
        }
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    if !cwd.is_dir() {
        return Err(format!("{} is not a directory", cwd.display()));
    }
    Ok(cwd)
}

/// One initialized connection to the daemon.
pub struct Client {
    /// Sends on the connection (requests, `session/cancel`).
    pub peer: Peer,
    serve: Mutex<Option<JoinHandle<()>>>,
    incoming: Mutex<Option<mpsc::UnboundedReceiver<Incoming>>>,
}

impl Client {
    /// Connects to the daemon of `at` (starting it if none answers) and initializes the
    /// connection as `name`, offering `capabilities` (`clientCapabilities`); questions
    /// are answered by `asker`.
    pub async fn open(
        at: &Where,
        asker: Asker,
        name: &str,
        capabilities: Value,
    ) -> Result<Self, String> {
        let stream = crate::cli::reach::connect_or_start(at).await?;
        // Said once a process: a batch opens a connection per prompt.
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| crate::cli::reach::warn_if_daemon_is_older(&stream, &at.socket()));
        let (reader, writer) = stream.into_split();
        let (incoming_tx, incoming) = mpsc::unbounded_channel();
        let (peer_tx, peer_rx) = oneshot::channel();
        let service = Arc::new(ClientService {
            answerer: Arc::new(Answerer {
                asker,
                incoming: incoming_tx,
            }),
            peer: Mutex::new(Some(peer_tx)),
        });
        let serve = tokio::spawn(serve_connection(
            reader,
            writer,
            service,
            Options::default(),
        ));
        let peer = peer_rx
            .await
            .map_err(|_| "the connection to the daemon ended at once".to_string())?;
        let client = Self {
            peer,
            serve: Mutex::new(Some(serve)),
            incoming: Mutex::new(Some(incoming)),
        };
        client
            .call(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": capabilities,
                       "clientInfo": {"name": name, "version": env!("CARGO_PKG_VERSION")}}),
            )
            .await?;
        Ok(client)
    }

    /// The updates and answered questions, in arrival order (once).
    pub fn take_incoming(&self) -> mpsc::UnboundedReceiver<Incoming> {
        match self
            .incoming
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(rx) => rx,
            // Taken before: a receiver whose sender is gone reads as the end.
            None => mpsc::unbounded_channel().1,
        }
    }

    /// One request; its failure in words.
    pub async fn call(&self, method: &'static str, params: Value) -> Result<Value, String> {
        self.peer
            .call(method, params, &CancellationToken::new())
            .await
            .map_err(|f| failed(method, f))
    }

    /// A new session in `cwd` (absolute), in `mode` when given, of batch `run` when
    /// given (`_meta.dsh.runId`: the daemon writes it in the session's audit lines):
    /// its id.
    pub async fn new_session(
        &self,
        cwd: &std::path::Path,
        mode: Option<&str>,
        run: Option<&RunId>,
    ) -> Result<String, String> {
        let mut params = json!({"cwd": cwd, "mcpServers": []});
        if let Some(run) = run {
            params["_meta"] = json!({"dsh": {"runId": run}});
        }
        let created = self.call("session/new", params).await?;
        let created: acp::NewSessionResponse = serde_json::from_value(created).map_err(|e| {
            format!("session/new: the daemon's answer is not what this dsh reads: {e}")
        })?;
        let session = created.session_id.0.to_string();
        if let Some(mode) = mode {
            self.call(
                "session/set_mode",
                json!({"sessionId": session, "modeId": mode}),
            )
            .await?;
        }
        Ok(session)
    }

    /// Loads session `id` (the daemon replays its history as `session/update`s), in
    /// `mode` when given. Returns once the whole replay is in the channel: the daemon
    /// queues it right after the load's answer, so the answer of a request sent after
    /// that answer comes behind it.
    pub async fn load_session(
        &self,
        id: &str,
        cwd: &std::path::Path,
        mode: Option<&str>,
    ) -> Result<(), String> {
        self.call(
            "session/load",
            json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
        )
        .await?;
        if let Some(mode) = mode {
            self.call("session/set_mode", json!({"sessionId": id, "modeId": mode}))
                .await?;
        }
        self.call("_dsh/status", json!({"stateUsage": false}))
            .await
            .map(|_| ())
    }

    /// The daemon's state directory (where its audit log is), as it reports it.
    pub async fn state_dir(&self) -> Option<PathBuf> {
        let status = self
            .call("_dsh/status", json!({"stateUsage": false}))
            .await
            .ok()?;
        status
            .get("stateDir")
            .and_then(Value::as_str)
            .map(PathBuf::from)
    }

    /// Sends `text` as the prompt of `session` and hands each update and answered
    /// question to `take` as it arrives, until the daemon answers. The first Ctrl-C
    /// of `interrupts` sends `session/cancel` (after `cancelling` says so), at once when
    /// it came before the prompt was sent; a second one gives up waiting
    /// ([`Prompted::Left`]): the daemon winds the turn down by itself.
    pub async fn prompt(
        &self,
        session: &str,
        text: &str,
        incoming: &mut mpsc::UnboundedReceiver<Incoming>,
        interrupts: &mut Interrupts,
        mut take: impl FnMut(Incoming) -> Result<(), String>,
        mut cancelling: impl FnMut(),
    ) -> Result<Prompted, String> {
        let answer = self.call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
        tokio::pin!(answer);
        let mut cancelled = false;
        let mut cancel = |cancelled: &mut bool| {
            if !std::mem::replace(cancelled, true) {
                cancelling();
                self.peer
                    .notify("session/cancel", json!({"sessionId": session}))
                    .map_err(|_| "session/cancel: the daemon closed the connection".to_string())?;
            }
            Ok::<(), String>(())
        };
        let answer = loop {
            // Seen before each wait: a Ctrl-C that came while connecting, or between
            // two events, is acted on here rather than lost.
            match interrupts.seen() {
                0 => {}
                1 => cancel(&mut cancelled)?,
                _ => return Ok(Prompted::Left),
            }
            tokio::select! {
                answer = &mut answer => break answer,
                Some(message) = incoming.recv() => take(message)?,
                () = interrupts.next() => {}
            }
        };
        // The daemon sends a turn's updates before its answer, and the connection hands
        // them over in the order read: all of them are in the channel now.
        while let Ok(message) = incoming.try_recv() {
            take(message)?;
        }
        let answer = answer?;
        serde_json::from_value(answer)
            .map(Prompted::Answered)
            .map_err(|e| {
                format!("session/prompt: the daemon's answer is not what this dsh reads: {e}")
            })
    }

    /// Ends the connection and waits for it to wind down.
    pub async fn close(&self) {
        self.peer.close();
        let serve = self.serve.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(serve) = serve {
            let _ = serve.await;
        }
    }
}
