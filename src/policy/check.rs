//! The checks a config carries: each rule's `examples` and `not_examples`, each
//! `[[permissions.tests]]` entry, and `[exec.sandbox.network]`'s entries. `dsh serve`,
//! `dsh check-config` and a reload refuse a config that fails one.

use super::network::{HostEntry, HostPattern};
use super::rules::path_glob;
use super::{FILE_TOOLS, NETWORK_TOOL, Policy, action, list_name};
use crate::config::{Decision, Mode, NetworkConfig, PermissionsConfig};

/// A rule example, not-example or policy test that did not hold, said so that the author
/// can find the line: `dsh.toml:12: rule 0 (bash `rm`, deny) should match "rm -rf x"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedCheck(pub String);

impl std::fmt::Display for FailedCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs the checks a config carries: each rule's `examples` (must match) and
/// `not_examples` (must not), and each `[[permissions.tests]]` entry (the decision a bash
/// call of its command gets in its mode, with no grants). `dsh serve` and
/// `dsh check-config` refuse a config for which this returns anything.
pub fn check_config(config: &PermissionsConfig) -> Vec<FailedCheck> {
    let policy = Policy::new(config);
    let mut failed = Vec::new();
    let at = |origin: &Option<String>| match origin {
        Some(origin) => format!("{origin}: "),
        None => String::new(),
    };
    for (index, (rule, compiled)) in config.rules.iter().zip(&policy.rules).enumerate() {
        // A path rule that no file tool can reach, or that also names a command, would
        // silently never match: say so.
        if compiled.path.is_some()
            && (compiled.prefix.is_some() || !FILE_TOOLS.iter().any(|t| compiled.covers_tool(t)))
        {
            failed.push(FailedCheck(format!(
                "{}rule {index} ({}): `path` applies only to the file tools ({}) and not with `command`",
                at(&rule.origin),
                compiled.describe(),
                FILE_TOOLS.join(", ")
            )));
        }
        let network_rule = compiled.names_hosts() || rule.tool == NETWORK_TOOL;
        if compiled.names_hosts() && rule.tool != NETWORK_TOOL {
            failed.push(FailedCheck(format!(
                "{}rule {index} ({}): `host` and `port` apply only to tool `{NETWORK_TOOL}`",
                at(&rule.origin),
                compiled.describe(),
            )));
        }
        if let Some(why) = &compiled.host_error {
            failed.push(FailedCheck(format!(
                "{}rule {index}: `host` {why}",
                at(&rule.origin)
            )));
        }
        if rule.port == Some(0) {
            failed.push(FailedCheck(format!(
                "{}rule {index} ({}): `port` must be from 1 to 65535",
                at(&rule.origin),
                compiled.describe(),
            )));
        }
        if rule.tool == NETWORK_TOOL && compiled.prefix.is_some() {
            failed.push(FailedCheck(format!(
                "{}rule {index} ({}): `command` does not apply to tool `{NETWORK_TOOL}` (use `host` and `port`)",
                at(&rule.origin),
                compiled.describe(),
            )));
        }
        for (examples, must) in [(&rule.examples, true), (&rule.not_examples, false)] {
            for example in examples {
                // A network rule's examples are `HOST` or `HOST:PORT` (port 443 if none).
                if network_rule {
                    let matched = match HostEntry::parse(example) {
                        Ok(HostEntry {
                            host: HostPattern::Exact(host),
                            port,
                        }) => Ok(compiled.matches_host(&host, port.unwrap_or(443))),
                        Ok(_) => Err(format!("`{example}` is a pattern, not a host")),
                        Err(why) => Err(why),
                    };
                    match matched {
                        Ok(matched) if matched == must => {}
                        Ok(_) => failed.push(FailedCheck(format!(
                            "{}rule {index} ({}) {} `{example}`",
                            at(&rule.origin),
                            compiled.describe(),
                            if must {
                                "should match"
                            } else {
                                "should not match"
                            },
                        ))),
                        Err(why) => failed.push(FailedCheck(format!(
                            "{}rule {index} ({}): example {why}",
                            at(&rule.origin),
                            compiled.describe(),
                        ))),
                    }
                    continue;
                }
                // A path rule's examples are paths (relative to the cwd unless absolute).
                if let Some(glob) = &compiled.path {
                    let example_path = example.trim_start_matches("./");
                    if path_glob(glob.as_bytes(), example_path.as_bytes()) != must {
                        failed.push(FailedCheck(format!(
                            "{}rule {index} ({}) {} path `{example}`",
                            at(&rule.origin),
                            compiled.describe(),
                            if must {
                                "should match"
                            } else {
                                "should not match"
                            },
                        )));
                    }
                    continue;
                }
                if policy.rule_applies(index, example) != must {
                    let judged = policy.judge_bash(example, Mode::Auto, &[], None);
                    failed.push(FailedCheck(format!(
                        "{}rule {index} ({}) {} `{example}`; what decides it instead: {}",
                        at(&rule.origin),
                        compiled.describe(),
                        if must {
                            "should match"
                        } else {
                            "should not match"
                        },
                        judged.reason
                    )));
                }
            }
        }
    }
    for test in &config.tests {
        let judged = policy.judge(
            "bash",
            &serde_json::json!({ "command": test.command }),
            test.mode,
            &[],
        );
        if judged.decision != test.expect {
            failed.push(FailedCheck(format!(
                "{}policy test `{}` in mode {} expects {}, but it is {}: {}",
                at(&test.origin),
                test.command,
                test.mode.id(),
                action(test.expect),
                action(judged.decision),
                judged.reason
            )));
        }
    }
    failed
}

/// Checks `[exec.sandbox.network]`'s `allow` and `deny` entries, which are sugar for
/// rules: each must be `HOST`, `HOST:PORT` or `[V6]:PORT` (a host being a name, an IP
/// address or `*.` and a name). `dsh serve`, `dsh check-config` and a reload refuse a
/// config for which this returns anything, as [`check_config`].
pub fn check_network(network: &NetworkConfig) -> Vec<FailedCheck> {
    let mut failed = Vec::new();
    for (list, action) in [
        (&network.allow, Decision::Allow),
        (&network.deny, Decision::Deny),
    ] {
        for entry in list {
            if let Err(why) = HostEntry::parse(entry) {
                failed.push(FailedCheck(format!(
                    "[exec.sandbox.network] {}: {why}",
                    list_name(action)
                )));
            }
        }
    }
    failed
}
