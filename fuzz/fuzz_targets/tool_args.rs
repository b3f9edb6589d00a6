//! Tool-argument checking (spec T1): arbitrary JSON against the three tool
//! schemas, and the policy's reading of the same arguments.
//!
//! Checked, besides "no panic": a non-object is always refused; every refusal
//! says `invalid arguments: ...`; whatever the `bash` schema accepts has the
//! types the bash tool relies on (string `command` and `description`, number
//! `timeoutMs`, string `workdir`, boolean `run_in_background`, `sandbox` only
//! `"off"`, string `justification`); a `bash` call the policy cannot read (no
//! string command) is denied, never allowed; under the sandbox, a call asking to
//! leave it (issue 27) is judged so exactly when the tool would run it outside, and
//! with no rules nothing but a command that runs nothing lets it out unasked, and
//! nothing is offered to "allow always".

#![no_main]

use dsh::config::{Decision, Mode, PermissionsConfig};
use dsh::policy::{Cause, Escalation, Place, Policy};
use dsh::tools::schema::{BASH, BASH_KILL, BASH_OUTPUT, ToolSchema};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

struct Fixture {
    bash: ToolSchema,
    output: ToolSchema,
    kill: ToolSchema,
    policy: Policy,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture {
        bash: ToolSchema::parse(BASH).expect("bash schema"),
        output: ToolSchema::parse(BASH_OUTPUT).expect("bash_output schema"),
        kill: ToolSchema::parse(BASH_KILL).expect("bash_kill schema"),
        policy: Policy::new(&PermissionsConfig::default()),
    })
}

fn optional_is(args: &Value, key: &str, ok: fn(&Value) -> bool) -> bool {
    args.get(key).is_none_or(ok)
}

fuzz_target!(init: tolerate_caught_parser_panics(), |data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let f = fixture();
    for schema in [&f.bash, &f.output, &f.kill] {
        let checked = schema.check(&args);
        if !args.is_object() {
            assert!(
                checked.is_err(),
                "{} accepted a non-object: {args}",
                schema.name()
            );
        }
        match checked {
            Err(e) => assert!(e.starts_with("invalid arguments: "), "{e}"),
            Ok(()) if schema.name() == "bash" => {
                assert!(args["command"].is_string(), "{args}");
                assert!(args["description"].is_string(), "{args}");
                assert!(optional_is(&args, "timeoutMs", Value::is_number), "{args}");
                assert!(optional_is(&args, "workdir", Value::is_string), "{args}");
                assert!(
                    optional_is(&args, "run_in_background", Value::is_boolean),
                    "{args}"
                );
                assert!(optional_is(&args, "sandbox", |v| v == "off"), "{args}");
                assert!(
                    optional_is(&args, "justification", Value::is_string),
                    "{args}"
                );
            }
            Ok(()) => assert!(args["task_id"].is_string(), "{args}"),
        }
    }
    let root = std::path::Path::new("/");
    let sandboxed = Place {
        cwd: root,
        roots: &[],
        sandbox_roots: Some(&[]),
        read_only_tool: false,
        globs: None,
    };
    let leaves = args["command"].is_string() && matches!(Escalation::requested(&args), Ok(Some(_)));
    for mode in [Mode::Ask, Mode::Auto, Mode::ReadOnly] {
        let judged = f.policy.judge("bash", &args, mode, &[]);
        if !args["command"].is_string() {
            assert_eq!(judged.decision, Decision::Deny, "{args}");
        }
        assert!(judged.escalation.is_none(), "{args}");
        let judged = f.policy.judge_in("bash", &args, mode, &[], Some(&sandboxed));
        assert_eq!(judged.escalation.is_some(), leaves, "{args}");
        if leaves {
            assert!(judged.grants_on_allow_always.is_empty(), "{args}");
            for segment in &judged.segments {
                assert!(
                    segment.decision != Decision::Allow || segment.cause == Cause::RunsNothing,
                    "{args}: {segment:?}"
                );
            }
        }
    }
});

/// brush-parser panics on some input (a file descriptor number too large for an
/// i32 in a redirection, `77777777777<>`, found by this fuzzer). dsh runs every
/// parse under `catch_unwind` and treats such a line as
/// unparsable (never allowed), which the checks here hold it to. libfuzzer-sys
/// aborts on any panic, caught or not, so a panic inside the walk is left to
/// its `catch_unwind`; any other panic still aborts.
fn tolerate_caught_parser_panics() {
    let abort = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if dsh::policy::shell::in_walk() {
            return;
        }
        abort(info);
    }));
}
