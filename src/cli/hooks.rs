//! `dsh hooks import|test`: hooks without a daemon.

use crate::cli::reach::runtime;
use dsh::config::Config;
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn import_hooks(path: &Path) -> Result<(), String> {
    use dsh::config::claude_settings;
    let imported = claude_settings::read(path)?;
    print!("{}", claude_settings::to_toml(&imported, path)?);
    Ok(())
}

pub(crate) fn test_hooks(
    config: Option<&Path>,
    event: &str,
    tool: String,
    input: Option<&Path>,
    json: bool,
    command: &[String],
) -> ExitCode {
    use dsh::hooks::tester::{TestInput, run};
    let prepare = || -> Result<(dsh::config::Config, TestInput), String> {
        let (config, _) = Config::load_layered(config).map_err(|e| e.to_string())?;
        let event: dsh::config::HookEvent =
            serde_json::from_value(serde_json::Value::String(event.to_string()))
                .map_err(|_| format!("unknown event {event}"))?;
        let text = command.join(" ");
        let mut test = TestInput {
            event,
            arguments: match tool.as_str() {
                "bash" => serde_json::json!({"command": text, "description": "dsh hooks test"}),
                _ if text.trim().is_empty() => serde_json::json!({}),
                _ => serde_json::from_str(&text)
                    .map_err(|e| format!("the arguments of {tool} must be JSON: {e}"))?,
            },
            tool,
            result: None,
            prompt: (event == dsh::config::HookEvent::Prompt).then_some(text),
        };
        if let Some(file) = input {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Full {
                tool: Option<String>,
                arguments: Option<serde_json::Value>,
                result: Option<Result_>,
                prompt: Option<String>,
            }
            #[derive(serde::Deserialize)]
            #[serde(rename_all = "camelCase")]
            struct Result_ {
                text: String,
                #[serde(default)]
                is_error: bool,
            }
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let full: Full =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            test.tool = full.tool.unwrap_or(test.tool);
            test.arguments = full.arguments.unwrap_or(test.arguments);
            test.prompt = full.prompt.or(test.prompt);
            test.result = full.result.map(|r| dsh::hooks::waterfall::ToolOutput {
                text: r.text,
                is_error: r.is_error,
                ..Default::default()
            });
        }
        Ok((config, test))
    };
    let outcome = prepare().and_then(|(config, test)| {
        let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
        Ok(runtime()?.block_on(run(&config, test, &cwd)))
    });
    let report = match outcome {
        Ok(report) => report,
        Err(message) => {
            eprintln!("dsh: {message}");
            return ExitCode::from(3);
        }
    };
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("dsh: {e}");
                return ExitCode::from(3);
            }
        }
    } else {
        print!("{}", report.render());
    }
    ExitCode::from(report.exit_code())
}
