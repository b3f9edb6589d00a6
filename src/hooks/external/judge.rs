//! Model judges (`run = "model"`): a hook whose program is a model. The daemon asks the
//! model (the `[model]` endpoint, or the hook's own `base_url` and `model`) with the
//! hook's `prompt` and the event's input, and expects `{decision, reason}`, as JSON text
//! or through the `decide` tool it is offered. It fails closed: an API error, no answer in
//! time, or an answer that does not read denies, and the reason says which. Identical
//! inputs within a session are answered once (the cache keeps answers, never failures).
//! Only the reason, bounded, ever reaches the calling model; the judge's other text stays
//! in the trace's raw answer.

use super::protocol::{Answer, PermissionReply};
use crate::config::{Decision, ExternalHookConfig, HookEvent, ModelConfig};
use crate::llm::openai::OpenAiModel;
use crate::llm::{Message, Model, ModelEvent, ModelRequest};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The longest reason of a judge that is kept (the calling model reads it on a deny).
const MAX_REASON_CHARS: usize = 300;
/// The most answers one judge remembers; past it the cache starts again.
const MAX_CACHED: usize = 4096;
/// How much of an unreadable answer the trace shows.
const SHOWN_CHARS: usize = 200;

/// Why a judge failed: each denies, and the trace names which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JudgeFailure {
    /// The endpoint answered an error or could not be reached.
    Api(String),
    /// No whole answer within the hook's timeout.
    Timeout(u64),
    /// An answer that is not `{decision, reason}`.
    Unparsable(String),
}

impl std::fmt::Display for JudgeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Api(e) => write!(f, "model judge failed: API error: {e}"),
            Self::Timeout(ms) => write!(f, "model judge failed: timeout: no answer within {ms}ms"),
            Self::Unparsable(shown) => {
                write!(f, "model judge failed: unparsable answer: {shown:?}")
            }
        }
    }
}

/// What a judge said: its answer (or failure), the model's own text, and whether the
/// answer came from the cache.
pub struct Judged {
    pub answer: Result<Answer, JudgeFailure>,
    pub raw: Option<String>,
    pub cached: bool,
}

/// One model judge.
pub struct ModelJudge {
    model: Arc<dyn Model>,
    prompt: String,
    /// Answers by (session, input digest).
    cache: Mutex<HashMap<(String, [u8; 32]), Answer>>,
}

/// The tool a judge may answer through.
const DECIDE_TOOL: &str = r#"{"type":"function","function":{"name":"decide","description":"Give your decision on the event.","parameters":{"type":"object","properties":{"decision":{"type":"string","enum":["allow","ask","deny"]},"reason":{"type":"string"}},"required":["decision","reason"]}}}"#;

const INSTRUCTIONS: &str = "You judge one event of a coding agent's tool use for its user, by the \
    policy below. The event is the JSON of the user's message. Answer with only a JSON object \
    {\"decision\": \"allow\" | \"ask\" | \"deny\", \"reason\": \"...\"}, or call the `decide` tool \
    with those fields. `ask` puts the call to the person.\n\nPolicy:\n";

