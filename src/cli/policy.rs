//! `dsh policy explain|replay|shadow-report|grants`: the policy asked without a
//! session, judging as the daemon would (the one `Policy::judge`).

use crate::cli::check_config::{load_checked, project_of};
use crate::cli::reach::{Where, ask_daemon_typed, runtime};
use dsh::config::Config;
use dsh::rpc::client::ClientError;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The call `dsh policy explain` judges: a bash command line (with its `sandbox: "off"`
/// and `justification` when `leave_sandbox` gives one), or for `network` HOST[:PORT].
pub(crate) struct Explained<'a> {
    pub(crate) tool: &'a str,
    pub(crate) text: &'a str,
    pub(crate) leave_sandbox: Option<String>,
}

/// A file tool's call for `dsh policy explain`.
struct ExplainedFile<'a> {
    tool: &'a str,
    path: &'a str,
    leave_sandbox: Option<&'a str>,
}

/// `dsh policy explain --tool read_file|edit_file|write_file -- PATH`: the policy's
/// judgement and, under the sandbox, which entry of its layout decides the file
/// (issue 39), as the daemon would for a session in `cwd`.
fn explain_file(
    config: &dsh::config::Config,
    cwd: &Path,
    call: &ExplainedFile<'_>,
    (policy, mode, grants): (
        &dsh::policy::Policy,
        dsh::config::Mode,
        &[dsh::policy::Grant],
    ),
    json: bool,
) -> Result<(), String> {
    let mut arguments = serde_json::json!({ "path": call.path });
    if let Some(justification) = call.leave_sandbox {
        arguments["sandbox"] = "off".into();
        arguments["justification"] = justification.into();
    }
    let sandbox = dsh::tools::bash::SandboxTerms::of(&config.exec);
    let roots = vec![cwd.to_path_buf()];
    let at = dsh::hooks::rules::SessionPlace::new(
        cwd.to_path_buf(),
        roots.clone(),
        sandbox.as_ref().map(|t| t.writable.as_slice()),
    );
    let judged = policy.judge_in(call.tool, &arguments, mode, grants, Some(&at.place(false)));
    let intent = if dsh::tools::files::writes(call.tool) {
        dsh::exec::FileIntent::Write
    } else {
        dsh::exec::FileIntent::Read
    };
    let path = dsh::tools::files::resolve(cwd, call.path);
    let containment = match sandbox {
        Some(_) => Some(dsh::exec::sandbox::explain_file(
            &config.exec,
            &roots,
            &path,
            intent,
        )?),
        None => None,
    };
    if json {
        let value = serde_json::json!({
            "tool": call.tool,
            "path": path,
            "mode": mode.id(),
            "judgement": judged,
            "containment": containment,
        });
        println!("{value:#}");
        return Ok(());
    }
    print!(
        "{}",
        dsh::policy::explain::render_file(call.tool, &path.to_string_lossy(), mode.id(), &judged)
    );
    match (&containment, &judged.escalation) {
        (Some(c), None) => println!("  sandbox: {c}"),
        (Some(c), Some(_)) => println!("  sandbox (left if allowed): {c}"),
        (None, _) => println!("  sandbox: none ([exec] kind is not \"sandbox\")"),
    }
    Ok(())
}

