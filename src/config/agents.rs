//! `[[agents]]`: another ACP agent dsh stands in front of, as the user configures it.
//!
//! A section of the config like the others: `wrap` (which serves such an agent) takes
//! the type from here, so the config imports nothing above it (`farm-studio look`
//! showed a circle through `wrap` while the type lived there).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One wrapped agent: the program dsh starts for a connection that asks for it by name
/// (`dsh acp --agent NAME`), and what it gets in its environment.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WrappedAgent {
    /// What the editor's entry names (`dsh acp --agent NAME`) and what the audit lines
    /// of its calls carry.
    pub name: String,
    /// The program and its arguments (no shell: each word as given).
    pub command: Vec<String>,
    /// Variables set for it, by value (a base URL, `IS_SANDBOX=1`, a temp `HOME`).
    /// The environment a command gets otherwise is the executor's: without
    /// credential-like names locally, only an allowlist under the sandbox (E4).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Names of variables passed from the daemon's own environment as they are there
    /// (an API key the user keeps in their session): a credential reaches the agent
    /// only when the config names it.
    #[serde(default)]
    pub pass_env: Vec<String>,
}

impl WrappedAgent {
    /// Its environment on top of the executor's: the values, then the passed names
    /// that the daemon has. A name that is not a valid variable name is an error (it
    /// would be quoted into nothing the program could read).
    pub fn environment(&self) -> Result<Vec<(String, String)>, String> {
        let mut env: Vec<(String, String)> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for name in &self.pass_env {
            if let Some(value) = std::env::var_os(name) {
                env.push((name.clone(), value.to_string_lossy().into_owned()));
            }
        }
        for (name, _) in &env {
            if !valid_env_name(name) {
                return Err(format!(
                    "agent `{}`: `{name}` is not a valid environment variable name",
                    self.name
                ));
            }
        }
        Ok(env)
    }

    /// Its command as one line for `bash -c` (how the executor starts programs): `exec`
    /// and every word single-quoted, so nothing in it is read as shell.
    pub fn command_line(&self) -> Result<String, String> {
        if self.command.is_empty() {
            return Err(format!("agent `{}` has an empty `command`", self.name));
        }
        let mut line = String::from("exec");
        for word in &self.command {
            line.push_str(" '");
            line.push_str(&word.replace('\'', r"'\''"));
            line.push('\'');
        }
        Ok(line)
    }
}

/// Whether `name` can be a variable of a service's own environment (an MCP server's,
/// a wrapped agent's, one the ssh executor exports with bash on the host): a shell
/// variable name (`[A-Za-z_][A-Za-z0-9_]*`). A name bash cannot export would be lost, or
/// read as something else.
pub fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_words_are_quoted_whole() {
        let agent = WrappedAgent {
            name: "a".into(),
            command: vec!["node".into(), "it's $(here)".into()],
            env: Default::default(),
            pass_env: vec![],
        };
        assert_eq!(
            agent.command_line().unwrap(),
            r"exec 'node' 'it'\''s $(here)'"
        );
    }

    #[test]
    fn bad_variable_names_are_refused() {
        let agent = WrappedAgent {
            name: "a".into(),
            command: vec!["x".into()],
            env: [("A=B".to_string(), "1".to_string())].into(),
            pass_env: vec![],
        };
        assert!(agent.environment().is_err());
    }
}