impl ModelJudge {
    /// The judge `hook` describes, over the daemon's `[model]` (its endpoint, key and
    /// timeouts), with the hook's `base_url` and `model` in place of the endpoint's when
    /// set. Retries are off: a judge that fails denies at once rather than holding the call.
    pub fn new(hook: &ExternalHookConfig, model: &ModelConfig) -> Result<Self, String> {
        let mut config = model.clone();
        if let Some(base_url) = &hook.base_url {
            config.base_url = base_url.clone();
        }
        if let Some(name) = &hook.model {
            config.model = name.clone();
        }
        config.max_retries = 0;
        // The hook's own endpoint wins over the environment's overrides of [model].
        let own = hook.base_url.is_some() || hook.model.is_some();
        let env = |name: &str| {
            if own && matches!(name, "DSH_MODEL_BASE_URL" | "DSH_MODEL") {
                return None;
            }
            std::env::var(name).ok()
        };
        let model = OpenAiModel::from_config(&config, env)?
            .ok_or_else(|| "no model endpoint".to_string())?;
        Ok(Self {
            model: Arc::new(model),
            prompt: hook.prompt.clone().unwrap_or_default(),
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Judges `input` (the event's v2 JSON) for `session`, within `timeout`.
    pub async fn judge(
        &self,
        event: HookEvent,
        input: &Value,
        session: Option<&str>,
        timeout: Duration,
    ) -> Judged {
        let key = (session.unwrap_or_default().to_string(), digest(input));
        if let Some(answer) = lock(&self.cache).get(&key).cloned() {
            return Judged {
                answer: Ok(answer),
                raw: None,
                cached: true,
            };
        }
        let request = ModelRequest {
            messages: vec![
                Message::System(format!("{INSTRUCTIONS}{}", self.prompt)),
                Message::User(input.to_string()),
            ],
            tools: serde_json::value::RawValue::from_string(DECIDE_TOOL.to_string())
                .map(|t| vec![Arc::from(t)])
                .unwrap_or_default(),
            model: None,
            max_tokens: None,
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let _stop = cancel.clone().drop_guard();
        let asked = async {
            let streamed = self.model.stream(&request, tx, &cancel).await;
            let (mut text, mut arguments, mut called) = (String::new(), String::new(), false);
            while let Ok(event) = rx.try_recv() {
                match event {
                    ModelEvent::Text(t) => text.push_str(&t),
                    ModelEvent::ToolCallDelta {
                        index: 0,
                        name,
                        arguments: a,
                        ..
                    } => {
                        called |= name.is_some();
                        arguments.push_str(&a);
                    }
                    _ => {}
                }
            }
            streamed.map(|()| if called { arguments } else { text })
        };
        let said = match tokio::time::timeout(timeout, asked).await {
            Err(_) => Err(JudgeFailure::Timeout(timeout.as_millis() as u64)),
            Ok(Err(e)) => Err(JudgeFailure::Api(e.to_string())),
            Ok(Ok(said)) => Ok(said),
        };
        let raw = said.as_ref().ok().cloned();
        let answer = said.and_then(|text| read_answer(event, &text));
        if let Ok(answer) = &answer {
            let mut cache = lock(&self.cache);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
            cache.insert(key, answer.clone());
        }
        Judged {
            answer,
            raw,
            cached: false,
        }
    }
}

/// The input without what differs between identical calls (the call's id).
fn digest(input: &Value) -> [u8; 32] {
    let mut input = input.clone();
    if let Some(object) = input.as_object_mut() {
        object.remove("callId");
    }
    Sha256::digest(input.to_string().as_bytes()).into()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads a judge's text (or its `decide` call's arguments): the JSON object in it, code
/// fences and words around it allowed, with a decision dsh knows.
fn read_answer(event: HookEvent, text: &str) -> Result<Answer, JudgeFailure> {
    #[derive(Deserialize)]
    struct Said {
        decision: Decision,
        #[serde(default)]
        reason: String,
    }
    let shown = || JudgeFailure::Unparsable(text.chars().take(SHOWN_CHARS).collect());
    let (start, end) = match (text.find('{'), text.rfind('}')) {
        (Some(start), Some(end)) if start < end => (start, end),
        _ => return Err(shown()),
    };
    let said: Said = serde_json::from_str(&text[start..=end]).map_err(|_| shown())?;
    let mut reason: String = said.reason.chars().take(MAX_REASON_CHARS).collect();
    if reason.is_empty() {
        reason = "the model judge said so".into();
    }
    Ok(Answer {
        decision: Some(said.decision),
        reason,
        permission: (event == HookEvent::Permission).then_some(match said.decision {
            Decision::Allow => PermissionReply::AllowOnce,
            Decision::Deny => PermissionReply::Reject,
            Decision::Ask => PermissionReply::Pass,
        }),
        ..Answer::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_strictly_and_reasons_stay_short() {
        let a = read_answer(
            HookEvent::PreTool,
            "```json\n{\"decision\": \"deny\", \"reason\": \"wipes the disk\"}\n```",
        )
        .unwrap();
        assert_eq!(
            (a.decision, a.reason.as_str()),
            (Some(Decision::Deny), "wipes the disk")
        );
        let long = format!(r#"{{"decision":"ask","reason":"{}"}}"#, "x".repeat(5000));
        assert_eq!(
            read_answer(HookEvent::PreTool, &long).unwrap().reason.len(),
            MAX_REASON_CHARS
        );
        for bad in ["sure, go ahead", r#"{"decision":"maybe"}"#, "{}", ""] {
            assert!(
                matches!(
                    read_answer(HookEvent::PreTool, bad),
                    Err(JudgeFailure::Unparsable(_))
                ),
                "{bad}"
            );
        }
        let p = read_answer(HookEvent::Permission, r#"{"decision":"allow"}"#).unwrap();
        assert_eq!(p.permission, Some(PermissionReply::AllowOnce));
    }

    #[test]
    fn identical_calls_digest_alike() {
        let a = serde_json::json!({"callId": "1", "tool": "bash", "arguments": {"command": "ls"}});
        let b = serde_json::json!({"callId": "2", "tool": "bash", "arguments": {"command": "ls"}});
        let c = serde_json::json!({"callId": "2", "tool": "bash", "arguments": {"command": "rm"}});
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&c));
    }
}
