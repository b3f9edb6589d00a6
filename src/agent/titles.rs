//! Model-written session titles (`[agent] titles = "model"`): after the first prompt
//! that goes to the model, a small request of its own asks for a 3-7 word title. It
//! runs in a task of its own, so the turn never waits for it; when it fails (or says
//! nothing usable) the session keeps the title from the prompt's first line.

use super::{EventSink, TurnEvent};
use crate::llm::{Message, Model, ModelEvent, ModelRequest};
use crate::registry::Session;
use crate::store::{Event, SessionLog, now_ms};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the title request tells the model.
const INSTRUCTION: &str = "Write a title of 3 to 7 words for a coding conversation that \
    begins with the user's message below. Answer with the title only: one line, no quotes, \
    no trailing period.";

/// The answer's token budget: a title, not an essay.
const MAX_TOKENS: u32 = 24;

/// How much of the prompt the model is shown, in characters: its start says what the
/// conversation is about.
const PROMPT_CHARS: usize = 2_000;

/// How long a title request may take in all; past it the first-line title stays (the
/// task never lingers on a server that hangs).
const DEADLINE: Duration = Duration::from_secs(60);

/// Longest title, in characters.
const TITLE_CHARS: usize = 60;

/// A title from a model's answer: its first non-empty line, without quotes, a
/// `Title:` label or a trailing period, whitespace collapsed, at most 60 characters
/// (cut at a word boundary when there is one). `None` when nothing is left.
pub fn sanitize(answer: &str) -> Option<String> {
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = ["title:", "title -"]
        .iter()
        .find_map(|label| {
            line.get(..label.len())
                .filter(|head| head.eq_ignore_ascii_case(label))
                .map(|_| &line[label.len()..])
        })
        .unwrap_or(line);
    let unquoted: String = line
        .chars()
        .filter(|c| !matches!(c, '"' | '`' | '“' | '”' | '«' | '»' | '*'))
        .collect();
    let words: Vec<&str> = unquoted.split_whitespace().collect();
    let mut title = words.join(" ");
    title = title
        .trim_matches(|c: char| matches!(c, '\'' | '‘' | '’') || c.is_whitespace())
        .trim_end_matches(['.', ':'])
        .trim()
        .to_string();
    if title.chars().count() > TITLE_CHARS {
        let cut: String = title.chars().take(TITLE_CHARS).collect();
        title = match cut.rfind(' ') {
            Some(space) if space > 0 => cut[..space].to_string(),
            _ => cut,
        };
        title = title.trim_end().to_string();
    }
    (!title.is_empty()).then_some(title)
}

/// The request for a title of a conversation starting with `prompt`.
fn request(prompt: &str, model: Option<String>) -> ModelRequest {
    let shown: String = prompt.chars().take(PROMPT_CHARS).collect();
    ModelRequest {
        messages: vec![Message::System(INSTRUCTION.into()), Message::User(shown)],
        tools: Vec::new(),
        model,
        max_tokens: Some(MAX_TOKENS),
    }
}

/// Asks `model` for the session's title in a task of its own. When a usable title
/// comes back it is logged, becomes the session's title and goes to `events`
/// (whichever connection the session is bound to by then); the request's usage is
/// logged (under `usage_name`) so the session's cost counts it. `picked` is the
/// session's pick of model, if any. Nothing waits for the task.
pub fn spawn(
    model: Arc<dyn Model>,
    session: Arc<Session>,
    log: Option<Arc<SessionLog>>,
    prompt: &str,
    (picked, usage_name): (Option<String>, String),
    events: EventSink,
) {
    let request = request(prompt, picked);
    tokio::spawn(async move {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let outcome = tokio::time::timeout(DEADLINE, model.stream(&request, tx, &cancel)).await;
        let (mut answer, mut usage) = (String::new(), None);
        while let Ok(event) = rx.try_recv() {
            match event {
                ModelEvent::Text(t) => answer.push_str(&t),
                ModelEvent::Usage {
                    prompt_tokens,
                    completion_tokens,
                } => usage = Some((prompt_tokens, completion_tokens)),
                _ => {}
            }
        }
        let append = |event: Event| {
            if let Some(log) = &log
                && let Err(e) = log.append(&event)
            {
                tracing::error!(session = %session.id, "session log append failed: {e}");
            }
        };
        if let Some((prompt_tokens, completion_tokens)) = usage {
            append(Event::Usage {
                at_ms: now_ms(),
                model: usage_name,
                prompt_tokens,
                completion_tokens,
            });
        }
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::info!(session = %session.id, "no model-written title: {e}");
                return;
            }
            Err(_) => {
                tracing::info!(session = %session.id, "no model-written title: no answer in time");
                return;
            }
        }
        let Some(title) = sanitize(&answer) else {
            tracing::info!(session = %session.id, "no model-written title: the answer was empty");
            return;
        };
        append(Event::Title {
            at_ms: now_ms(),
            title: title.clone(),
        });
        session.set_title(Some(title.clone()));
        events(TurnEvent::TitleChanged(&title));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_one_clean_line_of_at_most_60_characters() {
        assert_eq!(
            sanitize("\n  \"Fix the flaky CI build\".\nmore").as_deref(),
            Some("Fix the flaky CI build")
        );
        assert_eq!(
            sanitize("Title: `Debug   user's login`").as_deref(),
            Some("Debug user's login")
        );
        assert_eq!(
            sanitize("“Refactor parser”").as_deref(),
            Some("Refactor parser")
        );
        assert_eq!(sanitize(" \n \"\" \n"), None);
        let long = sanitize(&"word ".repeat(30)).unwrap();
        assert!(long.chars().count() <= 60 && !long.ends_with(' '), "{long}");
        assert!(long.ends_with("word"), "cut at a word boundary: {long}");
        let unbroken = sanitize(&"x".repeat(100)).unwrap();
        assert_eq!(unbroken.chars().count(), 60);
    }

    #[test]
    fn the_request_is_small_and_shows_the_start_of_the_prompt() {
        let r = request(&"y".repeat(5_000), Some("m".into()));
        assert_eq!(r.max_tokens, Some(MAX_TOKENS));
        assert!(r.tools.is_empty());
        let Message::User(shown) = &r.messages[1] else {
            panic!("{:?}", r.messages)
        };
        assert_eq!(shown.chars().count(), PROMPT_CHARS);
    }
}
