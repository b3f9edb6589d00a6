//! The connection judge: an outbound connection of a sandboxed command (E10).

use crate::config::{Decision, Mode, NetworkDefault};
use crate::policy::network;
use crate::policy::{Cause, Grant, Judgement, NETWORK_TOOL, Policy};

impl Policy {
    /// A connection of a sandboxed command (E10), `{host, port, ...}`: the strongest rule
    /// that covers the host and port, else a grant of the host, else the mode (`ask`
    /// asks, `auto` does what `[exec.sandbox.network] default` says, `read-only` denies).
    /// An ask offers the host to "allow always" (any port).
    pub(in crate::policy) fn judge_network(
        &self,
        arguments: &serde_json::Value,
        mode: Mode,
        grants: &[Grant],
    ) -> Judgement {
        let host = arguments
            .get("host")
            .and_then(|h| h.as_str())
            .and_then(network::normalize_host);
        let port = arguments
            .get("port")
            .and_then(|p| p.as_u64())
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0);
        let (host, port) = match (host, port) {
            (Some(host), Some(port)) => (host, port),
            (None, _) => {
                return Judgement::of_call(
                    Decision::Deny,
                    "network call without a valid `host` (a host name or an IP address)".into(),
                );
            }
            (_, None) => {
                return Judgement::of_call(
                    Decision::Deny,
                    "network call without a valid `port` (a number from 1 to 65535)".into(),
                );
            }
        };
        let target = network::target(&host, port);
        let call = |decision, reason: String, cause| Judgement {
            cause,
            ..Judgement::of_call(decision, reason)
        };
        let rule = self
            .rules
            .iter()
            .filter(|r| r.prefix.is_none() && r.path.is_none())
            .filter(|r| r.covers_tool(NETWORK_TOOL) && r.matches_host(&host, port))
            .max_by_key(|r| r.action);
        let mut judged = if let Some(rule) = rule {
            call(
                rule.action,
                format!("{} matches {target}", rule.describe()),
                rule.cause(),
            )
        } else if let Some(grant) = grants
            .iter()
            .find(|g| matches!(g, Grant::Host(granted) if *granted == host))
        {
            call(
                Decision::Allow,
                format!(
                    "`{}` is allowed always in this session and matches {target}",
                    grant.display()
                ),
                Cause::Grant {
                    prefix: grant.display(),
                },
            )
        } else {
            let uncovered = format!("{target} is not covered by any rule");
            match mode {
                Mode::Ask => call(
                    Decision::Ask,
                    format!("{uncovered} (mode ask)"),
                    Cause::Mode { mode },
                ),
                Mode::Auto => {
                    let (decision, word) = match self.network_default {
                        NetworkDefault::Ask => (Decision::Ask, "ask"),
                        // This machine's own services are outside the sandbox, and a
                        // non-public address is someone's local network: a default
                        // opens neither, a rule naming the host does (issue 40).
                        NetworkDefault::Allow if network::is_local(&host) => (
                            Decision::Ask,
                            "allow, which does not cover this machine or a non-public address",
                        ),
                        NetworkDefault::Allow => (Decision::Allow, "allow"),
                        NetworkDefault::Deny => (Decision::Deny, "deny"),
                    };
                    call(
                        decision,
                        format!("{uncovered} (mode auto: [exec.sandbox.network] default = {word})"),
                        Cause::Mode { mode },
                    )
                }
                Mode::ReadOnly => call(
                    Decision::Deny,
                    format!("read-only mode: {uncovered}, and no connection is allowed by default"),
                    Cause::ReadOnly,
                ),
            }
        };
        if judged.decision == Decision::Ask {
            judged.grants_on_allow_always = vec![Grant::Host(host)];
        }
        judged
    }
}
