//! Which spill files a sweep removes: the rule, pure (no disk, no clock), so every
//! case is a unit test. The sweeper (`sweep.rs`) gathers the facts and acts on the
//! answer.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::time::{Duration, SystemTime};

/// One spill file as the sweep saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillFile {
    /// Its name in the spill directory.
    pub name: String,
    pub bytes: u64,
    /// When it was last written (its mtime): a finished stream's file is never
    /// written again, so this is when its output ended.
    pub modified: SystemTime,
}

/// The `[state]` limits on spill files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpillLimits {
    pub max_age_days: u64,
    pub max_bytes: u64,
}

impl SpillLimits {
    fn max_age(&self) -> Duration {
        Duration::from_secs(self.max_age_days.saturating_mul(86_400))
    }
}

/// Why a file went: what the model is told when it asks for it afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum Reason {
    /// Last written longer ago than `spill_max_age_days`.
    #[serde(rename_all = "camelCase")]
    Age { days: u64 },
    /// Among the oldest while the spill files held more than `spill_max_bytes`.
    #[serde(rename_all = "camelCase")]
    Size { limit_bytes: u64 },
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Age { days: 1 } => write!(f, "older than 1 day"),
            Reason::Age { days } => write!(f, "older than {days} days"),
            Reason::Size { limit_bytes } => write!(
                f,
                "the oldest while spill files held more than {}",
                human_bytes(*limit_bytes)
            ),
        }
    }
}

