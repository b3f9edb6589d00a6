//! The file tools through the real daemon (spec/files.md): the scripted model calls
//! read_file, edit_file and write_file; the editor sees the diff on the pending call and
//! in the permission question; a client offering `fs` gets the I/O (its buffers, not the
//! disk), one that does not leaves it to the disk; rules by path, read-only mode and
//! writes outside the session's directories.

use crate::common;

use common::client::Client;
use common::fake_model::{FakeModel, Reply, text, tool_call};
use serde_json::{Value, json};
use std::path::Path;
use tokio::process::Child;

/// `dsh serve --stdio` pointed at `model`, new sessions in `mode`, with `extra` config.
async fn daemon(
    dir: &Path,
    model: &FakeModel,
    mode: &str,
    extra: &str,
    fs: bool,
) -> (Child, Client) {
    let config = dir.join("dsh.toml");
    std::fs::write(
        &config,
        format!(
            "[permissions]\ndefault_mode = \"{mode}\"\n{extra}\n{}",
            model.config()
        ),
    )
    .unwrap();
    let (child, mut client) = common::spawn_client(
        common::dsh()
            .args(["serve", "--stdio", "--state-dir"])
            .arg(dir.join("state"))
            .arg("--config")
            .arg(&config),
    );
    if fs {
        client.initialize_with_fs().await;
    } else {
        client.initialize().await;
    }
    (child, client)
}

fn call(id: &str, tool: &str, arguments: Value) -> Reply {
    tool_call(id, tool, &arguments.to_string())
}

/// The pending `tool_call` update of `call_id`.
fn announced(c: &Client, session: &str, call_id: &str) -> Value {
    c.updates_of(session, "tool_call")
        .into_iter()
        .find(|u| u["toolCallId"] == call_id)
        .unwrap_or_else(|| panic!("no tool_call {call_id}"))
}

/// The text the model got for `call_id` and whether it was an error.
fn result(c: &Client, session: &str, call_id: &str) -> (String, bool) {
    let done = c
        .updates_of(session, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == call_id && u["rawOutput"].is_object())
        .unwrap_or_else(|| panic!("no result for {call_id}"));
    (
        done["rawOutput"]["text"].as_str().unwrap().to_string(),
        done["rawOutput"]["isError"].as_bool().unwrap(),
    )
}

