//! `dsh login` and `dsh logout` (and `dsh acp login`, what ACP's terminal auth runs):
//! the model key, kept beside the config.

use dsh::config::Config;
use std::path::Path;

/// `dsh login` (and `dsh acp login`): prints what was done.
pub(crate) async fn login(config: Option<&Path>) -> Result<(), String> {
    let (config, _) = Config::load_layered(config).map_err(|e| e.to_string())?;
    println!("{}", dsh::login::login(&config.model).await?);
    Ok(())
}

/// `dsh logout`: prints what was done.
pub(crate) fn logout(config: Option<&Path>) -> Result<(), String> {
    let (config, _) = Config::load_layered(config).map_err(|e| e.to_string())?;
    println!("{}", dsh::login::logout(&config.model)?);
    Ok(())
}
