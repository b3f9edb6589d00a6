//! `read_file`, `edit_file`, `write_file`: the model's file tools (spec/files.md, F1-F9).
//!
//! They exist so the model stops editing through `sed -i` and heredocs: an edit here is
//! shown to the person as a diff before it is asked about, and when the editor offers
//! `fs/read_text_file` / `fs/write_text_file` the I/O goes through it, so its unsaved
//! buffers are what is read and edited and it records the edit for review. Otherwise the
//! disk is used, with atomic writes. Like every tool they only shape text: whether a
//! call may run is the waterfall's (the policy judges file tools by path, src/policy).

use super::schema::{self, ToolSchema};
use super::{Tool, ToolKind};
use crate::containment::Containment;
use crate::exec::{
    BashExecutor, FileError, FileIntent, FileRead, FileRequest, FileStat, WriteOutcome,
};
use crate::hooks::waterfall::{ToolExecution, ToolOutput};
use crate::registry::Session;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Lines `read_file` returns when the call names no `limit` (F2).
pub const DEFAULT_LIMIT: usize = 2000;
/// Characters of one line `read_file` shows; the rest is cut and marked (F2).
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes of numbered text one `read_file` returns at most, whatever the limit (F2).
pub const MAX_READ_BYTES: usize = 256 * 1024;
/// Largest text (before or after) a diff preview carries (F6): a bigger change is shown by
/// its result only, rather than pushing megabytes into every update of the call.
pub const MAX_DIFF_BYTES: usize = 1024 * 1024;
/// Largest file the tools read (F8): bigger files are refused below the seam, not loaded.
pub const MAX_FILE_BYTES: u64 = crate::exec::MAX_FILE_BYTES;

/// The three file tools, in the order the model is offered them, reaching files at
/// `place`.
pub fn tools(place: FilePlace) -> Vec<Arc<dyn Tool>> {
    let load = |doc: &str| Arc::new(ToolSchema::parse(doc).expect("embedded tool schema is valid"));
    vec![
        Arc::new(ReadFile {
            schema: load(schema::READ_FILE),
            place: place.clone(),
        }),
        Arc::new(EditFile {
            schema: load(schema::EDIT_FILE),
            place: place.clone(),
        }),
        Arc::new(WriteFile {
            schema: load(schema::WRITE_FILE),
            place,
        }),
    ]
}

/// Whether `tool` is one of the file tools (the policy judges them by path).
pub fn is_file_tool(tool: &str) -> bool {
    matches!(tool, "read_file" | "edit_file" | "write_file")
}

/// Whether `tool` changes a file.
pub fn writes(tool: &str) -> bool {
    matches!(tool, "edit_file" | "write_file")
}

/// A change a file tool is about to make, shown to the person before they are asked (F6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    pub path: PathBuf,
    /// The text before; `None` for a file that does not exist yet.
    pub old_text: Option<String>,
    pub new_text: String,
    /// The first line the change touches (1-based), for the editor to follow.
    pub line: Option<u32>,
}

/// `path` made absolute against `cwd` and cleaned without touching the disk (`.` dropped,
/// `..` taken back), so a rule by path sees `a/../secrets/x` as `secrets/x` (F1).
pub fn resolve(cwd: &Path, path: &str) -> PathBuf {
    // The policy judges the same resolution it is given here.
    crate::policy::resolve_path(cwd, path)
}

/// The call's `path` argument, resolved against its session's cwd (absolute paths only
/// without a session).
fn call_path(call: &ToolExecution) -> Result<PathBuf, String> {
    let path = call
        .arguments
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if path.trim().is_empty() {
        return Err("invalid path: empty".into());
    }
    match &call.session {
        Some(session) => Ok(resolve(&session.cwd, path)),
        None if Path::new(path).is_absolute() => Ok(resolve(Path::new("/"), path)),
        None => Err(format!(
            "invalid path `{path}`: relative, and there is no session to resolve it against"
        )),
    }
}

/// Where the file tools reach files (E11): through the executor, which answers for its
/// own place (the local disk, the sandbox's view of it, the ssh host at the mapped
/// path), or, when the daemon has no executor at all (`[exec] kind = "none"`), the
/// daemon's disk as the local executor would.
#[derive(Clone)]
pub enum FilePlace {
    Executor(Arc<dyn BashExecutor>),
    Disk,
}

impl FilePlace {
    /// Whether the files are this machine's (the editor's `fs` may stand in for them).
    fn is_local(&self) -> bool {
        match self {
            FilePlace::Executor(exec) => exec.files_are_local(),
            FilePlace::Disk => true,
        }
    }

