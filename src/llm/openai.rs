//! The OpenAI-compatible chat-completions adapter, streaming over SSE.
//!
//! Defaults point at DeepSeek; `[model]` in config and `DSH_MODEL_BASE_URL`,
//! `DSH_MODEL`, `DSH_API_KEY` in the environment point it anywhere that speaks
//! the same API. DeepSeek's `reasoning_content` deltas become reasoning events.
//! 429 and 5xx answers are retried a bounded number of times with backoff
//! (honouring `Retry-After`), but only before any of the answer has streamed:
//! a half-delivered answer is never silently restarted.

use super::http;
use super::sse::SseDecoder;
use super::{FinishReason, Message, Model, ModelError, ModelEvent, ModelRequest, UserPart};
use crate::config::ModelConfig;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Uri;
use hyper::body::{Body as _, Incoming};
use hyper::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue, PROXY_AUTHORIZATION, RETRY_AFTER,
};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Where requests go and how they are sent, resolved from config and environment.
#[derive(Clone)]
pub struct OpenAiModel {
    client: http::Client,
    /// `<base_url>/chat/completions`, or why `base_url` is not a URL: said at
    /// each prompt (as a connection error would be) rather than refusing to
    /// start the daemon, whose `!` commands work without a model.
    url: Result<Uri, String>,
    base_url: String,
    model: String,
    /// Where the API key comes from (the key file is read at each request, so a
    /// `dsh login` reaches a running daemon). The key is never printed: not in
    /// `Debug`, errors or logs.
    key: crate::auth::KeySource,
    /// `Proxy-Authorization` for a plain `http` endpoint reached through a proxy.
    proxy_auth: Option<HeaderValue>,
    max_retries: u32,
    retry_base: Duration,
    idle: Duration,
}

/// Why there is no model to talk to, in words that say what to set.
pub fn not_configured_text(config: &ModelConfig) -> String {
    format!(
        "No model is configured, so dsh cannot answer this prompt. For DeepSeek, set {} (or DSH_API_KEY) in \
         the daemon's environment. For another OpenAI-compatible server (vLLM, llama.cpp, Ollama, ...), set \
         DSH_MODEL_BASE_URL (e.g. http://127.0.0.1:8000/v1) and DSH_MODEL, or `base_url` and `model` under \
         [model] in the config file. Then restart the daemon (`dsh stop`). Prompts starting with `!` run as \
         shell commands without a model.",
        config.api_key_env
    )
}

/// The model `config` (with the environment's overrides and key) describes, as the daemon
/// uses it; `None` when none is configured.
pub fn configured(config: &ModelConfig) -> Result<Option<std::sync::Arc<dyn Model>>, String> {
    Ok(
        OpenAiModel::from_config(config, |name| std::env::var(name).ok())?.map(|m| {
            tracing::info!(model = %Model::describe(&m), "model configured");
            std::sync::Arc::new(m) as std::sync::Arc<dyn Model>
        }),
    )
}

impl OpenAiModel {
    /// The model the daemon should use. It is built even without a key: the key file
    /// may appear later (`dsh login`), and a prompt that needs a key and finds none is
    /// refused before it gets here (auth-required, src/acp/auth.rs). The `Option` stays
    /// for callers that build no model at all.
    pub fn from_config(
        config: &ModelConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, String> {
        let nonempty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let base_url = nonempty("DSH_MODEL_BASE_URL").unwrap_or_else(|| config.base_url.clone());
        let model = nonempty("DSH_MODEL").unwrap_or_else(|| config.model.clone());
        let key = crate::auth::KeySource::resolve(config, &env);
        let base_url = base_url.trim_end_matches('/').to_string();
        let url = format!("{base_url}/chat/completions")
            .parse()
            .ok()
            .filter(|u: &Uri| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some()
            })
            .ok_or_else(|| format!("the model base_url {base_url:?} is not an http(s) URL"));
        // Without a URL there is no proxy to choose; the client is never used.
        let (client, proxy_auth) = http::client(
            url.as_ref().unwrap_or(&Uri::default()),
            Duration::from_millis(config.connect_timeout_ms),
            &env,
        )?;
        Ok(Some(Self {
            client,
            url,
            base_url,
            model,
            key,
            proxy_auth,
            max_retries: config.max_retries,
            retry_base: Duration::from_millis(config.retry_base_ms),
            idle: Duration::from_millis(config.idle_timeout_ms),
        }))
    }

