//! ACP authentication: the methods `initialize` advertises, `authenticate`, `logout`,
//! and the auth-required answer to a prompt that needs a key dsh does not have.
//!
//! Both kinds of method are always listed (the ACP Registry admits an agent only with
//! one of type `agent` or `terminal`): the `agent` method checks that a key is there
//! (from the environment or the key file, src/auth.rs) and otherwise says exactly how to
//! provide one; the `terminal` method is `dsh login`, which the client runs itself in a
//! terminal (it never comes to `authenticate`). Nothing here reshapes the session code:
//! `prompt` calls [`AcpService::require_key`] once before a turn starts.

use super::{AcpService, to_value};
use crate::rpc::{RequestContext, RpcError};
use agent_client_protocol_schema::v1 as acp;
use serde_json::{Value, json};

/// The id of the `agent` method: dsh uses the key it already has.
pub const AGENT_METHOD: &str = "api-key";
/// The id of the `terminal` method: `dsh login`.
pub const TERMINAL_METHOD: &str = "login";

/// The methods `initialize` lists, both always. The terminal method's arguments are
/// `login`: a client that replaces the agent's arguments runs `dsh login`, one that
/// appends them runs `dsh acp login`, and both are the same login (src/cli/login.rs).
/// `_meta["terminal-auth"]` repeats it with the full command, for clients (Zed) that
/// read the older shape.
pub fn methods() -> Vec<acp::AuthMethod> {
    let agent = acp::AuthMethodAgent::new(AGENT_METHOD, "API key").description(
        "Use the API key from the environment or dsh's key file (`dsh login` writes it)",
    );
    let mut terminal = acp::AuthMethodTerminal::new(TERMINAL_METHOD, "Log in with an API key")
        .description("Run `dsh login` in a terminal: it asks for the key and keeps it, 0600")
        .args(vec!["login".to_string()]);
    {
        // The daemon's own program as resolved at its first start (a rebuild or a roll
        // back leaves the running file gone, named `... (deleted)`).
        let exe = crate::program::path();
        let mut meta = serde_json::Map::new();
        meta.insert(
            "terminal-auth".into(),
            json!({"label": "dsh login", "command": exe, "args": ["login"]}),
        );
        terminal = terminal.meta(meta);
    }
    vec![
        acp::AuthMethod::Agent(agent),
        acp::AuthMethod::Terminal(terminal),
    ]
}

impl AcpService {
    /// Whether a key is needed and missing now: `Some(how to provide one)`.
    fn missing_key(&self) -> Option<String> {
        let config = &self.settings().model_config;
        let env = |name: &str| std::env::var(name).ok();
        if !crate::auth::needs_key(config, env) {
            return None;
        }
        match crate::auth::KeySource::resolve(config, env).key() {
            Some(_) => None,
            None => Some(crate::auth::how_to_provide(config)),
        }
    }

    /// A prompt that goes to the model needs a key (unless the endpoint is keyless):
    /// without one it is refused with ACP's auth-required error before anything of it
    /// is logged or sent, rather than failing later as the model's HTTP 401. `!`
    /// commands and slash commands need no model and pass.
    pub(super) fn require_key(&self, prompt_text: &str) -> Result<(), RpcError> {
        if !crate::agent::commands::goes_to_model(prompt_text) {
            return Ok(());
        }
        match self.missing_key() {
            Some(how) => Err(RpcError::auth_required(how)),
            None => Ok(()),
        }
    }

    /// `authenticate`: the agent method succeeds when a key is there; the terminal
    /// method is the client's to run, never sent here.
    pub(super) async fn authenticate(
        &self,
        _ctx: RequestContext,
        p: acp::AuthenticateRequest,
    ) -> Result<Value, RpcError> {
        match &*p.method_id.0 {
            AGENT_METHOD => match self.missing_key() {
                Some(how) => Err(RpcError::auth_required(how)),
                None => to_value(acp::AuthenticateResponse::new()),
            },
            TERMINAL_METHOD => Err(RpcError::invalid_params(
                "the `login` method runs in a terminal: start `dsh login` there (the client \
                 runs it itself), then authenticate with `api-key`",
            )),
            other => Err(RpcError::invalid_params(format!(
                "unknown authentication method `{other}` (dsh offers `{AGENT_METHOD}` and \
                 `{TERMINAL_METHOD}`)"
            ))),
        }
    }

    /// `logout`: the stored key is removed. A key in the daemon's environment is the
    /// environment's and stays; the answer is the same (there is nothing more to do).
    pub(super) async fn logout(
        &self,
        _ctx: RequestContext,
        _p: acp::LogoutRequest,
    ) -> Result<Value, RpcError> {
        if let Some(path) = crate::auth::key_file() {
            crate::auth::remove_key(&path).map_err(|e| {
                RpcError::internal(format!("cannot remove {}: {e}", path.display()))
            })?;
        }
        to_value(acp::LogoutResponse::new())
    }
}
