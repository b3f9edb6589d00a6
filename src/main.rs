//! The `dsh` command line.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// dsh: a per-user agent daemon for editors.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load a config file (or the built-in defaults) and print the values in force.
    CheckConfig {
        /// The config file; without it the built-in defaults apply.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::CheckConfig { config } => match dsh::config::Config::load(config.as_deref()) {
            Ok(config) => {
                println!("{config:#?}");
                println!("state_dir in force: {}", config.exec.state_dir().display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("dsh: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