    /// The request's JSON. The tool definitions go in as the text they were made as
    /// (see [`ModelRequest::tools`]).
    fn body(&self, request: &ModelRequest) -> serde_json::Result<Vec<u8>> {
        #[derive(serde::Serialize)]
        struct Body<'a> {
            model: &'a str,
            messages: Vec<WireMessage<'a>>,
            stream: bool,
            stream_options: Value,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            tools: Vec<&'a serde_json::value::RawValue>,
            #[serde(skip_serializing_if = "Option::is_none")]
            max_tokens: Option<u32>,
        }
        serde_json::to_vec(&Body {
            model: request.model.as_deref().unwrap_or(&self.model),
            messages: request.messages.iter().map(WireMessage::from).collect(),
            stream: true,
            stream_options: json!({"include_usage": true}),
            tools: request.tools.iter().map(|t| &**t).collect(),
            max_tokens: request.max_tokens,
        })
    }

    fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        retry_after
            .unwrap_or_else(|| self.retry_base * 2u32.saturating_pow(attempt))
            .min(Duration::from_secs(60))
    }
}

impl OpenAiModel {
    /// One POST of `body` with the headers every request carries.
    fn post(&self, body: Bytes) -> Result<hyper::Request<Full<Bytes>>, ModelError> {
        let url = self.url.clone().map_err(ModelError::Connect)?;
        let mut post = hyper::Request::post(url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream");
        if let Some(key) = self.key.key() {
            let mut value = HeaderValue::try_from(format!("Bearer {key}")).map_err(|_| {
                ModelError::Connect("the API key is not a valid header value".into())
            })?;
            value.set_sensitive(true);
            post = post.header(AUTHORIZATION, value);
        }
        if let Some(auth) = &self.proxy_auth {
            post = post.header(PROXY_AUTHORIZATION, auth.clone());
        }
        post.body(Full::new(body))
            .map_err(|e| ModelError::Connect(format!("cannot build the request: {e}")))
    }
}

/// What one cheap request said about a key (`dsh login` checks before it stores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyCheck {
    /// The endpoint answered 2xx to a request carrying it.
    Accepted,
    /// The endpoint answered 401 or 403: the key is wrong.
    Rejected(String),
    /// Nothing conclusive (unreachable, another status): said, not judged.
    Unverified(String),
}

impl OpenAiModel {
    /// Sends `key` to `<base_url>/models` (a GET every OpenAI-compatible server has,
    /// which costs no tokens) and says what the answer means for the key.
    pub async fn check_key(&self, key: &str, timeout: Duration) -> KeyCheck {
        let url = match format!("{}/models", self.base_url).parse::<Uri>() {
            Ok(url) => url,
            Err(e) => return KeyCheck::Unverified(format!("the base_url is not a URL: {e}")),
        };
        let Ok(mut auth) = HeaderValue::try_from(format!("Bearer {key}")) else {
            return KeyCheck::Rejected("the key holds characters no header can carry".into());
        };
        auth.set_sensitive(true);
        let mut get = hyper::Request::get(url).header(AUTHORIZATION, auth);
        if let Some(proxy) = &self.proxy_auth {
            get = get.header(PROXY_AUTHORIZATION, proxy.clone());
        }
        let Ok(request) = get.body(Full::new(Bytes::new())) else {
            return KeyCheck::Unverified("cannot build the request".into());
        };
        match tokio::time::timeout(timeout, self.client.request(request)).await {
            Err(_) => KeyCheck::Unverified(format!(
                "{} did not answer within {} s",
                self.base_url,
                timeout.as_secs()
            )),
            Ok(Err(e)) => KeyCheck::Unverified(format!(
                "cannot reach {}: {}",
                self.base_url,
                http::error_text(&e)
            )),
            Ok(Ok(answer)) => {
                let status = answer.status();
                if status.is_success() {
                    KeyCheck::Accepted
                } else if status.as_u16() == 401 || status.as_u16() == 403 {
                    let cancel = CancellationToken::new();
                    let body = error_body(answer.into_body(), timeout, &cancel)
                        .await
                        .unwrap_or_default();
                    KeyCheck::Rejected(format!("{status}: {}", server_message(&body)))
                } else {
                    KeyCheck::Unverified(format!("{} answered {status}", self.base_url))
                }
            }
        }
    }
}

