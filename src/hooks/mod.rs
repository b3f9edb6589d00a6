//! The `tools/execute` waterfall and its hooks.
//!
//! Every tool call passes, in order: [`audit`] (records the outcome), the schema
//! check (in `tools::schema`), [`rules`] (the configured policy and the session's
//! mode, judged by [`crate::policy`]), [`external`] hook
//! programs, a trusted project's hook programs for its sessions ([`project`]), and the
//! permission [`gate`] (asks the session's user). See
//! [`waterfall`] for the chain itself.

pub mod audit;
pub mod external;
pub mod gate;
pub mod project;
pub mod replay;
pub mod rules;
pub mod tester;
pub mod waterfall;

use std::sync::Arc;

/// The judging links of the waterfall in their one order: the policy, a trusted
/// project's pins (`project::ProjectPins`), the user's hook programs, then a trusted
/// project's. The live chain puts the audit and schema links in
/// front of these and the gate behind; `dsh policy replay --hooks` runs exactly these, so
/// a replay cannot judge in another order than a live call.
pub fn judging_links(
    policy: rules::PolicyHook,
    hooks: &external::HookSet,
    projects: &Arc<project::ProjectLayers>,
) -> Vec<Arc<dyn waterfall::Hook>> {
    let mut links: Vec<Arc<dyn waterfall::Hook>> = vec![
        Arc::new(policy),
        Arc::new(project::ProjectPins(projects.clone())),
    ];
    links.extend(hooks.waterfall_hooks());
    links.push(Arc::new(project::ProjectHooks(projects.clone())));
    links
}