/// `dsh policy explain`: the policy's judgement of one call, with nothing run, judged as
/// the policy hook judges it in a session working in `cwd`.
pub(crate) fn explain(
    path: Option<&Path>,
    state_dir: Option<PathBuf>,
    cwd: Option<PathBuf>,
    mode: Option<&str>,
    grants: &[String],
    call: Explained<'_>,
    json: bool,
) -> Result<(), String> {
    let Explained {
        tool,
        text: command,
        leave_sandbox,
    } = call;
    let mut config = load_checked(path)?;
    if let Some(dir) = state_dir {
        config.exec.state_dir = Some(dir);
    }
    // The user's "always" answers, as the daemon reads them at its start.
    let user = dsh::registry::UserGrants::of_config(&config)?;
    let cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    // Judged as a session there is: the user's rules and what its project adds.
    let project = project_of(&cwd, &config);
    if let Some(project) = &project {
        config.permissions = project.permissions.clone();
        if let Some(mode) = project.default_mode {
            config.permissions.default_mode = mode;
        }
    }
    let mode = match mode {
        Some(id) => dsh::config::Mode::from_id(id).ok_or_else(|| format!("unknown mode {id}"))?,
        None => config.permissions.default_mode,
    };
    // As `dsh policy grants` shows them: `git push`, or `network HOST` for a host; then
    // the user's, as a session holding these grants is judged.
    let grants: Vec<dsh::policy::Grant> = grants
        .iter()
        .flat_map(|g| dsh::policy::Grant::named(g))
        .collect();
    let grants = user.applied_to(&grants);
    let policy = dsh::policy::Policy::of_config(&config);
    if tool == dsh::policy::NETWORK_TOOL {
        let arguments = dsh::policy::network::explain_arguments(command)?;
        let judged = policy.judge(tool, &arguments, mode, &grants);
        let target = dsh::policy::network::target(
            arguments["host"].as_str().unwrap_or_default(),
            arguments["port"].as_u64().unwrap_or_default() as u16,
        );
        if json {
            let value = serde_json::json!({
                "tool": tool,
                "host": arguments["host"],
                "port": arguments["port"],
                "mode": mode.id(),
                "judgement": judged,
            });
            println!("{value:#}");
        } else {
            print!(
                "{}",
                dsh::policy::explain::render_network(&target, mode.id(), &judged)
            );
        }
        return Ok(());
    }
    if dsh::tools::files::is_file_tool(tool) {
        let explained = ExplainedFile {
            tool,
            path: command,
            leave_sandbox: leave_sandbox.as_deref(),
        };
        return explain_file(&config, &cwd, &explained, (&policy, mode, &grants), json);
    }
    let mut arguments = serde_json::json!({ "command": command });
    if let Some(justification) = &leave_sandbox {
        arguments["sandbox"] = "off".into();
        arguments["justification"] = justification.as_str().into();
    }
    let sandbox = dsh::tools::bash::SandboxTerms::of(&config.exec);
    let at = dsh::hooks::rules::SessionPlace::new(
        cwd.clone(),
        vec![cwd.clone()],
        sandbox.as_ref().map(|t| t.writable.as_slice()),
    );
    let judged = policy.judge_in("bash", &arguments, mode, &grants, Some(&at.place(false)));
    let warnings = project
        .as_ref()
        .map(|p| p.warnings.clone())
        .unwrap_or_default();
    if json {
        let mut value = serde_json::json!({
            "command": command,
            "mode": mode.id(),
            "judgement": judged,
        });
        if let Some(project) = &project {
            value["project"] = project.file.to_string_lossy().into_owned().into();
            if !warnings.is_empty() {
                value["warnings"] = warnings.into();
            }
        }
        println!("{value:#}");
    } else {
        print!(
            "{}",
            dsh::policy::explain::render(command, mode.id(), &judged)
        );
        if leave_sandbox.is_some() && judged.escalation.is_none() {
            println!(
                "  sandbox \"off\" changes nothing: {}",
                if sandbox.is_some() {
                    "the justification is blank"
                } else {
                    "commands run in no sandbox ([exec] kind is not \"sandbox\")"
                }
            );
        }
        if let Some(project) = &project {
            println!("project: {}", project.file.display());
        }
        for warning in &warnings {
            println!("  ignored: {warning}");
        }
    }
    Ok(())
}

/// The audit lines `path` names, oldest first: a state directory or its live
/// `audit.jsonl` brings the rotated files before it (`state_dir::rotate::in_order`).
pub(crate) fn read_audit(path: &Path) -> Result<dsh::state_dir::rotate::Concatenated, String> {
    let files = dsh::state_dir::rotate::in_order(path, dsh::state_dir::AUDIT_LOG);
    dsh::state_dir::rotate::Concatenated::read(&files)
}

/// Where line `line` of a rotated set's text is: its file and its own line.
pub(crate) fn place_in(
    audit: &dsh::state_dir::rotate::Concatenated,
    line: usize,
) -> (Option<PathBuf>, usize) {
    match audit.position(line) {
        Some((file, own)) => (Some(file), own),
        None => (None, line),
    }
}

