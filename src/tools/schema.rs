//! Tool schemas: embedded from `proto/tools/*.json`, the single source of what
//! the model is told, and checked against every call's arguments (T1).

use crate::hooks::waterfall::{Hook, Next, Passed, ToolExecution, ToolOutput};
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::Arc;

/// A tool's contract: name, description and the JSON Schema of its arguments.
/// Read-only once made (accessors, no public fields): the validator and the
/// model's definition are built from the parts, and must not go stale.
pub struct ToolSchema {
    name: String,
    description: String,
    parameters: Value,
    validator: jsonschema::Validator,
    /// [`ToolSchema::for_model`] as JSON text, made once: every model request carries
    /// every definition, and building and serializing them anew each time was a
    /// measurable part of a turn (BENCHMARKS.md).
    definition: Arc<RawValue>,
}

impl ToolSchema {
    /// Parses one `proto/tools/*.json` document. The documents are compiled into
    /// the binary and covered by tests, so a failure here is a build defect.
    pub fn parse(document: &str) -> Result<Self, String> {
        let doc: Value = serde_json::from_str(document).map_err(|e| e.to_string())?;
        let field = |k: &str| {
            doc.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("schema document lacks `{k}`"))
        };
        let parameters = doc
            .get("parameters")
            .cloned()
            .ok_or("schema document lacks `parameters`")?;
        Self::new(&field("name")?, &field("description")?, parameters)
    }

    /// A schema from its parts: an MCP server's tool, whose input schema comes from
    /// the server (so it may fail to compile, and the tool is then left out).
    pub fn new(name: &str, description: &str, parameters: Value) -> Result<Self, String> {
        let validator = jsonschema::validator_for(&parameters).map_err(|e| e.to_string())?;
        let definition =
            serde_json::value::to_raw_value(&definition(name, description, &parameters))
                .map_err(|e| e.to_string())?
                .into();
        Ok(Self {
            name: name.to_string(),
            description: description.to_string(),
            parameters,
            validator,
            definition,
        })
    }

    /// The name the model calls the tool by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the model is told the tool does.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of the tool's arguments.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// Checks arguments against the schema; the error names the property (T1).
    pub fn check(&self, arguments: &Value) -> Result<(), String> {
        if !arguments.is_object() {
            return Err("invalid arguments: expected a JSON object".into());
        }
        let Some(error) = self.validator.iter_errors(arguments).next() else {
            return Ok(());
        };
        let path = error
            .instance_path()
            .as_str()
            .trim_start_matches('/')
            .to_string();
        Err(match error.kind() {
            ValidationErrorKind::Required { property } => format!(
                "invalid arguments: missing required property `{}`",
                property.as_str().unwrap_or_default()
            ),
            ValidationErrorKind::Type { kind } => {
                let expected = match kind {
                    jsonschema::error::TypeKind::Single(t) => t.to_string(),
                    jsonschema::error::TypeKind::Multiple(set) => format!("{set:?}"),
                };
                format!("invalid arguments: `{path}` must be a {expected}")
            }
            _ => format!("invalid arguments: `{path}`: {error}"),
        })
    }

    /// The OpenAI-style function description the model receives.
    pub fn for_model(&self) -> Value {
        serde_json::to_value(definition(&self.name, &self.description, &self.parameters))
            .unwrap_or_default()
    }

    /// [`ToolSchema::for_model`], serialized once, as model requests carry it.
    pub fn model_definition(&self) -> &Arc<RawValue> {
        &self.definition
    }
}

/// The OpenAI-style function description of a tool, its keys in the order the API
/// documents them (serialized from these types, whatever a JSON map orders keys by).
#[derive(serde::Serialize)]
struct Definition<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(serde::Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn definition<'a>(name: &'a str, description: &'a str, parameters: &'a Value) -> Definition<'a> {
    Definition {
        kind: "function",
        function: Function {
            name,
            description,
            parameters,
        },
    }
}

