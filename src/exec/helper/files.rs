//! The helper's `file` request (E11): one file tool's access to a file on the host,
//! at the mapped path, judged and done by the helper's own executor, and what it
//! answers (the text or the outcome, with the entry of its containment that allowed
//! it, or the refusal).

use crate::exec::{BashExecutor, FileError, FileIntent, FileRequest, FileStat, WriteOutcome};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `file` params: one file tool's access to a file on the host (E11), at the mapped
/// path, judged and done by the helper's own executor (its containment, not the
/// daemon's disk).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileParams {
    pub path: PathBuf,
    pub writable_roots: Vec<PathBuf>,
    pub op: FileOp,
}

/// What `file` does.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum FileOp {
    Stat {
        intent: FileIntent,
    },
    Read,
    /// The whole new text (the file tools write only UTF-8 text).
    Write {
        content: String,
    },
    /// Which entry of the helper's containment decides the file, nothing opened
    /// (`_dsh/policy/explain` under the ssh executor).
    Containment {
        intent: FileIntent,
    },
}

/// The answer to `file`. A read carries text: the file tools read only UTF-8, so
/// other bytes are refused on the host rather than shipped.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileAnswer {
    Stat(Option<FileStat>),
    /// The text (`None`: no such file) and the entry of the helper's containment that
    /// allowed the read, from the check the read acted on (the audit line keeps it).
    Read {
        text: Option<String>,
        containment: Option<crate::containment::Containment>,
    },
    Written(WriteOutcome),
    Containment(Option<crate::containment::Containment>),
    Err(FileError),
}

/// What the helper's executor answers to `p`.
pub(super) async fn answer(exec: &dyn BashExecutor, p: FileParams) -> FileAnswer {
    let request = FileRequest {
        path: p.path,
        writable_roots: p.writable_roots,
    };
    let answer = match p.op {
        FileOp::Stat { intent } => exec.stat_file(&request, intent).await.map(FileAnswer::Stat),
        FileOp::Read => match exec.read_file(&request).await {
            Ok(read) => read
                .bytes
                .map(String::from_utf8)
                .transpose()
                .map(|text| FileAnswer::Read {
                    text,
                    containment: read.containment,
                })
                .map_err(|_| FileError::NotText(request.path.clone())),
            Err(e) => Err(e),
        },
        FileOp::Write { content } => exec
            .write_file(&request, content.as_bytes())
            .await
            .map(FileAnswer::Written),
        FileOp::Containment { intent } => exec
            .file_containment(&request, intent)
            .await
            .map(FileAnswer::Containment),
    };
    answer.unwrap_or_else(FileAnswer::Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every file answer, refusals included, crosses the wire and comes back the same
    /// (the ssh executor's file tools, E11).
    #[test]
    fn e11_file_answers_round_trip_on_the_wire() {
        let p = PathBuf::from("/srv/p/f");
        let errors = [
            FileError::Masked {
                path: p.clone(),
                entry: p.clone(),
                masked_by: crate::containment::MaskedBy::DenyRead,
            },
            FileError::Protected {
                path: p.clone(),
                entry: "/srv/p/.git".into(),
                what: crate::containment::Protection::Git,
            },
            FileError::OutsideRoots {
                path: p.clone(),
                roots: vec!["/srv/p".into()],
            },
            FileError::NotReachable {
                path: p.clone(),
                why: "private /tmp".into(),
                place: crate::containment::OwnPlace::Tmp,
            },
            FileError::IsDirectory(p.clone()),
            FileError::NotRegular(p.clone()),
            FileError::NotText(p.clone()),
            FileError::TooLarge {
                path: p.clone(),
                len: 1 << 30,
            },
            FileError::NoDirectory {
                path: p.clone(),
                dir: "/srv".into(),
            },
            FileError::Io {
                path: p.clone(),
                reason: "EIO".into(),
            },
            FileError::Unavailable("down".into()),
        ];
        let mut answers: Vec<FileAnswer> = errors.into_iter().map(FileAnswer::Err).collect();
        answers.push(FileAnswer::Read {
            text: Some("text".into()),
            containment: Some(crate::containment::Containment::ReadOnly { entry: "/".into() }),
        });
        answers.push(FileAnswer::Containment(Some(
            crate::containment::Containment::SpillFile,
        )));
        answers.push(FileAnswer::Stat(Some(FileStat {
            len: 4,
            regular: true,
            containment: None,
        })));
        answers.push(FileAnswer::Written(WriteOutcome {
            created: true,
            containment: Some(crate::containment::Containment::WritableRoot { root: "/w".into() }),
        }));
        for answer in answers {
            let wire = serde_json::to_value(&answer).unwrap();
            let back: FileAnswer = serde_json::from_value(wire.clone()).unwrap();
            assert_eq!(format!("{back:?}"), format!("{answer:?}"), "{wire}");
        }
        let op: FileOp = serde_json::from_value(json!({"op": "stat", "intent": "write"})).unwrap();
        assert!(matches!(
            op,
            FileOp::Stat {
                intent: FileIntent::Write
            }
        ));
    }
}
