//! The model-facing tools and the registry that runs them.
//!
//! Tools are argument checks and text shaping only: every process concern is
//! behind the executor seam, every permission concern in the waterfall, every
//! ownership concern in the session registry. [`ToolRegistry::execute`] is the
//! one entry point: it sends each call through the waterfall, which ends in the
//! tool.

pub mod bash;
pub mod notices;
pub mod schema;

use crate::config::Config;
use crate::exec::BashExecutor;
use crate::hooks::audit::{AuditHook, AuditLog};
use crate::hooks::external::ExternalHook;
use crate::hooks::gate::PermissionGate;
use crate::hooks::rules::PolicyHook;
use crate::hooks::waterfall::{Terminal, ToolExecution, ToolOutput, Waterfall};
use crate::policy::Policy;
use crate::registry::SessionRegistry;
use schema::{SchemaHook, ToolSchema};
use std::collections::HashMap;
use std::sync::Arc;

/// What a tool does, as editors show it (ACP `ToolKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    Execute,
    Read,
}

impl ToolKind {
    /// The ACP wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Execute => "execute",
            ToolKind::Read => "read",
        }
    }
}

/// One model-facing tool.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// Its contract, from `proto/tools/`.
    fn schema(&self) -> &Arc<ToolSchema>;
    fn kind(&self) -> ToolKind;
    /// Runs a call whose arguments already passed the schema check.
    async fn call(&self, call: &ToolExecution) -> ToolOutput;
}

/// The tools in registration order, and the waterfall every call goes through.
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    waterfall: Waterfall,
    /// The judge of `standard()`'s policy hook (the defaults' for a bare registry).
    policy: Arc<Policy>,
}

impl ToolRegistry {
    /// A registry with no tools and an empty waterfall.
    pub fn new() -> Self {
        Self {
            tools: Vec::new(),
            waterfall: Waterfall::new(),
            policy: Arc::new(Policy::new(&Default::default())),
        }
    }

    /// The daemon's registry: the bash tools over `executor` (none at all when there
    /// is no executor: they are not offered, rather than offered and failing), and
    /// the waterfall audit -> schema -> policy -> external hooks -> permission gate.
    pub fn standard(
        config: &Config,
        executor: Option<Arc<dyn BashExecutor>>,
        sessions: Arc<SessionRegistry>,
        audit: Arc<AuditLog>,
    ) -> Self {
        let mut registry = Self::new();
        if let Some(exec) = executor {
            for tool in bash::tools(exec, sessions, audit.clone()) {
                registry.register(tool);
            }
        }
        registry.waterfall.push(Arc::new(AuditHook::new(audit)));
        registry
            .waterfall
            .push(Arc::new(SchemaHook::new(registry.schemas())));
        registry.policy = Arc::new(Policy::new(&config.permissions));
        registry
            .waterfall
            .push(Arc::new(PolicyHook::new(registry.policy.clone())));
        for hook in &config.hooks.command {
            registry
                .waterfall
                .push(Arc::new(ExternalHook::new(hook.clone())));
        }
        registry.waterfall.push(Arc::new(PermissionGate));
        registry
    }

    /// Adds a tool after those already registered.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.push(tool);
    }

    /// The policy the waterfall's policy hook judges with: `explain` asks this same one, so
    /// its answer is the one a real call gets.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The waterfall, to add or reorder hooks.
    pub fn waterfall(&self) -> &Waterfall {
        &self.waterfall
    }

    /// Tool names in registration order.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.schema().name.clone()).collect()
    }

    /// The tool definitions the model is given, in registration order.
    pub fn definitions(&self) -> Vec<serde_json::Value> {
        self.tools.iter().map(|t| t.schema().for_model()).collect()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.schema().name == name)
    }

    fn schemas(&self) -> HashMap<String, Arc<ToolSchema>> {
        self.tools
            .iter()
            .map(|t| (t.schema().name.clone(), t.schema().clone()))
            .collect()
    }

    /// Runs one call through the waterfall and the tool.
    pub async fn execute(&self, call: &ToolExecution) -> ToolOutput {
        self.waterfall.run(call, self).await
    }
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait::async_trait]
impl Terminal for ToolRegistry {
    async fn execute(&self, call: &ToolExecution) -> ToolOutput {
        match self.get(&call.tool) {
            Some(tool) => tool.call(call).await,
            None => ToolOutput::error(format!("unknown tool `{}`", call.tool)),
        }
    }
}

/// The title of a tool call, for the client's tool-call card and the session log: the
/// `description` argument of bash, else the tool name (with the task id of bash_output/kill).
pub fn title_for(tool: &str, arguments: &serde_json::Value) -> String {
    arguments
        .get("description")
        .and_then(serde_json::Value::as_str)
        .filter(|d| !d.trim().is_empty())
        .map(str::to_string)
        .unwrap_or_else(
            || match arguments.get("task_id").and_then(serde_json::Value::as_str) {
                Some(id) => format!("{tool} {id}"),
                None => tool.to_string(),
            },
        )
}
