//! What a session's log says about its settings, folded: the one reading of the log a
//! load applies to the live session (mode, model, switches, "always" answers, title).
//! Pure, so what a load restores is testable without a daemon.

use super::{Event, Header, latest_title};
use crate::config::Mode;
use crate::policy::Grant;
use std::collections::BTreeMap;

/// A session's settings as its log leaves them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionState {
    /// The last mode set (one this build does not know is skipped).
    pub mode: Option<Mode>,
    /// The last model chosen.
    pub model: Option<String>,
    /// Each switch (`option_set`) at its last value.
    pub options: BTreeMap<String, bool>,
    /// "Allow always" and "reject always" answers still in force (a revoke withdraws one).
    pub grants: Vec<Grant>,
    pub rejections: Vec<Grant>,
    /// The latest title, else the header's.
    pub title: Option<String>,
}

impl SessionState {
    /// Folds `events` in order.
    pub fn from_events(header: &Header, events: &[Event]) -> Self {
        let mut state = SessionState {
            title: latest_title(header, events).map(str::to_string),
            ..SessionState::default()
        };
        let add = |list: &mut Vec<Grant>, grants: &[Grant]| {
            for grant in grants {
                if !list.contains(grant) {
                    list.push(grant.clone());
                }
            }
        };
        for event in events {
            match event {
                Event::ModeChange { mode_id, .. } => {
                    if let Some(mode) = Mode::from_id(mode_id) {
                        state.mode = Some(mode);
                    }
                }
                Event::ModelChange { model, .. } => state.model = Some(model.clone()),
                Event::OptionSet { option, value, .. } => {
                    state.options.insert(option.clone(), *value);
                }
                Event::Grant {
                    prefixes,
                    allow: true,
                    ..
                } => add(&mut state.grants, prefixes),
                Event::Grant {
                    prefixes,
                    allow: false,
                    ..
                } => add(&mut state.rejections, prefixes),
                Event::Revoke { prefix, .. } => {
                    state.grants.retain(|g| g != prefix);
                    state.rejections.retain(|g| g != prefix);
                }
                _ => {}
            }
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_folds_to_its_last_settings_with_revoked_answers_gone() {
        let header = Header {
            id: "s".into(),
            cwd: "/w".into(),
            created_ms: 0,
            title: Some("first".into()),
        };
        let grant = |words: &str, allow| Event::Grant {
            at_ms: 0,
            prefixes: vec![Grant::of(words)],
            allow,
        };
        let events = [
            Event::ModeChange {
                at_ms: 0,
                mode_id: "auto".into(),
            },
            Event::ModeChange {
                at_ms: 0,
                mode_id: "a-mode-of-a-newer-dsh".into(),
            },
            Event::ModelChange {
                at_ms: 0,
                model: "m1".into(),
            },
            Event::ModelChange {
                at_ms: 0,
                model: "m2".into(),
            },
            grant("git push", true),
            grant("rm", false),
            grant("make", true),
            Event::Revoke {
                at_ms: 0,
                prefix: Grant::of("git push"),
            },
            grant("git push", true),
            Event::Revoke {
                at_ms: 0,
                prefix: Grant::of("make"),
            },
            Event::OptionSet {
                at_ms: 0,
                option: "think_harder".into(),
                value: true,
            },
            Event::OptionSet {
                at_ms: 0,
                option: "think_harder".into(),
                value: false,
            },
        ];
        let state = SessionState::from_events(&header, &events);
        assert_eq!(state.mode, Some(Mode::Auto));
        assert_eq!(state.model.as_deref(), Some("m2"));
        assert_eq!(state.grants, [Grant::of("git push")]);
        assert_eq!(state.rejections, [Grant::of("rm")]);
        assert_eq!(state.options.get("think_harder"), Some(&false));
        assert_eq!(state.title.as_deref(), Some("first"));
    }
}