/// The embedded schema documents, by tool name.
pub const BASH: &str = include_str!("../../proto/tools/bash.json");
pub const BASH_OUTPUT: &str = include_str!("../../proto/tools/bash_output.json");
pub const BASH_KILL: &str = include_str!("../../proto/tools/bash_kill.json");
pub const READ_FILE: &str = include_str!("../../proto/tools/read_file.json");
pub const EDIT_FILE: &str = include_str!("../../proto/tools/edit_file.json");
pub const WRITE_FILE: &str = include_str!("../../proto/tools/write_file.json");
pub const NETWORK: &str = include_str!("../../proto/tools/network.json");

/// The waterfall hook that rejects calls whose arguments break their schema,
/// before any judging hook or the tool sees them.
pub struct SchemaHook {
    schemas: HashMap<String, Arc<ToolSchema>>,
    /// The tools only dsh itself calls ([`super::Tool::internal`]): unknown to anyone else.
    internal: Vec<String>,
    /// The tools only some sessions have (MCP servers'), checked against their
    /// servers' input schemas.
    session_tools: Arc<super::SessionTools>,
}

impl SchemaHook {
    pub fn new(
        schemas: HashMap<String, Arc<ToolSchema>>,
        internal: Vec<String>,
        session_tools: Arc<super::SessionTools>,
    ) -> Self {
        Self {
            schemas,
            internal,
            session_tools,
        }
    }
}

#[async_trait::async_trait]
impl Hook for SchemaHook {
    fn name(&self) -> &str {
        "schema"
    }

    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        // A model (or a client) naming an internal tool must not reach the person
        // with a question it wrote ("`cargo build` wants to reach ...").
        if !call.is_internal() && self.internal.contains(&call.tool) {
            return ToolOutput::error(format!("unknown tool `{}`", call.tool)).into();
        }
        let session_tool = match (self.schemas.contains_key(&call.tool), &call.session) {
            (false, Some(session)) => self.session_tools.get(&session.id, &call.tool),
            _ => None,
        };
        let Some(schema) = self
            .schemas
            .get(&call.tool)
            .or(session_tool.as_ref().map(|t| t.schema()))
        else {
            return ToolOutput::error(format!("unknown tool `{}`", call.tool)).into();
        };
        match schema.check(&call.arguments) {
            Ok(()) => next.run(call).await,
            Err(message) => ToolOutput::error(message).into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn embedded_documents_parse() {
        for doc in [
            BASH,
            BASH_OUTPUT,
            BASH_KILL,
            READ_FILE,
            EDIT_FILE,
            WRITE_FILE,
            NETWORK,
        ] {
            let s = ToolSchema::parse(doc).unwrap();
            assert!(!s.description.is_empty());
        }
    }

    #[test]
    fn t1_errors_name_the_property() {
        let s = ToolSchema::parse(BASH).unwrap();
        assert_eq!(
            s.check(&json!({"description": "d"})).unwrap_err(),
            "invalid arguments: missing required property `command`"
        );
        assert_eq!(
            s.check(&json!({"command": "ls"})).unwrap_err(),
            "invalid arguments: missing required property `description`"
        );
        assert_eq!(
            s.check(&json!({"command": 3, "description": "d"}))
                .unwrap_err(),
            "invalid arguments: `command` must be a string"
        );
        assert_eq!(
            s.check(&json!({"command": "ls", "description": "d", "timeoutMs": "5"}))
                .unwrap_err(),
            "invalid arguments: `timeoutMs` must be a number"
        );
        assert_eq!(
            s.check(&json!({"command": "ls", "description": "d", "run_in_background": 1}))
                .unwrap_err(),
            "invalid arguments: `run_in_background` must be a boolean"
        );
        assert!(s.check(&json!("ls")).is_err());
        assert!(
            s.check(&json!({"command": "ls", "description": "d"}))
                .is_ok()
        );
    }
}