    async fn stat(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<FileStat>, FileError> {
        match self {
            FilePlace::Executor(exec) => exec.stat_file(request, intent).await,
            FilePlace::Disk => {
                let path = request.path.clone();
                crate::exec::local::blocking(move || crate::exec::local::stat_disk(&path)).await
            }
        }
    }

    async fn read(&self, request: &FileRequest) -> Result<FileRead, FileError> {
        match self {
            FilePlace::Executor(exec) => exec.read_file(request).await,
            FilePlace::Disk => {
                let path = request.path.clone();
                let bytes =
                    crate::exec::local::blocking(move || crate::exec::local::read_disk(&path))
                        .await?;
                Ok(FileRead {
                    bytes,
                    containment: None,
                })
            }
        }
    }

    async fn write(&self, request: &FileRequest, content: &str) -> Result<WriteOutcome, FileError> {
        match self {
            FilePlace::Executor(exec) => exec.write_file(request, content.as_bytes()).await,
            FilePlace::Disk => {
                let (path, content) = (request.path.clone(), content.to_string());
                crate::exec::local::blocking(move || {
                    crate::exec::local::write_disk(&path, content.as_bytes())
                })
                .await
            }
        }
    }
}

/// Where `call` reaches its file (issue 39): the tools' own place, or, for a call with
/// `sandbox: "off"` that the policy judged as leaving the sandbox (the person allowed
/// it once, or an allow rule naming the path), the executor outside the sandbox, as
/// bash's escalation does. An invalid request is refused (T1-style); under an executor
/// with no outside the argument changes nothing; a request the policy did not judge as
/// leaving is refused, never run outside unjudged.
fn call_place(place: &FilePlace, call: &ToolExecution) -> Result<FilePlace, String> {
    let requested = crate::policy::Escalation::requested(&call.arguments)
        .map_err(|e| e.to_string())?
        .is_some();
    if !requested {
        return Ok(place.clone());
    }
    let judged = call
        .judged()
        .is_some_and(|(_, judgement)| judgement.escalation.is_some());
    match leaving(place, judged) {
        Some(outside) => Ok(outside),
        None if judged || outside(place).is_none() => Ok(place.clone()),
        None => Err(
            "refused to reach the file outside the sandbox: the call was not judged as \
             leaving it"
                .into(),
        ),
    }
}

/// The executor outside `place`'s containment, if it has one.
fn outside(place: &FilePlace) -> Option<Arc<dyn BashExecutor>> {
    match place {
        FilePlace::Executor(exec) => exec.outside(),
        FilePlace::Disk => None,
    }
}

/// Where a call the policy judged as leaving the sandbox (`judged`) reaches its file:
/// the executor outside it; `None` when it is not judged so or there is no outside.
/// The write and its diff preview ask this one place.
fn leaving(place: &FilePlace, judged: bool) -> Option<FilePlace> {
    judged
        .then(|| outside(place))
        .flatten()
        .map(FilePlace::Executor)
}

/// What the executor is asked about `path` for a call of `session`: the same writable
/// roots its commands get.
fn file_request(session: Option<&Arc<Session>>, path: &Path) -> FileRequest {
    FileRequest {
        path: path.to_path_buf(),
        writable_roots: session.map(|s| s.writable_roots()).unwrap_or_default(),
    }
}

/// Why a file tool's read or write failed: the model's text and, when the sandbox
/// refused it, the layout entry that did (issue 39: the audit line records it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failed {
    text: String,
    containment: Option<crate::containment::Containment>,
}

impl From<FileError> for Failed {
    fn from(e: FileError) -> Self {
        Failed {
            containment: e.containment(),
            text: e.to_string(),
        }
    }
}

impl From<String> for Failed {
    fn from(text: String) -> Self {
        Failed {
            text,
            containment: None,
        }
    }
}

impl From<Failed> for ToolOutput {
    fn from(failed: Failed) -> Self {
        ToolOutput {
            containment: failed.containment,
            ..ToolOutput::error(failed.text)
        }
    }
}

/// A file's text as [`read_text`] read it, and the entry of the executor's
/// containment that allowed the read (issue 39: an allowed call's audit line keeps it).
#[derive(Debug)]
pub struct ReadText {
    /// `None`: the file does not exist.
    pub text: Option<String>,
    pub containment: Option<Containment>,
}

