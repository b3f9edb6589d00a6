//! `[model]` and `[agent]`: the model endpoint and the turn loop that speaks to it.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// DeepSeek's API, the default model endpoint.
pub const DEFAULT_MODEL_BASE_URL: &str = "https://api.deepseek.com";

/// `[model]`: an OpenAI-compatible chat-completions endpoint. The environment
/// (`DSH_MODEL_BASE_URL`, `DSH_MODEL`, `DSH_API_KEY`) overrides these.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Base URL; requests go to `<base_url>/chat/completions`.
    pub base_url: String,
    pub model: String,
    /// The environment variable holding the API key (keys never live in config).
    pub api_key_env: String,
    /// Retries of a 429/5xx/connect failure before any of the answer streamed.
    pub max_retries: u32,
    /// First backoff; doubled per retry unless the server sends Retry-After.
    pub retry_base_ms: u64,
    pub connect_timeout_ms: u64,
    /// The stream fails if the server sends nothing for this long.
    pub idle_timeout_ms: u64,
    /// The model's context window in tokens, for the editor's context meter.
    pub context_window: u64,
    /// Prices per million prompt and completion tokens (in `currency`), so the editor
    /// can show what a session cost; unset: no cost is reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_per_mtok_in: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_per_mtok_out: Option<f64>,
    pub currency: String,
    /// Models the person may pick per session (the editor's model menu); empty: only
    /// `model`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// The model reads images: `initialize` advertises `promptCapabilities.image` and
    /// image blocks of a prompt go to it as image parts. Off, an image prompt is refused
    /// (a client may send only what was advertised).
    pub vision: bool,
    /// The endpoint takes requests without a key: no auth-required error, no key sent
    /// unless one is found. Unset: true for an endpoint on a loopback address (a local
    /// server), false for any other (src/auth.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyless: Option<bool>,
    /// The model that reasons longer (DeepSeek: `deepseek-reasoner`): with it set, each
    /// session has a "Think harder" switch (a boolean config option) that sends its
    /// requests there while on. Unset: no switch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think_harder_model: Option<String>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            base_url: DEFAULT_MODEL_BASE_URL.into(),
            model: "deepseek-chat".into(),
            api_key_env: "DEEPSEEK_API_KEY".into(),
            max_retries: 3,
            retry_base_ms: 500,
            connect_timeout_ms: 10_000,
            idle_timeout_ms: 120_000,
            context_window: 128_000,
            price_per_mtok_in: None,
            price_per_mtok_out: None,
            currency: "USD".into(),
            models: Vec::new(),
            vision: false,
            keyless: None,
            think_harder_model: None,
        }
    }
}

/// `[agent]`: the turn loop.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Model requests per prompt before the turn ends with `max_turn_requests`.
    pub max_steps: u32,
    /// A file whose text replaces (or, with `system_prompt_mode = "extend"`,
    /// follows) the built-in system prompt.
    pub system_prompt_file: Option<PathBuf>,
    pub system_prompt_mode: SystemPromptMode,
    /// Characters of history sent to the model; past it the oldest tool outputs
    /// are shortened to a marker (the session log keeps everything).
    pub history_budget_chars: usize,
    /// Where a session's title comes from.
    pub titles: TitleSource,
}

/// Where a session's title comes from (`[agent] titles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TitleSource {
    /// The first line of the first prompt, at once.
    #[default]
    FirstLine,
    /// The first line at once, then a title the model writes, asked for in the
    /// background after the first prompt that goes to the model.
    Model,
}

/// How `system_prompt_file` combines with the built-in prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SystemPromptMode {
    #[default]
    Extend,
    Replace,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_steps: 100,
            system_prompt_file: None,
            system_prompt_mode: SystemPromptMode::Extend,
            history_budget_chars: 400_000,
            titles: TitleSource::FirstLine,
        }
    }
}
