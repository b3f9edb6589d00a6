//! Session config options that are switches: "Think harder" (`think_harder`), offered
//! when `[model] think_harder_model` names a model that reasons longer. A client that
//! shows boolean options (`clientCapabilities.session.configOptions.boolean`) gets a
//! boolean; any other a select of `off` and `on`, so the switch works in both. A change
//! is logged (`Event::OptionSet`) and comes back with the session on load.

use super::AcpService;
use crate::registry::Session;
use crate::rpc::RpcError;
use crate::store::{Event, now_ms};
use agent_client_protocol_schema::v1 as acp;

/// The id of the "Think harder" switch.
pub const THINK_HARDER: &str = "think_harder";

/// Puts a logged switch back on a session being loaded.
pub(super) fn restore(session: &Session, option: &str, value: bool) {
    if option == THINK_HARDER {
        session.set_think_harder(value);
    }
}

impl AcpService {
    /// The switches `session` offers its client now.
    pub(super) fn switches(&self, session: &Session) -> Vec<acp::SessionConfigOption> {
        let settings = self.settings();
        let Some(model) = &settings.model_config.think_harder_model else {
            return Vec::new();
        };
        let boolean = self
            .peer_of(&session.id)
            .is_some_and(|(_, display)| display.boolean_options);
        let on = session.think_harder();
        let option = if boolean {
            acp::SessionConfigOption::boolean(THINK_HARDER, "Think harder", on)
        } else {
            acp::SessionConfigOption::select(
                THINK_HARDER,
                "Think harder",
                if on { "on" } else { "off" },
                vec![
                    acp::SessionConfigSelectOption::new("off", "Off"),
                    acp::SessionConfigSelectOption::new("on", "On"),
                ],
            )
        };
        vec![
            option
                .category(acp::SessionConfigOptionCategory::ThoughtLevel)
                .description(format!(
                    "Send this session's requests to {model}, which reasons longer before it answers"
                )),
        ]
    }

    /// Sets a switch when `option` is one: `Ok(true)` when it was (and is now logged),
    /// `Ok(false)` when `option` is no switch, an error for a value a switch cannot take.
    pub(super) fn set_switch(
        &self,
        session: &Session,
        option: &str,
        value: &acp::SessionConfigOptionValue,
    ) -> Result<bool, RpcError> {
        if option != THINK_HARDER {
            return Ok(false);
        }
        if self.settings().model_config.think_harder_model.is_none() {
            return Err(RpcError::invalid_params(
                "this session has no `think_harder` option ([model] think_harder_model is unset)",
            ));
        }
        let on = match value {
            acp::SessionConfigOptionValue::Boolean { value } => *value,
            acp::SessionConfigOptionValue::ValueId { value } => match &*value.0 {
                "on" => true,
                "off" => false,
                other => {
                    return Err(RpcError::invalid_params(format!(
                        "`think_harder` is `on` or `off`, not `{other}`"
                    )));
                }
            },
            _ => {
                return Err(RpcError::invalid_params(
                    "`think_harder` takes a boolean (or `on` / `off`)",
                ));
            }
        };
        session.set_think_harder(on);
        if let Some(log) = self.log_of(&session.id) {
            self.append(
                &log,
                Event::OptionSet {
                    at_ms: now_ms(),
                    option: THINK_HARDER.to_string(),
                    value: on,
                },
            );
        }
        Ok(true)
    }
}
