//! `dsh trust`: pins what a trusted project runs (`dsh::project::pins`).

use crate::cli::reach::Where;
use std::path::PathBuf;

/// `dsh trust [DIR]`: prints what was pinned.
pub(crate) fn trust(dir: Option<PathBuf>, at: Where) -> Result<(), String> {
    at.config().and_then(|config| {
        let dir = dir.unwrap_or_else(|| PathBuf::from("."));
        print!("{}", dsh::project::pins::trust(&dir, &config)?);
        Ok(())
    })
}