/// The diff block of a call's content.
fn diff(content: &Value) -> Value {
    content
        .as_array()
        .and_then(|c| c.iter().find(|b| b["type"] == "diff"))
        .cloned()
        .unwrap_or_else(|| panic!("no diff in {content}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_tools_on_disk_show_diffs_before_asking_and_follow_path_rules() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w");
    std::fs::create_dir_all(w.join("secrets")).unwrap();
    std::fs::write(w.join("twice.txt"), "x = 1\nx = 1\n").unwrap();
    let mut model = FakeModel::start(vec![
        call(
            "c_write",
            "write_file",
            json!({"path": "a.txt", "content": "one\ntwo\n"}),
        ),
        call(
            "c_twice",
            "edit_file",
            json!({"path": "twice.txt", "old_string": "x = 1", "new_string": "x = 2"}),
        ),
        call(
            "c_edit",
            "edit_file",
            json!({"path": "a.txt", "old_string": "two", "new_string": "TWO"}),
        ),
        call("c_read", "read_file", json!({"path": "a.txt", "offset": 2})),
        call(
            "c_secret",
            "write_file",
            json!({"path": "secrets/k", "content": "s"}),
        ),
        text("done"),
    ])
    .await;
    let rules =
        "[[permissions.rules]]\ntool = \"write_file\"\npath = \"secrets/**\"\naction = \"deny\"\n";
    let (mut d, mut c) = daemon(dir.path(), &model, "ask", rules, false).await;
    let s = c.new_session(&w).await;
    // write, the not-unique edit and the edit are asked (mode ask); the read and the denied
    // write are not.
    c.permission_answers
        .extend(["allow_once", "allow_once", "allow_once"]);
    let r = c.prompt(&s, "edit files").await.unwrap();
    assert_eq!(r["stopReason"], "end_turn");

    // F4 + F6: a new file's diff has no old text, on the pending call and on the question.
    let a = w.join("a.txt");
    let pending = announced(&c, &s, "c_write");
    assert_eq!(pending["kind"], "edit");
    assert_eq!(pending["status"], "pending");
    assert_eq!(pending["title"], "Write a.txt");
    assert_eq!(pending["locations"], json!([{"path": a, "line": 1}]));
    let d0 = diff(&pending["content"]);
    assert_eq!(d0["path"], json!(a));
    assert_eq!(d0["newText"], "one\ntwo\n");
    assert!(d0["oldText"].is_null(), "{d0}");
    assert_eq!(
        c.permission_requests.len(),
        3,
        "{:?}",
        c.permission_requests
    );
    let asked = &c.permission_requests[0]["toolCall"];
    assert_eq!(asked["toolCallId"], "c_write");
    assert_eq!(diff(&asked["content"]), d0);
    assert_eq!(
        result(&c, &s, "c_write"),
        ("Created a.txt (8 bytes)".into(), false)
    );

    // F3: a not-unique old_string fails clearly and changes nothing.
    let (text, is_error) = result(&c, &s, "c_twice");
    assert!(is_error);
    assert_eq!(
        text,
        "Error: old_string occurs 2 times in twice.txt; include more surrounding lines to make it unique, or set replace_all to replace every one"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("twice.txt")).unwrap(),
        "x = 1\nx = 1\n"
    );

    // F6: an edit's diff is the whole file before and after, its line the first changed.
    let pending = announced(&c, &s, "c_edit");
    assert_eq!(pending["locations"], json!([{"path": a, "line": 2}]));
    let d1 = diff(&pending["content"]);
    assert_eq!(
        (d1["oldText"].as_str(), d1["newText"].as_str()),
        (Some("one\ntwo\n"), Some("one\nTWO\n"))
    );
    assert_eq!(diff(&c.permission_requests[2]["toolCall"]["content"]), d1);
    assert_eq!(
        result(&c, &s, "c_edit"),
        ("Edited a.txt: 1 replacement, from line 2".into(), false)
    );
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\nTWO\n");

    // F2: numbered lines from the offset, a read kind, the line in the location.
    let pending = announced(&c, &s, "c_read");
    assert_eq!(pending["kind"], "read");
    assert_eq!(pending["locations"], json!([{"path": a, "line": 2}]));
    assert_eq!(
        result(&c, &s, "c_read"),
        ("     2\tTWO\n[lines 2-2 of 2]\n".into(), false)
    );

    // F7: a deny rule by path vetoes without asking; nothing is written.
    let (text, is_error) = result(&c, &s, "c_secret");
    assert!(is_error);
    assert!(text.contains("secrets/**"), "{text}");
    assert!(!w.join("secrets/k").exists());

    // The model saw each result in order.
    let mut last = None;
    while let Ok(req) = model.requests.try_recv() {
        last = Some(req);
    }
    let last = last.expect("requests");
    let tool_texts: Vec<String> = common::fake_model::messages(&last)
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert_eq!(tool_texts.len(), 5, "{tool_texts:?}");
    d.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_offering_fs_gets_the_io_and_writes_outside_the_cwd_are_asked_in_auto() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w");
    std::fs::create_dir_all(&w).unwrap();
    let b = w.join("b.txt");
    std::fs::write(&b, "on disk\n").unwrap();
    let outside = dir.path().join("outside.txt");
    // A link inside the cwd to a directory outside it: judged by where it points.
    std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), w.join("link")).unwrap();
    let model = FakeModel::start(vec![
        call("c_read", "read_file", json!({"path": "b.txt"})),
        call(
            "c_edit",
            "edit_file",
            json!({"path": "b.txt", "old_string": "unsaved", "new_string": "edited"}),
        ),
        call(
            "c_new",
            "write_file",
            json!({"path": "c.txt", "content": "new\n"}),
        ),
        call(
            "c_out",
            "write_file",
            json!({"path": "../outside.txt", "content": "x"}),
        ),
        text("done"),
    ])
    .await;
    let (mut d, mut c) = daemon(dir.path(), &model, "auto", "", true).await;
    let buffers = c.buffers.as_mut().unwrap();
    buffers.insert(b.display().to_string(), "unsaved buffer\n".into());
    let s = c.new_session(&w).await;
    c.permission_answers.extend(["reject_once", "reject_once"]);
    let r = c.prompt(&s, "edit through the editor").await.unwrap();
    assert_eq!(r["stopReason"], "end_turn");

    // F5: the editor's unsaved buffer is what is read and edited; the disk is untouched.
    assert_eq!(
        result(&c, &s, "c_read"),
        ("     1\tunsaved buffer\n".into(), false)
    );
    let d1 = diff(&announced(&c, &s, "c_edit")["content"]);
    assert_eq!(d1["oldText"], "unsaved buffer\n");
    assert_eq!(d1["newText"], "edited buffer\n");
    assert!(!result(&c, &s, "c_edit").1);
    let buffers = c.buffers.as_ref().unwrap();
    assert_eq!(buffers[&b.display().to_string()], "edited buffer\n");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "on disk\n");
    // A new file is written through the editor too.
    assert_eq!(
        result(&c, &s, "c_new"),
        ("Created c.txt (4 bytes)".into(), false)
    );
    assert_eq!(buffers[&w.join("c.txt").display().to_string()], "new\n");
    assert!(!w.join("c.txt").exists());
    let writes: Vec<&str> = c
        .fs_requests
        .iter()
        .filter(|(m, _)| m == "fs/write_text_file")
        .map(|(_, p)| p["path"].as_str().unwrap())
        .collect();
    assert_eq!(writes.len(), 2, "{:?}", c.fs_requests);
    assert!(
        c.fs_requests
            .iter()
            .all(|(_, p)| p["sessionId"] == s.as_str())
    );

    // F7: in auto, the write outside the session's directories was asked (and refused).
    assert_eq!(
        c.permission_requests.len(),
        1,
        "{:?}",
        c.permission_requests
    );
    let asked = &c.permission_requests[0]["toolCall"];
    assert_eq!(asked["toolCallId"], "c_out");
    let reason = asked["content"].to_string();
    assert!(
        reason.contains("is outside the session's directories"),
        "{reason}"
    );
    assert!(result(&c, &s, "c_out").1);
    assert!(!outside.exists());
    d.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mode_reads_and_refuses_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("r.txt"), "keep\n").unwrap();
    let model = FakeModel::start(vec![
        call("c_read", "read_file", json!({"path": "r.txt"})),
        call(
            "c_edit",
            "edit_file",
            json!({"path": "r.txt", "old_string": "keep", "new_string": "lose"}),
        ),
        call(
            "c_write",
            "write_file",
            json!({"path": "n.txt", "content": "n"}),
        ),
        text("done"),
    ])
    .await;
    // Even a rule allowing every write does not loosen read-only mode.
    let rules = "[[permissions.rules]]\ntool = \"*_file\"\naction = \"allow\"\n";
    let (mut d, mut c) = daemon(dir.path(), &model, "read-only", rules, false).await;
    let s = c.new_session(&w).await;
    let r = c.prompt(&s, "try").await.unwrap();
    assert_eq!(r["stopReason"], "end_turn");
    assert_eq!(result(&c, &s, "c_read"), ("     1\tkeep\n".into(), false));
    for id in ["c_edit", "c_write"] {
        let (text, is_error) = result(&c, &s, id);
        assert!(is_error, "{id}: {text}");
        assert!(text.contains("read-only mode"), "{id}: {text}");
    }
    assert!(c.permission_requests.is_empty());
    assert_eq!(std::fs::read_to_string(w.join("r.txt")).unwrap(), "keep\n");
    assert!(!w.join("n.txt").exists());
    d.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_sandbox_writes_outside_its_writable_roots_are_denied() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w");
    let extra = dir.path().join("cache");
    let other = dir.path().join("other");
    for d in [&w, &extra, &other] {
        std::fs::create_dir_all(d).unwrap();
    }
    let model = FakeModel::start(vec![
        call(
            "c_other",
            "write_file",
            json!({"path": other.join("f"), "content": "x"}),
        ),
        call(
            "c_extra",
            "write_file",
            json!({"path": extra.join("f"), "content": "y"}),
        ),
        call("c_in", "write_file", json!({"path": "f", "content": "z"})),
        text("done"),
    ])
    .await;
    let config = format!(
        "[exec]\nkind = \"sandbox\"\n[exec.sandbox]\nwritable = [\"{}\"]\n",
        extra.display()
    );
    let (mut d, mut c) = daemon(dir.path(), &model, "auto", &config, false).await;
    let s = c.new_session(&w).await;
    c.permission_answers.push_back("allow_once");
    let r = c.prompt(&s, "write").await.unwrap();
    assert_eq!(r["stopReason"], "end_turn");
    // Outside every root the sandbox binds: denied, not asked.
    let (text, is_error) = result(&c, &s, "c_other");
    assert!(
        is_error && text.contains("outside the sandbox's writable roots"),
        "{text}"
    );
    assert!(!other.join("f").exists());
    // A configured sandbox root is writable, but outside the session's directories: asked.
    assert_eq!(
        c.permission_requests.len(),
        1,
        "{:?}",
        c.permission_requests
    );
    assert_eq!(
        c.permission_requests[0]["toolCall"]["toolCallId"],
        "c_extra"
    );
    assert_eq!(std::fs::read_to_string(extra.join("f")).unwrap(), "y");
    assert_eq!(std::fs::read_to_string(w.join("f")).unwrap(), "z");
    d.kill().await.ok();
}