/// Reads a file's text (F5): through the editor when it offers reads and the file is on
/// this machine, once the executor allowed the path; else through the executor. Also a
/// wrapped agent's `fs/read_text_file` (`crate::wrap`), once judged; its error is the
/// text the caller gives back and the containment entry that refused, if one did.
pub async fn read_text(
    place: &FilePlace,
    session: Option<&Arc<Session>>,
    path: &Path,
) -> Result<ReadText, ToolOutput> {
    read_text_or_failed(place, session, path)
        .await
        .map_err(ToolOutput::from)
}

async fn read_text_or_failed(
    place: &FilePlace,
    session: Option<&Arc<Session>>,
    path: &Path,
) -> Result<ReadText, Failed> {
    let request = file_request(session, path);
    // Only when the editor offers reads: otherwise the check below would be made
    // twice, once for nothing (the executor's read judges again).
    if place.is_local()
        && let Some(files) = session
            .and_then(|s| s.client_files())
            .filter(|f| f.offers(FileIntent::Read))
    {
        // The same containment first: the editor reads whatever its user can.
        let stat = place.stat(&request, FileIntent::Read).await?;
        if let Some(answer) = files.read(path).await {
            let containment = stat.as_ref().and_then(|s| s.containment.clone());
            // The editor answers for files it has open and for files on disk; one it
            // cannot find is an error there too, so the executor said whether it exists.
            return match answer {
                Ok(text) => Ok(ReadText {
                    text: Some(text),
                    containment,
                }),
                Err(_) if stat.is_none() => Ok(ReadText {
                    text: None,
                    containment,
                }),
                Err(e) => Err(format!("the editor could not read {}: {e}", path.display()).into()),
            };
        }
    }
    let read = place.read(&request).await?;
    let text = match read.bytes {
        Some(bytes) => {
            Some(String::from_utf8(bytes).map_err(|_| FileError::NotText(path.to_path_buf()))?)
        }
        None => None,
    };
    Ok(ReadText {
        text,
        containment: read.containment,
    })
}

/// Writes a file's whole text (F5): through the editor when it offers writes and the
/// file is on this machine, once the executor allowed the write; else through the
/// executor (atomically: a temporary file beside it, renamed over it, its mode kept).
/// Says whether the file is new.
async fn write_text(
    place: &FilePlace,
    session: Option<&Arc<Session>>,
    path: &Path,
    content: &str,
) -> Result<WriteOutcome, Failed> {
    let request = file_request(session, path);
    if place.is_local()
        && let Some(files) = session
            .and_then(|s| s.client_files())
            .filter(|f| f.offers(FileIntent::Write))
    {
        let stat = place.stat(&request, FileIntent::Write).await?;
        if let Some(answer) = files.write(path, content).await {
            return answer
                .map(|()| WriteOutcome {
                    created: stat.is_none(),
                    containment: stat.and_then(|s| s.containment),
                })
                .map_err(|e| format!("the editor could not write {}: {e}", path.display()).into());
        }
    }
    Ok(place.write(&request, content).await?)
}

/// The 1-based line where byte `at` of `text` is.
fn line_at(text: &str, at: usize) -> u32 {
    let before = text.get(..at).unwrap_or(text);
    (before.bytes().filter(|b| *b == b'\n').count() + 1) as u32
}

/// An edit applied to `text`: the new text, how many replacements, the first line touched;
/// or the error the model gets (F3).
pub fn apply_edit(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    shown_path: &str,
) -> Result<(String, usize, u32), String> {
    if old.is_empty() {
        return Err("old_string is empty; use write_file to write a whole file".into());
    }
    if old == new {
        return Err("old_string and new_string are the same; nothing to change".into());
    }
    let count = text.matches(old).count();
    let first = text.find(old);
    match (count, first) {
        (0, _) | (_, None) => Err(format!(
            "old_string was not found in {shown_path}; read the file again and copy the text exactly (whitespace included, without line numbers)"
        )),
        (n, Some(_)) if n > 1 && !replace_all => Err(format!(
            "old_string occurs {n} times in {shown_path}; include more surrounding lines to make it unique, or set replace_all to replace every one"
        )),
        (n, Some(at)) => {
            let edited = if replace_all {
                text.replace(old, new)
            } else {
                text.replacen(old, new, 1)
            };
            Ok((edited, n, line_at(text, at)))
        }
    }
}

