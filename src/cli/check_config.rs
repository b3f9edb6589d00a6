//! `dsh check-config`, and the checks every command that runs rules shares: a config
//! whose rules fail their own examples is refused (by `serve`, the hand-over check and
//! the policy commands alike).

use dsh::config::Config;
use std::path::Path;

pub(crate) fn check_config(path: Option<&Path>) -> Result<(), String> {
    let (config, read) = Config::load_layered(path).map_err(|e| e.to_string())?;
    check_rules(&config)?;
    print!("{}", config.to_toml()?);
    match &read {
        Some(file) => println!("# read: {}", file.display()),
        None => println!("# read: no config file (the built-in defaults)"),
    }
    let here = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    if let Some(project) = project_of(&here, &config) {
        println!(
            "# project file for sessions in {}: {} ({}, {} rule(s) in force, {} hook(s))",
            here.display(),
            project.file.display(),
            if project.trusted {
                "trusted"
            } else {
                "untrusted"
            },
            project.permissions.rules.len(),
            project.hooks.len()
        );
        for warning in &project.warnings {
            println!("#   ignored: {warning}");
        }
    }
    println!(
        "# state_dir in force: {}",
        config.exec.state_dir().display()
    );
    Ok(())
}

/// The project file a session working in `cwd` would get, read against `user`.
pub(crate) fn project_of(cwd: &Path, user: &Config) -> Option<dsh::project::Project> {
    dsh::project::find_for(cwd).map(|file| dsh::project::load(&file, user))
}

/// Loads a config (the named file, else the user's own when it exists) and refuses it
/// when an example or test its rules carry fails: what `dsh serve` and the policy
/// commands run with.
pub(crate) fn load_checked(path: Option<&Path>) -> Result<Config, String> {
    let (config, _) = Config::load_layered(path).map_err(|e| e.to_string())?;
    check_rules(&config)?;
    Ok(config)
}

/// Runs the examples and tests the permission rules carry; a daemon never runs rules that
/// fail their own examples.
pub(crate) fn check_rules(config: &Config) -> Result<(), String> {
    let mut failed = dsh::policy::check_config(&config.permissions);
    failed.extend(dsh::policy::check_network(&config.exec.sandbox.network));
    if failed.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = failed.iter().map(|f| format!("  {f}")).collect();
    Err(format!(
        "the permission rules' examples or tests fail:\n{}",
        lines.join("\n")
    ))
}