/// `2 GiB`, `256 MiB`, `1.5 KiB`, `17 bytes`: sizes as a person reads them.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The files to remove, each with its reason, oldest first: every file not in `keep`
/// last written more than `max_age_days` before `now`, then, while the files left
/// (kept ones included: they take the room too) hold more than `max_bytes`, the
/// oldest of the rest. A file in `keep` (a running task writes it, a recently loaded
/// session names it) is never removed, even if that leaves the total over the limit.
/// A file modified "in the future" (a clock set back) counts as new.
pub fn decide(
    files: &[SpillFile],
    keep: &HashSet<&str>,
    limits: SpillLimits,
    now: SystemTime,
) -> Vec<(usize, Reason)> {
    // Oldest first; the name breaks ties so the answer never depends on the
    // directory's order. Only what is removed, or may be, is sorted: in the steady
    // state (nothing due) a sweep is one pass over the files.
    let oldest_first = |a: &usize, b: &usize| {
        (files[*a].modified, &files[*a].name).cmp(&(files[*b].modified, &files[*b].name))
    };
    let max_age = limits.max_age();
    let mut total: u64 = files.iter().map(|f| f.bytes).sum();
    let (mut aged, mut rest) = (Vec::new(), Vec::new());
    for (i, file) in files.iter().enumerate() {
        if !keep.is_empty() && keep.contains(file.name.as_str()) {
            continue;
        }
        if now.duration_since(file.modified).unwrap_or_default() > max_age {
            total -= file.bytes;
            aged.push(i);
        } else {
            rest.push(i);
        }
    }
    aged.sort_by(oldest_first);
    let days = limits.max_age_days;
    let mut removed: Vec<(usize, Reason)> = aged
        .into_iter()
        .map(|i| (i, Reason::Age { days }))
        .collect();
    if total > limits.max_bytes {
        rest.sort_by(oldest_first);
        for i in rest {
            if total <= limits.max_bytes {
                break;
            }
            total -= files[i].bytes;
            removed.push((
                i,
                Reason::Size {
                    limit_bytes: limits.max_bytes,
                },
            ));
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    const DAY: u64 = 86_400;

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1000 * DAY)
    }

    /// A file `days_old` days old (fractions allowed through seconds).
    fn file(name: &str, bytes: u64, age_secs: u64) -> SpillFile {
        SpillFile {
            name: name.into(),
            bytes,
            modified: now() - Duration::from_secs(age_secs),
        }
    }

    fn names(files: &[SpillFile], removed: &[(usize, Reason)]) -> Vec<(String, Reason)> {
        removed
            .iter()
            .map(|(i, r)| (files[*i].name.clone(), *r))
            .collect()
    }

    const LIMITS: SpillLimits = SpillLimits {
        max_age_days: 14,
        max_bytes: 1000,
    };

    #[test]
    fn files_past_the_age_go_and_younger_ones_stay() {
        let files = [
            file("old", 10, 15 * DAY),
            file("edge", 10, 14 * DAY),
            file("new", 10, DAY),
        ];
        let removed = decide(&files, &HashSet::new(), LIMITS, now());
        assert_eq!(
            names(&files, &removed),
            [("old".to_string(), Reason::Age { days: 14 })]
        );
    }

    #[test]
    fn over_the_size_the_oldest_go_first_until_the_rest_fit() {
        let files = [
            file("c", 400, 3 * DAY),
            file("a", 400, 5 * DAY),
            file("d", 400, DAY),
            file("b", 400, 4 * DAY),
        ];
        let removed = decide(&files, &HashSet::new(), LIMITS, now());
        let size = Reason::Size { limit_bytes: 1000 };
        assert_eq!(
            names(&files, &removed),
            [("a".to_string(), size), ("b".to_string(), size)]
        );
    }

    #[test]
    fn aged_files_count_before_the_size_limit_is_applied() {
        // The 900-byte old file goes for its age; the rest then fit.
        let files = [
            file("old", 900, 20 * DAY),
            file("a", 500, 2 * DAY),
            file("b", 500, DAY),
        ];
        let removed = decide(&files, &HashSet::new(), LIMITS, now());
        assert_eq!(
            names(&files, &removed),
            [("old".to_string(), Reason::Age { days: 14 })]
        );
    }

    #[test]
    fn kept_files_are_never_removed_but_take_their_room() {
        let files = [
            file("running", 900, 30 * DAY),
            file("a", 100, 2 * DAY),
            file("b", 100, DAY),
        ];
        let keep: HashSet<&str> = ["running"].into();
        let removed = decide(&files, &keep, LIMITS, now());
        // 1100 bytes with the kept one: the oldest other goes, then it fits.
        assert_eq!(
            names(&files, &removed),
            [("a".to_string(), Reason::Size { limit_bytes: 1000 })]
        );
        // Kept files alone over the limit: everything else goes, they stay.
        let keep: HashSet<&str> = ["running", "b"].into();
        let tight = SpillLimits {
            max_bytes: 10,
            ..LIMITS
        };
        let removed = decide(&files, &keep, tight, now());
        assert_eq!(
            names(&files, &removed),
            [("a".to_string(), Reason::Size { limit_bytes: 10 })]
        );
    }

    #[test]
    fn ties_break_by_name_and_future_mtimes_count_as_new() {
        let future = SpillFile {
            name: "future".into(),
            bytes: 600,
            modified: now() + Duration::from_secs(DAY),
        };
        let files = [file("y", 600, DAY), file("x", 600, DAY), future];
        let removed = decide(&files, &HashSet::new(), LIMITS, now());
        let size = Reason::Size { limit_bytes: 1000 };
        assert_eq!(
            names(&files, &removed),
            [("x".to_string(), size), ("y".to_string(), size)]
        );
    }

    #[test]
    fn reasons_read_as_the_model_is_told_them() {
        assert_eq!(Reason::Age { days: 14 }.to_string(), "older than 14 days");
        assert_eq!(Reason::Age { days: 1 }.to_string(), "older than 1 day");
        assert_eq!(
            Reason::Size {
                limit_bytes: 2 << 30
            }
            .to_string(),
            "the oldest while spill files held more than 2 GiB"
        );
        assert_eq!(human_bytes(17), "17 bytes");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(256 << 20), "256 MiB");
    }
}