/// The numbered text `read_file` returns for `text` (F2).
pub fn numbered(
    text: &str,
    offset: usize,
    limit: usize,
    shown_path: &str,
) -> Result<String, String> {
    if text.is_empty() {
        return Ok(format!("{shown_path} is empty"));
    }
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    if offset > total {
        return Err(format!(
            "offset {offset} is past the end of {shown_path} ({total} lines)"
        ));
    }
    let mut out = String::new();
    let mut last = offset - 1;
    let mut cut_lines = 0;
    for (i, line) in lines.iter().enumerate().skip(offset - 1).take(limit) {
        let shown: String = line.chars().take(MAX_LINE_CHARS).collect();
        let row = if shown.len() < line.len() {
            cut_lines += 1;
            format!(
                "{:>6}\t{shown}… [line cut at {MAX_LINE_CHARS} characters]\n",
                i + 1
            )
        } else {
            format!("{:>6}\t{line}\n", i + 1)
        };
        if out.len() + row.len() > MAX_READ_BYTES && last >= offset {
            break;
        }
        out.push_str(&row);
        last = i + 1;
    }
    if last < total {
        out.push_str(&format!(
            "[lines {offset}-{last} of {total}; read on with offset {}]\n",
            last + 1
        ));
    } else if offset > 1 {
        out.push_str(&format!("[lines {offset}-{last} of {total}]\n"));
    }
    if cut_lines > 0 {
        out.push_str(&format!(
            "[{cut_lines} long line(s) cut at {MAX_LINE_CHARS} characters]\n"
        ));
    }
    Ok(out)
}

/// What an edit or write will do to its file, computed from the file as it is now, for
/// the diff the person sees before being asked (F6). `None` when the call would fail
/// anyway (its error is the result) or is not a change. `leaving`: the call was judged
/// as leaving the sandbox (the question is about running it outside), so the file is
/// read where the write would reach it, outside, not through the sandbox's view.
pub async fn preview(
    place: &FilePlace,
    session: Option<&Arc<Session>>,
    tool: &str,
    arguments: &Value,
    leaving_sandbox: bool,
) -> Option<FileDiff> {
    let outside = leaving(place, leaving_sandbox);
    let place = outside.as_ref().unwrap_or(place);
    let raw = arguments.get("path").and_then(Value::as_str)?;
    let path = match session {
        Some(s) => resolve(&s.cwd, raw),
        None if Path::new(raw).is_absolute() => resolve(Path::new("/"), raw),
        None => return None,
    };
    let old = read_text(place, session, &path).await.ok()?.text;
    if old.as_ref().is_some_and(|o| o.len() > MAX_DIFF_BYTES) {
        return None;
    }
    let str_arg = |k| arguments.get(k).and_then(Value::as_str);
    match tool {
        "write_file" => {
            let line = match &old {
                Some(old) => first_changed_line(old, str_arg("content")?),
                None => 1,
            };
            Some(FileDiff {
                path,
                old_text: old,
                new_text: str_arg("content")?.to_string(),
                line: Some(line),
            })
        }
        "edit_file" => {
            let old = old?;
            let all = arguments
                .get("replace_all")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let (new, _, line) = apply_edit(
                &old,
                str_arg("old_string")?,
                str_arg("new_string")?,
                all,
                raw,
            )
            .ok()?;
            Some(FileDiff {
                path,
                old_text: Some(old),
                new_text: new,
                line: Some(line),
            })
        }
        _ => None,
    }
    .filter(|d| d.new_text.len() <= MAX_DIFF_BYTES)
}