/// The next piece of an answer's body: `None` at its end. Trailers carry nothing
/// a chat stream uses and are skipped.
async fn next_data(body: &mut Incoming) -> Result<Option<Bytes>, hyper::Error> {
    loop {
        match body.frame().await {
            None => return Ok(None),
            Some(frame) => {
                if let Ok(data) = frame?.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// Reads what follows `[DONE]` (the terminating chunk of a chunked stream, which
/// a streaming server often writes a moment later) off the latency path. hyper
/// returns a connection to its pool only once the body has ended, and closes it
/// if the body is dropped before: every request would open a new connection, a
/// TLS handshake each for an `https` endpoint (BENCHMARKS.md, B7). Bounded in
/// time and bytes; a server that goes on talking loses the connection.
fn finish_in_background(mut body: Incoming) {
    if body.is_end_stream() {
        return;
    }
    tokio::spawn(async move {
        let drain = async {
            let mut left = 64 * 1024usize;
            while let Ok(Some(data)) = next_data(&mut body).await {
                left = left.checked_sub(data.len())?;
            }
            Some(())
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), drain).await;
    });
}

/// The body of an error answer as text, at most 64 KiB of it (its message is
/// all that is shown), bounded by the idle timeout and the cancel like a stream.
async fn error_body(
    mut body: Incoming,
    idle: Duration,
    cancel: &CancellationToken,
) -> Result<String, ModelError> {
    let mut bytes = Vec::new();
    while bytes.len() < 64 * 1024 {
        let next = tokio::select! {
            n = tokio::time::timeout(idle, next_data(&mut body)) => n,
            () = cancel.cancelled() => return Err(ModelError::Cancelled),
        };
        match next {
            Ok(Ok(Some(data))) => bytes.extend_from_slice(&data),
            // A body that breaks off still says what it said so far.
            Ok(Ok(None) | Err(_)) | Err(_) => break,
        }
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A message as the chat completions API takes it, serialized straight from the
/// conversation: building a `Value` first copied every message (the system prompt
/// and every tool result) at each request of a turn.
#[derive(serde::Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: WireContent<'a>,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// A user message's content: text, or OpenAI's content array.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum WireContent<'a> {
    Text(&'a str),
    Parts(Vec<WirePart<'a>>),
}

/// One part of a content array; an image goes as a data URL (servers that read
/// images take this form, and no file has to be hosted anywhere).
#[derive(serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: WireUrl },
}

#[derive(serde::Serialize)]
struct WireUrl {
    url: String,
}

#[derive(serde::Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(serde::Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

impl<'a> From<&'a Message> for WireMessage<'a> {
    fn from(m: &'a Message) -> Self {
        match m {
            Message::System(text) => WireMessage::System { content: text },
            Message::User(text) => WireMessage::User {
                content: WireContent::Text(text),
            },
            Message::UserParts(parts) => WireMessage::User {
                content: WireContent::Parts(
                    parts
                        .iter()
                        .map(|p| match p {
                            UserPart::Text(text) => WirePart::Text { text },
                            UserPart::Image { mime_type, data } => WirePart::ImageUrl {
                                image_url: WireUrl {
                                    url: format!("data:{mime_type};base64,{data}"),
                                },
                            },
                        })
                        .collect(),
                ),
            },
            Message::Assistant {
                content,
                tool_calls,
            } => WireMessage::Assistant {
                content: content.as_deref(),
                tool_calls: tool_calls
                    .iter()
                    .map(|c| WireCall {
                        id: &c.id,
                        kind: "function",
                        function: WireFunction {
                            name: &c.name,
                            arguments: &c.arguments,
                        },
                    })
                    .collect(),
            },
            Message::Tool { call_id, content } => WireMessage::Tool {
                tool_call_id: call_id,
                content,
            },
        }
    }
}

/// The server's own words from an error body, shortened.
fn server_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("error"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| body.trim().to_string());
    let mut short: String = message.chars().take(500).collect();
    if short.is_empty() {
        short = "(no message)".into();
    }
    short
}

/// Events in one streamed chunk (`data:` JSON). `Err` for a server-reported error
/// or JSON that is not a chat-completion chunk.
fn parse_chunk(data: &str) -> Result<Vec<ModelEvent>, ModelError> {
    let v: Value = serde_json::from_str(data).map_err(|e| {
        let shown: String = data.chars().take(200).collect();
        ModelError::Stream(format!("malformed event ({e}): {shown}"))
    })?;
    if let Some(error) = v.get("error") {
        return Err(ModelError::Stream(server_message(&error.to_string())));
    }
    let mut events = Vec::new();
    for choice in v
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let delta = &choice["delta"];
        if let Some(text) = delta.get("reasoning_content").and_then(Value::as_str)
            && !text.is_empty()
        {
            events.push(ModelEvent::Reasoning(text.to_string()));
        }
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            events.push(ModelEvent::Text(text.to_string()));
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let function = &call["function"];
            events.push(ModelEvent::ToolCallDelta {
                index: call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize,
                id: call.get("id").and_then(Value::as_str).map(str::to_string),
                name: function
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                arguments: function
                    .get("arguments")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            });
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            events.push(ModelEvent::Finish(match reason {
                "stop" => FinishReason::Stop,
                "length" => FinishReason::Length,
                "tool_calls" | "function_call" => FinishReason::ToolCalls,
                other => FinishReason::Other(other.to_string()),
            }));
        }
    }
    if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
        events.push(ModelEvent::Usage {
            prompt_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
            completion_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
        });
    }
    Ok(events)
}