/// `dsh policy shadow-report`.
pub(crate) fn shadow_report(audit: Option<PathBuf>, json: bool) -> Result<(), String> {
    let path = audit.unwrap_or_else(|| Config::default().exec.state_dir());
    let audit = read_audit(&path)?;
    let mut report = dsh::policy::replay::shadow_report(&audit.text)
        .map_err(|u| format!("{}: {}", audit.locate(u.line), u.why))?;
    if audit.files() > 1 {
        for d in &mut report.differences {
            (d.file, d.line) = place_in(&audit, d.line);
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", dsh::policy::replay::render_shadows(&report));
    }
    Ok(())
}

/// `dsh policy replay`: exit 0, 1 when `--fail-on` matches, 2 when the input cannot be
/// read (the line named).
pub(crate) fn replay(
    audit: &Path,
    config: Option<&Path>,
    hooks: bool,
    json: bool,
    fail_on: Option<&str>,
    only: Option<&dsh::policy::audit::RunId>,
) -> ExitCode {
    let run = || -> Result<dsh::policy::replay::Report, String> {
        let config = load_checked(config)?;
        let mut files = read_audit(audit)?;
        if let Some(run) = only {
            let (text, kept) = dsh::policy::audit::only_run(&files.text, run);
            if kept == 0 {
                return Err(format!("no audit line carries run {run}"));
            }
            files.text = text;
        }
        let text = &files.text;
        let report = if hooks {
            let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
            runtime()?.block_on(dsh::hooks::replay::replay_with_hooks(text, &config, &cwd))
        } else {
            let network = &config.exec.sandbox.network;
            let policy = dsh::policy::Policy::of_config(&config);
            // The disk a line's patterns expand against, from here, as `explain` and
            // the daemon's hook read it (P6).
            let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
            let here = dsh::hooks::rules::SessionPlace::new(cwd, Vec::new(), None);
            dsh::policy::replay::audited_calls(text).map(|audited| {
                // A call judged with a project's rules is judged with them again, on top
                // of the candidate's (the project file as it is now).
                let projects: std::collections::HashMap<_, _> = audited
                    .calls
                    .iter()
                    .filter_map(|c| c.project.clone())
                    .map(|file| {
                        let project = dsh::project::load(&file, &config);
                        let policy = dsh::policy::Policy::new(&project.permissions);
                        (file, policy.with_network(network))
                    })
                    .collect();
                let policy_of = |call: &dsh::policy::replay::AuditedCall| {
                    call.project
                        .as_ref()
                        .and_then(|file| projects.get(file))
                        .unwrap_or(&policy)
                };
                dsh::policy::replay::replay_calls(
                    &audited,
                    config.permissions.default_mode,
                    policy_of,
                    Some(here.globs()),
                )
            })
        };
        let mut report = report.map_err(|u| format!("{}: {}", files.locate(u.line), u.why))?;
        if files.files() > 1 {
            for c in &mut report.changes {
                (c.file, c.line) = place_in(&files, c.line);
            }
        }
        Ok(report)
    };
    let report = match run() {
        Ok(report) => report,
        Err(message) => {
            eprintln!("dsh: {message}");
            return ExitCode::from(2);
        }
    };
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("dsh: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        print!("{}", dsh::policy::replay::render(&report));
    }
    let failed = match fail_on {
        Some("loosen") => report.loosens(),
        Some("change") => !report.changes.is_empty(),
        _ => false,
    };
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `dsh policy grants [--revoke PREFIX]`: through the running daemon when one answers
/// (it holds the list in memory and is the file's writer), else from the file itself.
pub(crate) async fn user_grants(at: Where, revoke: Option<String>) -> Result<(), String> {
    if let Some(prefix) = revoke {
        let params = serde_json::json!({ "prefix": prefix });
        match ask_daemon_typed(&at, "_dsh/user/revoke", params).await {
            Ok(_) => {}
            Err(ClientError::Io { .. }) => {
                let state_dir = at.config()?.exec.state_dir();
                let grants = dsh::registry::UserGrants::open(&state_dir)?;
                let mut found = false;
                for grant in dsh::policy::Grant::named(&prefix) {
                    found |= grants.revoke(&grant)?;
                }
                if !found {
                    return Err(format!("no user grant or rejection of `{prefix}`"));
                }
            }
            Err(e) => return Err(e.to_string()),
        }
        println!("revoked: {prefix}");
        return Ok(());
    }
    let lists = match ask_daemon_typed(&at, "_dsh/user/grants", serde_json::json!({})).await {
        Ok(answer) => serde_json::from_value(answer)
            .map_err(|e| format!("the daemon's answer is not what this dsh reads: {e}"))?,
        Err(ClientError::Io { .. }) => {
            let state_dir = at.config()?.exec.state_dir();
            let grants = dsh::registry::UserGrants::open(&state_dir)?;
            dsh::acp::GrantsResponse::of(&grants.allowed(), &grants.rejected())
        }
        Err(e) => return Err(e.to_string()),
    };
    for prefix in lists.allowed {
        println!("allow  {prefix}");
    }
    for prefix in lists.rejected {
        println!("reject {prefix}");
    }
    Ok(())
}