fn first_changed_line(old: &str, new: &str) -> u32 {
    let same = old
        .bytes()
        .zip(new.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    line_at(old, same)
}

/// `path` as the model wrote it, for messages: what it asked about, not our resolution.
fn shown(call: &ToolExecution) -> String {
    call.arguments
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn usize_arg(arguments: &Value, key: &str, default: usize) -> Result<usize, String> {
    match arguments.get(key).filter(|v| !v.is_null()) {
        None => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => Err(format!(
                "invalid arguments: `{key}` must be a whole number of at least 1"
            )),
        },
    }
}

struct ReadFile {
    schema: Arc<ToolSchema>,
    place: FilePlace,
}

#[async_trait::async_trait]
impl Tool for ReadFile {
    fn schema(&self) -> &Arc<ToolSchema> {
        &self.schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn call(&self, call: &ToolExecution) -> ToolOutput {
        let path = match call_path(call) {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(e),
        };
        let (offset, limit) = match (
            usize_arg(&call.arguments, "offset", 1),
            usize_arg(&call.arguments, "limit", DEFAULT_LIMIT),
        ) {
            (Ok(o), Ok(l)) => (o, l),
            (Err(e), _) | (_, Err(e)) => return ToolOutput::error(e),
        };
        let shown = shown(call);
        let place = match call_place(&self.place, call) {
            Ok(place) => place,
            Err(e) => return ToolOutput::error(e),
        };
        let read = match read_text(&place, call.session.as_ref(), &path).await {
            Ok(read) => read,
            Err(e) => return e,
        };
        match read.text {
            Some(text) => match numbered(&text, offset, limit, &shown) {
                Ok(out) => ToolOutput {
                    containment: read.containment,
                    ..ToolOutput::ok(out)
                },
                Err(e) => ToolOutput::error(e),
            },
            None => match crate::state_dir::sweep::removed_note(&path) {
                // A spill file the model was given, gone by `[state]` retention.
                Some(note) => ToolOutput::error(format!("{shown}: {note}")),
                None => ToolOutput::error(format!("{shown}: no such file")),
            },
        }
    }
}

struct EditFile {
    schema: Arc<ToolSchema>,
    place: FilePlace,
}

#[async_trait::async_trait]
impl Tool for EditFile {
    fn schema(&self) -> &Arc<ToolSchema> {
        &self.schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    async fn call(&self, call: &ToolExecution) -> ToolOutput {
        let path = match call_path(call) {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(e),
        };
        let shown = shown(call);
        let arg = |k| {
            call.arguments
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let all = call
            .arguments
            .get("replace_all")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let place = match call_place(&self.place, call) {
            Ok(place) => place,
            Err(e) => return ToolOutput::error(e),
        };
        let text = match read_text(&place, call.session.as_ref(), &path).await {
            Ok(ReadText {
                text: Some(text), ..
            }) => text,
            Ok(ReadText { text: None, .. }) => {
                return ToolOutput::error(format!(
                    "{shown}: no such file; create it with write_file"
                ));
            }
            Err(e) => return e,
        };
        let (edited, count, line) =
            match apply_edit(&text, arg("old_string"), arg("new_string"), all, &shown) {
                Ok(done) => done,
                Err(e) => return ToolOutput::error(e),
            };
        let written = match write_text(&place, call.session.as_ref(), &path, &edited).await {
            Ok(written) => written,
            Err(e) => return e.into(),
        };
        let what = if count == 1 {
            "1 replacement".to_string()
        } else {
            format!("{count} replacements")
        };
        ToolOutput {
            containment: written.containment,
            ..ToolOutput::ok(format!("Edited {shown}: {what}, from line {line}"))
        }
    }
}

struct WriteFile {
    schema: Arc<ToolSchema>,
    place: FilePlace,
}

#[async_trait::async_trait]
impl Tool for WriteFile {
    fn schema(&self) -> &Arc<ToolSchema> {
        &self.schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    async fn call(&self, call: &ToolExecution) -> ToolOutput {
        let path = match call_path(call) {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(e),
        };
        let shown = shown(call);
        let content = call
            .arguments
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let place = match call_place(&self.place, call) {
            Ok(place) => place,
            Err(e) => return ToolOutput::error(e),
        };
        let written = match write_text(&place, call.session.as_ref(), &path, content).await {
            Ok(written) => written,
            Err(e) => return e.into(),
        };
        let verb = if written.created { "Created" } else { "Wrote" };
        ToolOutput {
            containment: written.containment,
            ..ToolOutput::ok(format!("{verb} {shown} ({} bytes)", content.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn f1_paths_resolve_against_the_cwd_and_are_cleaned() {
        let cwd = Path::new("/p/work");
        assert_eq!(resolve(cwd, "a.txt"), PathBuf::from("/p/work/a.txt"));
        assert_eq!(resolve(cwd, "./x/../b"), PathBuf::from("/p/work/b"));
        assert_eq!(
            resolve(cwd, "../../../etc/passwd"),
            PathBuf::from("/etc/passwd")
        );
        assert_eq!(resolve(cwd, "/abs//c"), PathBuf::from("/abs/c"));
    }

    #[test]
    fn f2_read_numbers_lines_and_says_what_was_left_out() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(
            numbered(text, 1, 2000, "f").unwrap(),
            "     1\tone\n     2\ttwo\n     3\tthree\n"
        );
        assert_eq!(
            numbered(text, 1, 2, "f").unwrap(),
            "     1\tone\n     2\ttwo\n[lines 1-2 of 3; read on with offset 3]\n"
        );
        assert_eq!(
            numbered(text, 3, 5, "f").unwrap(),
            "     3\tthree\n[lines 3-3 of 3]\n"
        );
        assert_eq!(
            numbered(text, 4, 1, "f").unwrap_err(),
            "offset 4 is past the end of f (3 lines)"
        );
        assert_eq!(numbered("", 1, 1, "f").unwrap(), "f is empty");
        let long = "x".repeat(MAX_LINE_CHARS + 5);
        let out = numbered(&long, 1, 1, "f").unwrap();
        assert!(out.contains("… [line cut at 2000 characters]"), "{out}");
        assert!(out.ends_with("[1 long line(s) cut at 2000 characters]\n"));
        // The byte bound holds whatever the limit.
        let big = "y".repeat(1000) + "\n";
        let big = big.repeat(1000);
        let out = numbered(&big, 1, 2000, "f").unwrap();
        assert!(out.len() <= MAX_READ_BYTES + 200, "{}", out.len());
        assert!(out.contains("read on with offset"));
    }

    #[test]
    fn f3_edits_need_a_unique_present_old_string() {
        assert_eq!(
            apply_edit("a b a", "a", "c", false, "f").unwrap_err(),
            "old_string occurs 2 times in f; include more surrounding lines to make it unique, or set replace_all to replace every one"
        );
        assert_eq!(
            apply_edit("a b a", "a", "c", true, "f").unwrap(),
            ("c b c".to_string(), 2, 1)
        );
        assert!(
            apply_edit("abc", "x", "y", false, "f")
                .unwrap_err()
                .starts_with("old_string was not found in f")
        );
        assert!(apply_edit("abc", "b", "b", false, "f").is_err());
        assert_eq!(
            apply_edit("l1\nl2 b\n", "b", "B", false, "f").unwrap(),
            ("l1\nl2 B\n".to_string(), 1, 2)
        );
    }

    #[test]
    fn f1_links_are_judged_by_where_they_point() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("out")).unwrap();
        std::os::unix::fs::symlink(real.join("out"), real.join("in")).unwrap();
        assert_eq!(
            crate::fsutil::real_path(&real.join("in/new/f")),
            real.join("out/new/f")
        );
        assert_eq!(
            crate::fsutil::real_path(&real.join("plain")),
            real.join("plain")
        );
        assert_eq!(crate::fsutil::real_path(Path::new("/")), PathBuf::from("/"));
    }

    #[tokio::test]
    async fn f6_previews_show_the_change_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "a\nb\n").unwrap();
        let p = f.display().to_string();
        let edit = json!({"path": p, "old_string": "b", "new_string": "c"});
        assert_eq!(
            preview(&FilePlace::Disk, None, "edit_file", &edit, false).await,
            Some(FileDiff {
                path: f.clone(),
                old_text: Some("a\nb\n".into()),
                new_text: "a\nc\n".into(),
                line: Some(2),
            })
        );
        // An edit that will fail shows nothing: its error is the result.
        let absent = json!({"path": p, "old_string": "zz", "new_string": "c"});
        assert_eq!(
            preview(&FilePlace::Disk, None, "edit_file", &absent, false).await,
            None
        );
        let new = dir.path().join("n").display().to_string();
        let d = preview(
            &FilePlace::Disk,
            None,
            "write_file",
            &json!({"path": new, "content": "x"}),
            false,
        )
        .await
        .unwrap();
        assert_eq!((d.old_text, d.line), (None, Some(1)));
        // Too big to show as a diff.
        let big = "y".repeat(MAX_DIFF_BYTES + 1);
        assert_eq!(
            preview(
                &FilePlace::Disk,
                None,
                "write_file",
                &json!({"path": p, "content": big}),
                false,
            )
            .await,
            None
        );
        assert_eq!(
            preview(
                &FilePlace::Disk,
                None,
                "read_file",
                &json!({"path": p}),
                false
            )
            .await,
            None
        );
    }

    #[tokio::test]
    async fn f8_reads_refuse_what_is_not_text() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("b");
        std::fs::write(&bin, [0xff, 0xfe, 0]).unwrap();
        let e = read_text(&FilePlace::Disk, None, &bin).await.unwrap_err();
        assert!(e.text.contains("not UTF-8"), "{e:?}");
        let none = read_text(&FilePlace::Disk, None, &dir.path().join("none"))
            .await
            .unwrap();
        assert_eq!((none.text, none.containment), (None, None));
    }
}
