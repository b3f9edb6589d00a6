//! The model seam: one streamed chat request, whatever serves it.
//!
//! [`Model::stream`] sends one request and delivers [`ModelEvent`]s as they
//! arrive (text, reasoning, tool-call fragments, usage, finish). The agent loop
//! knows only this seam; [`openai::OpenAiModel`] implements it for the
//! OpenAI-compatible chat-completions API (DeepSeek by default, and vLLM,
//! llama.cpp, Ollama and others by configuration).

pub(crate) mod http;
pub mod openai;
mod sse;

use serde_json::value::RawValue;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// One message of a chat request.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    System(String),
    User(String),
    /// A user message with images (a prompt's image blocks when the model reads
    /// images): its parts in the order the person sent them.
    UserParts(Vec<UserPart>),
    /// What the model said in one step: text, and the tool calls it asked for.
    Assistant {
        content: Option<String>,
        tool_calls: Vec<ToolCallRequest>,
    },
    /// The result of the tool call `call_id`.
    Tool {
        call_id: String,
        content: String,
    },
}

/// One part of a [`Message::UserParts`].
#[derive(Debug, Clone, PartialEq)]
pub enum UserPart {
    Text(String),
    /// An image as its bytes in base64, with its MIME type.
    Image {
        mime_type: String,
        data: String,
    },
}

/// A tool call as the model asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    /// The raw argument text (JSON, if the model behaved).
    pub arguments: String,
}

/// One request: the conversation so far and the tools on offer.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub messages: Vec<Message>,
    /// OpenAI-style function definitions, as JSON text made once per tool.
    pub tools: Vec<Arc<RawValue>>,
    /// The model to name instead of the configured one (the person's pick for the
    /// session).
    pub model: Option<String>,
    /// A cap on the answer's tokens (a title's small budget); `None`: the server's.
    pub max_tokens: Option<u32>,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    /// Anything else the server said (e.g. `content_filter`).
    Other(String),
}

/// One piece of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    Text(String),
    Reasoning(String),
    /// A fragment of tool call `index`: its id and name arrive once, its
    /// arguments in pieces.
    ToolCallDelta {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    Usage {
        prompt_tokens: u64,
        completion_tokens: u64,
    },
    Finish(FinishReason),
}

/// Why a request failed. The text is for people: status and the server's own
/// message, never the key.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ModelError {
    #[error("the model server answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("cannot reach the model server: {0}")]
    Connect(String),
    #[error("the model stream broke: {0}")]
    Stream(String),
    #[error("the model server sent nothing for {0} ms")]
    Idle(u64),
    #[error("the model request was cancelled")]
    Cancelled,
}

/// A model that answers one streamed request at a time.
#[async_trait::async_trait]
pub trait Model: Send + Sync {
    /// A short description for logs and status ("deepseek-chat at https://...").
    fn describe(&self) -> String;

    /// Sends `request`, delivering events to `events` as they arrive, until the
    /// answer ends (`Ok`), fails, or `cancel` fires (`Err(Cancelled)`).
    async fn stream(
        &self,
        request: &ModelRequest,
        events: mpsc::UnboundedSender<ModelEvent>,
        cancel: &CancellationToken,
    ) -> Result<(), ModelError>;
}