#[async_trait::async_trait]
impl Model for OpenAiModel {
    fn describe(&self) -> String {
        format!("{} at {}", self.model, self.base_url)
    }

    async fn stream(
        &self,
        request: &ModelRequest,
        events: mpsc::UnboundedSender<ModelEvent>,
        cancel: &CancellationToken,
    ) -> Result<(), ModelError> {
        let body = Bytes::from(
            self.body(request)
                .map_err(|e| ModelError::Stream(format!("cannot encode the request: {e}")))?,
        );
        let mut attempt = 0;
        let response = loop {
            let sent = tokio::select! {
                r = self.client.request(self.post(body.clone())?) => r,
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
            };
            let (retryable, error, retry_after) = match sent {
                Err(e) => (
                    e.is_connect(),
                    ModelError::Connect(http::error_text(&e)),
                    None,
                ),
                Ok(r) if r.status().is_success() => break r,
                Ok(r) => {
                    let status = r.status();
                    let retry_after = r
                        .headers()
                        .get(RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let text = error_body(r.into_body(), self.idle, cancel).await?;
                    (
                        status.as_u16() == 429 || status.is_server_error(),
                        ModelError::Status {
                            status: status.as_u16(),
                            message: server_message(&text),
                        },
                        retry_after,
                    )
                }
            };
            if !retryable || attempt >= self.max_retries {
                return Err(error);
            }
            let pause = self.backoff(attempt, retry_after);
            tracing::warn!(attempt, ?pause, "model request failed ({error}); retrying");
            attempt += 1;
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
            }
        };
        let mut response = response.into_body();
        let mut decoder = SseDecoder::default();
        loop {
            let chunk = tokio::select! {
                c = tokio::time::timeout(self.idle, next_data(&mut response)) => c,
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
            };
            let chunk = match chunk {
                Err(_) => return Err(ModelError::Idle(self.idle.as_millis() as u64)),
                Ok(Err(e)) => return Err(ModelError::Stream(http::error_text(&e))),
                Ok(Ok(chunk)) => chunk,
            };
            let datas = match &chunk {
                Some(bytes) => decoder.feed(bytes).map_err(ModelError::Stream)?,
                None => decoder.finish().into_iter().collect(),
            };
            for data in datas {
                if data.trim() == "[DONE]" {
                    finish_in_background(response);
                    return Ok(());
                }
                for event in parse_chunk(&data)? {
                    let _ = events.send(event);
                }
            }
            if chunk.is_none() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_parse_into_events() {
        let e = parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"hm","content":"hi"}}]}"#)
            .unwrap();
        assert_eq!(
            e,
            [
                ModelEvent::Reasoning("hm".into()),
                ModelEvent::Text("hi".into())
            ]
        );
        let e = parse_chunk(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c1","function":{"name":"bash","arguments":"{\"co"}}]},"finish_reason":"tool_calls"}]}"#,
        )
        .unwrap();
        assert_eq!(
            e,
            [
                ModelEvent::ToolCallDelta {
                    index: 1,
                    id: Some("c1".into()),
                    name: Some("bash".into()),
                    arguments: "{\"co".into()
                },
                ModelEvent::Finish(FinishReason::ToolCalls)
            ]
        );
        assert!(matches!(parse_chunk("{nope"), Err(ModelError::Stream(_))));
        assert!(matches!(
            parse_chunk(r#"{"error":{"message":"overloaded"}}"#),
            Err(ModelError::Stream(m)) if m == "overloaded"
        ));
    }

    #[test]
    fn every_endpoint_builds_a_model_and_env_overrides_config() {
        let config = ModelConfig::default();
        // Without a key too: the key file may appear later (src/auth.rs).
        let m = OpenAiModel::from_config(&config, |_| None)
            .unwrap()
            .unwrap();
        assert!(!matches!(m.key, crate::auth::KeySource::Env { .. }));
        let m =
            OpenAiModel::from_config(&config, |k| (k == "DEEPSEEK_API_KEY").then(|| "sk".into()))
                .unwrap()
                .unwrap();
        assert_eq!(m.describe(), "deepseek-chat at https://api.deepseek.com");
        assert_eq!(m.key.key().as_deref(), Some("sk"));
        let m = OpenAiModel::from_config(&config, |k| match k {
            "DSH_MODEL_BASE_URL" => Some("http://127.0.0.1:9/v1/".into()),
            "DSH_MODEL" => Some("local".into()),
            _ => None,
        })
        .unwrap()
        .unwrap();
        assert_eq!(m.describe(), "local at http://127.0.0.1:9/v1");
        assert!(!matches!(m.key, crate::auth::KeySource::Env { .. }));
    }

    /// A model on a local address nothing listens on: for tests of request bodies.
    fn local_model() -> OpenAiModel {
        let config = ModelConfig {
            base_url: "http://127.0.0.1:9/v1".into(),
            ..ModelConfig::default()
        };
        OpenAiModel::from_config(&config, |_| None)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn images_go_as_data_url_parts_and_a_token_cap_as_max_tokens() {
        let m = local_model();
        let request = ModelRequest {
            messages: vec![Message::UserParts(vec![
                UserPart::Text("what is this?".into()),
                UserPart::Image {
                    mime_type: "image/png".into(),
                    data: "iVBORw0K".into(),
                },
            ])],
            tools: Vec::new(),
            model: None,
            max_tokens: Some(24),
        };
        let body: Value = serde_json::from_slice(&m.body(&request).unwrap()).unwrap();
        assert_eq!(body["max_tokens"], 24);
        assert_eq!(
            body["messages"][0],
            json!({"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}}]})
        );
        let plain = ModelRequest {
            max_tokens: None,
            ..request
        };
        let body: Value = serde_json::from_slice(&m.body(&plain).unwrap()).unwrap();
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn messages_and_tools_go_out_in_the_chat_completions_shape() {
        let m = local_model();
        let call = crate::llm::ToolCallRequest {
            id: "c1".into(),
            name: "bash".into(),
            arguments: "{\"command\":\"true\"}".into(),
        };
        let tool =
            crate::tools::schema::ToolSchema::new("t", "d", json!({"type": "object"})).unwrap();
        let request = ModelRequest {
            messages: vec![
                Message::System("be brief".into()),
                Message::User("hi".into()),
                Message::Assistant {
                    content: None,
                    tool_calls: vec![call],
                },
                Message::Tool {
                    call_id: "c1".into(),
                    content: "ok".into(),
                },
                Message::Assistant {
                    content: Some("done".into()),
                    tool_calls: Vec::new(),
                },
            ],
            tools: vec![tool.model_definition().clone()],
            model: Some("m".into()),
            max_tokens: None,
        };
        let text = String::from_utf8(m.body(&request).unwrap()).unwrap();
        // Key order as well as content: what a server sees, byte for byte.
        let expected = concat!(
            r#"{"model":"m","messages":["#,
            r#"{"role":"system","content":"be brief"},"#,
            r#"{"role":"user","content":"hi"},"#,
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","#,
            r#""function":{"name":"bash","arguments":"{\"command\":\"true\"}"}}]},"#,
            r#"{"role":"tool","tool_call_id":"c1","content":"ok"},"#,
            r#"{"role":"assistant","content":"done"}],"#,
            r#""stream":true,"stream_options":{"include_usage":true},"#,
            r#""tools":[{"type":"function","function":{"name":"t","description":"d","parameters":{"type":"object"}}}]}"#,
        );
        assert_eq!(text, expected);
    }

    #[tokio::test]
    async fn a_base_url_that_is_no_url_fails_each_request_not_the_daemon() {
        let config = ModelConfig::default();
        let m = OpenAiModel::from_config(&config, |k| {
            (k == "DSH_MODEL_BASE_URL").then(|| "localhost:8000/v1".into())
        })
        .unwrap()
        .unwrap();
        let request = ModelRequest {
            messages: vec![Message::User("hi".into())],
            tools: Vec::new(),
            model: None,
            max_tokens: None,
        };
        let (tx, _rx) = mpsc::unbounded_channel();
        let error = m
            .stream(&request, tx, &CancellationToken::new())
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ModelError::Connect(m) if m.contains("is not an http(s) URL")),
            "{error}"
        );
    }

    #[test]
    fn error_bodies_give_the_servers_words() {
        assert_eq!(
            server_message(r#"{"error":{"message":"bad key"}}"#),
            "bad key"
        );
        assert_eq!(server_message("plain"), "plain");
        assert_eq!(server_message(""), "(no message)");
    }
}
