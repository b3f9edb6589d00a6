//! Shell-segment judging (the waterfall's policy): arbitrary command lines
//! through `policy::shell::segments` and `Policy::judge` in every mode.
//!
//! Checked, besides "no panic" (the parser runs on its own thread; a panic
//! there must come back as an error, and anything else aborts):
//! - a command that cannot be parsed is never allowed;
//! - a segment that names `rm` (a deny rule) makes the whole line denied, in
//!   every mode, wherever it sits (after `;`, in `$( )`, behind `sudo`...);
//! - a segment whose command cannot be known before it runs (opaque) is never
//!   allowed (P5);
//! - read-only mode allows only lines whose every segment is a known reader
//!   (or runs nothing), with no writing redirection and no name known only at
//!   run time;
//! - judging is deterministic;
//! - P8: a segment whose inline interpreter code holds the word `rm` (the deny rule's
//!   word) makes the line denied in every mode;
//! - P3b: a segment found through a program's option, config key or environment variable
//!   (its chain names the place, `tar --to-command`, `env PAGER`) is judged like any other:
//!   the checks above hold for it too, and explaining it never fails.

#![no_main]

use dsh::config::{Decision, Mode, PermissionRule, PermissionsConfig};
use dsh::policy::Policy;
use dsh::policy::inline::inline_code;
use dsh::policy::shell;
use libfuzzer_sys::fuzz_target;
use serde_json::json;
use std::sync::OnceLock;

fn config() -> &'static PermissionsConfig {
    static C: OnceLock<PermissionsConfig> = OnceLock::new();
    C.get_or_init(|| {
        let rule = |command: &str, action| PermissionRule {
            tool: "bash".into(),
            command: Some(command.into()),
            action,
            ..PermissionRule::default()
        };
        PermissionsConfig {
            rules: vec![
                rule("rm", Decision::Deny),
                rule("git status", Decision::Allow),
                rule("curl", Decision::Ask),
            ],
            ..PermissionsConfig::default()
        }
    })
}

fn policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| Policy::new(config()))
}

fn read_only_prefixes() -> &'static Vec<Vec<String>> {
    static R: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    R.get_or_init(|| {
        config()
            .read_only_commands
            .iter()
            .map(|c| c.split_whitespace().map(str::to_owned).collect())
            .collect()
    })
}

fuzz_target!(init: tolerate_caught_parser_panics(), |data: &[u8]| {
    let command = String::from_utf8_lossy(data);
    let args = json!({"command": command, "description": "fuzz"});
    let parsed = shell::segments(&command);
    for mode in [Mode::Ask, Mode::Auto, Mode::ReadOnly] {
        let judged = policy().judge("bash", &args, mode, &[]);
        let again = policy().judge("bash", &args, mode, &[]);
        assert_eq!(judged, again, "judging is not deterministic: {command:?}");
        let segments = match &parsed {
            Err(_) => {
                assert_ne!(
                    judged.decision,
                    Decision::Allow,
                    "unparsable allowed: {command:?}"
                );
                continue;
            }
            Ok(segments) => segments,
        };
        if segments
            .iter()
            .any(|s| s.opaque.is_none() && s.words.first().is_some_and(|w| w == "rm"))
        {
            assert_eq!(
                judged.decision,
                Decision::Deny,
                "a segment named by a deny rule was not denied ({mode:?}): {command:?} -> {segments:?}"
            );
        }
        // P8: inline code not shown harmless naming the denied command as a word denies,
        // in every mode (issue 41: code shown harmless cannot run it).
        if segments.iter().any(|s| {
            s.opaque.is_none()
                && inline_code(&s.words, s.stdin.as_deref())
                    .is_some_and(|code| !code.is_harmless() && code.words.iter().any(|w| w == "rm"))
        }) {
            assert_eq!(
                judged.decision,
                Decision::Deny,
                "inline code naming `rm` was not denied ({mode:?}): {command:?}"
            );
        }
        // P5: a segment whose command cannot be known is never allowed (no rule here
        // allows every call).
        if judged.decision == Decision::Allow {
            assert!(
                segments.iter().all(|s| s.opaque.is_none()),
                "an opaque segment was allowed ({mode:?}): {command:?} -> {segments:?}"
            );
        }
        // Explaining never fails, whatever was judged.
        let _ = dsh::policy::explain::render(&command, mode.id(), &judged);
        if mode == Mode::ReadOnly && judged.decision == Decision::Allow {
            for s in segments {
                assert!(
                    s.opaque.is_none() && !s.writes_redirect(),
                    "{command:?} -> {s:?}"
                );
                assert!(
                    s.words.is_empty()
                        || read_only_prefixes().iter().any(|p| s.words.starts_with(p)),
                    "read-only allowed a non-reader: {command:?} -> {s:?}"
                );
            }
        }
    }
});

/// brush-parser panics on some input (a file descriptor number too large for an
/// i32 in a redirection, `77777777777<>`, found by this fuzzer). dsh runs every
/// parse under `catch_unwind` and treats such a line as
/// unparsable (never allowed), which the checks here hold it to. libfuzzer-sys
/// aborts on any panic, caught or not, so a panic inside the walk is left to its
/// `catch_unwind`; any other panic still aborts.
fn tolerate_caught_parser_panics() {
    let abort = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if dsh::policy::shell::in_walk() {
            return;
        }
        abort(info);
    }));
}
