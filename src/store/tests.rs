use super::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

fn header(id: &str, cwd: &str) -> Header {
    Header {
        id: id.to_string(),
        cwd: PathBuf::from(cwd),
        created_ms: 1_700_000_000_000,
        title: None,
    }
}

fn msg(text: &str) -> Event {
    Event::UserMessage {
        at_ms: 1,
        text: text.to_string(),
        content: Vec::new(),
        message_id: None,
    }
}

fn every_event() -> Vec<Event> {
    vec![
        Event::UserMessage {
            at_ms: 1,
            text: "hello\nworld".into(),
            content: Vec::new(),
            message_id: None,
        },
        Event::AgentMessage {
            at_ms: 2,
            text: "hi".into(),
            message_id: None,
        },
        Event::AgentThought {
            at_ms: 3,
            text: "hmm".into(),
        },
        Event::ToolCall {
            at_ms: 4,
            call_id: "c1".into(),
            tool: "bash".into(),
            title: "list files".into(),
            kind: super::ToolKind::Execute,
            arguments: serde_json::json!({"command": "ls", "run_in_background": false}),
            by_model: true,
        },
        Event::ToolResult {
            at_ms: 5,
            call_id: "c1".into(),
            status: ToolStatus::Completed,
            text: "a\nb\n".into(),
            is_error: false,
            spills: Some(vec!["/s/spill/run-1.stdout".into()]),
        },
        Event::Notice {
            at_ms: 6,
            source: "tool-bash".into(),
            task_id: "bash-1".into(),
            text: "done".into(),
        },
        Event::TurnStart {
            at_ms: 7,
            turn_id: "t1".into(),
        },
        Event::TurnEnd {
            at_ms: 8,
            turn_id: "t1".into(),
            stop_reason: "end_turn".into(),
        },
        Event::ModeChange {
            at_ms: 9,
            mode_id: "auto".into(),
        },
        Event::Title {
            at_ms: 10,
            title: "A title".into(),
        },
        Event::UserMessage {
            at_ms: 11,
            text: "see [resource: file:///w/a.rs]".into(),
            content: vec![
                PromptBlock::Text { text: "see".into() },
                PromptBlock::ResourceLink {
                    uri: "file:///w/a.rs".into(),
                    name: "a.rs".into(),
                    title: None,
                    description: None,
                    mime_type: None,
                    size: None,
                },
                PromptBlock::Image {
                    mime_type: "image/png".into(),
                    data: "iVBO".into(),
                    uri: None,
                },
                PromptBlock::Resource {
                    uri: "file:///w/b.rs".into(),
                    mime_type: Some("text/rust".into()),
                    text: Some("fn b() {}".into()),
                    blob: None,
                },
            ],
            message_id: Some("m-11".into()),
        },
        Event::Plan {
            at_ms: 12,
            entries: vec![crate::store::PlanItem {
                content: "a step".into(),
                status: crate::store::PlanStatus::InProgress,
                priority: crate::store::PlanPriority::High,
            }],
        },
        Event::OptionSet {
            at_ms: 13,
            option: "think_harder".into(),
            value: true,
        },
    ]
}

fn log_file(dir: &Path, id: &str) -> PathBuf {
    sessions_dir(dir).join(format!("{id}.jsonl"))
}

fn append_raw(path: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn every_event_type_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = header("s1", "/work");
    h.title = Some("first".into());
    let log = SessionLog::create(dir.path(), &h).unwrap();
    for e in every_event() {
        log.append(&e).unwrap();
    }
    assert_eq!(log.replay().unwrap(), (h.clone(), every_event()));
    drop(log);

    let (log, read_header, events) = SessionLog::open(dir.path(), "s1").unwrap();
    assert_eq!(read_header, h);
    assert_eq!(events, every_event());
    assert_eq!(log.id(), "s1");
    assert_eq!(log.path(), log_file(dir.path(), "s1"));
    assert_eq!(latest_title(&read_header, &events), Some("A title"));
    assert_eq!(latest_title(&read_header, &[]), Some("first"));

    // The wire shape: tagged, camelCase, one line per record.
    let text = std::fs::read_to_string(log.path()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 14);
    assert_eq!(
        lines[0],
        r#"{"type":"header","id":"s1","cwd":"/work","createdMs":1700000000000,"title":"first"}"#
    );
    assert_eq!(
        lines[1],
        r#"{"type":"user_message","atMs":1,"text":"hello\nworld"}"#
    );
    assert_eq!(
        lines[4],
        r#"{"type":"tool_call","atMs":4,"callId":"c1","tool":"bash","title":"list files","kind":"execute","arguments":{"command":"ls","run_in_background":false},"byModel":true}"#
    );
    assert_eq!(
        lines[5],
        r#"{"type":"tool_result","atMs":5,"callId":"c1","status":"completed","text":"a\nb\n","isError":false,"spills":["/s/spill/run-1.stdout"]}"#
    );
    assert_eq!(
        lines[6],
        r#"{"type":"notice","atMs":6,"source":"tool-bash","taskId":"bash-1","text":"done"}"#
    );
    assert_eq!(
        lines[8],
        r#"{"type":"turn_end","atMs":8,"turnId":"t1","stopReason":"end_turn"}"#
    );
    assert_eq!(
        lines[9],
        r#"{"type":"mode_change","atMs":9,"modeId":"auto"}"#
    );
    assert_eq!(
        lines[11],
        concat!(
            r#"{"type":"user_message","atMs":11,"text":"see [resource: file:///w/a.rs]","content":["#,
            r#"{"type":"text","text":"see"},"#,
            r#"{"type":"resource_link","uri":"file:///w/a.rs","name":"a.rs"},"#,
            r#"{"type":"image","mimeType":"image/png","data":"iVBO"},"#,
            r#"{"type":"resource","uri":"file:///w/b.rs","mimeType":"text/rust","text":"fn b() {}"}],"#,
            r#""messageId":"m-11"}"#
        )
    );
    assert_eq!(
        lines[12],
        r#"{"type":"plan","atMs":12,"entries":[{"content":"a step","status":"in_progress","priority":"high"}]}"#
    );
    assert_eq!(
        lines[13],
        r#"{"type":"option_set","atMs":13,"option":"think_harder","value":true}"#
    );
}

#[test]
fn header_without_title_omits_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap();
    let text = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(
        text,
        "{\"type\":\"header\",\"id\":\"s1\",\"cwd\":\"/w\",\"createdMs\":1700000000000}\n"
    );
}

#[test]
fn create_twice_fails() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap();
    log.append(&msg("keep me")).unwrap();
    drop(log);
    let err = SessionLog::create(dir.path(), &header("s1", "/other")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    let (_, h, events) = SessionLog::open(dir.path(), "s1").unwrap();
    assert_eq!(h.cwd, PathBuf::from("/w"));
    assert_eq!(events, vec![msg("keep me")]);
}

#[test]
fn second_open_while_open_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap();
    let err = SessionLog::open(dir.path(), "s1").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    drop(log);
    SessionLog::open(dir.path(), "s1").unwrap();
}

#[test]
fn torn_last_line_is_dropped_and_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap();
    log.append(&msg("one")).unwrap();
    let path = log.path().to_path_buf();
    drop(log);
    let good_len = std::fs::metadata(&path).unwrap().len();
    append_raw(&path, br#"{"type":"user_message","atMs":1,"te"#);

    let (log, _, events) = SessionLog::open(dir.path(), "s1").unwrap();
    assert_eq!(events, vec![msg("one")]);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len);
    // The next append lands on a clean line.
    log.append(&msg("two")).unwrap();
    drop(log);
    let (_, _, events) = SessionLog::open(dir.path(), "s1").unwrap();
    assert_eq!(events, vec![msg("one"), msg("two")]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
}

#[test]
fn complete_but_unparseable_last_line_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap();
    log.append(&msg("one")).unwrap();
    let path = log.path().to_path_buf();
    drop(log);
    let good_len = std::fs::metadata(&path).unwrap().len();
    // What a machine crash can leave: a line-sized block of zeros.
    append_raw(&path, b"\0\0\0\0\n");
    let (_, _, events) = SessionLog::open(dir.path(), "s1").unwrap();
    assert_eq!(events, vec![msg("one")]);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len);
}

#[test]
fn garbage_and_unknown_lines_are_skipped_not_removed() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap();
    log.append(&msg("one")).unwrap();
    let path = log.path().to_path_buf();
    drop(log);
    append_raw(&path, b"garbage {\n\n");
    append_raw(&path, &[0xff, 0xfe, b'\n']);
    append_raw(
        &path,
        b"{\"type\":\"user_message\",\"atMs\":1,\"text\":\"two\"}\n",
    );
    // Valid JSON of an event type this build does not know: kept in the file.
    append_raw(&path, b"{\"type\":\"from_the_future\",\"atMs\":1}\n");
    let before = std::fs::read(&path).unwrap();

    let (_, _, events) = SessionLog::open(dir.path(), "s1").unwrap();
    assert_eq!(events, vec![msg("one"), msg("two")]);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn failed_write_does_not_corrupt_the_next_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap();
    // Simulate what a write that failed part-way leaves behind.
    append_raw(log.path(), b"{\"type\":\"user_mes");
    log.mark_torn();
    log.append(&msg("after")).unwrap();
    log.append(&msg("again")).unwrap();
    let (_, events) = log.replay().unwrap();
    assert_eq!(events, vec![msg("after"), msg("again")]);
}

#[test]
fn replay_from_reads_what_was_added_since_and_ends_on_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap();
    for event in every_event() {
        log.append(&event).unwrap();
    }
    let (first, to) = log.replay_from(0).unwrap();
    assert_eq!(first, every_event());
    assert_eq!(to, std::fs::metadata(log.path()).unwrap().len());
    let (none, same) = log.replay_from(to).unwrap();
    assert!(none.is_empty());
    assert_eq!(same, to);

    log.append(&msg("one")).unwrap();
    // A write that failed part-way: not read until a later append ends its line,
    // and then skipped, as a whole replay skips it.
    append_raw(log.path(), b"{\"type\":\"user_mes");
    log.mark_torn();
    let (added, to) = log.replay_from(to).unwrap();
    assert_eq!(added, vec![msg("one")]);
    log.append(&msg("two")).unwrap();
    let (added, _) = log.replay_from(to).unwrap();
    assert_eq!(added, vec![msg("two")]);

    let mut whole = every_event();
    whole.extend([msg("one"), msg("two")]);
    assert_eq!(log.replay().unwrap().1, whole);
}

#[test]
fn bad_header_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(sessions_dir(dir.path())).unwrap();
    let cases: [&[u8]; 4] = [
        b"",
        b"{\"type\":\"header\",\"id\":\"s1\"",
        b"not json\n{\"type\":\"user_message\",\"atMs\":1,\"text\":\"x\"}\n",
        b"{\"type\":\"header\",\"id\":\"other\",\"cwd\":\"/w\",\"createdMs\":1}\n",
    ];
    for bytes in cases {
        let path = log_file(dir.path(), "s1");
        std::fs::write(&path, bytes).unwrap();
        let err = SessionLog::open(dir.path(), "s1").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{bytes:?}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }
    let err = SessionLog::open(dir.path(), "missing").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
}

#[test]
fn interrupted_turn_and_dangling_calls_are_closed_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap();
    let call = |id: &str| Event::ToolCall {
        at_ms: 3,
        call_id: id.into(),
        tool: "bash".into(),
        title: "t".into(),
        kind: super::ToolKind::Execute,
        arguments: serde_json::json!({}),
        by_model: false,
    };
    let history = vec![
        Event::TurnStart {
            at_ms: 1,
            turn_id: "t1".into(),
        },
        msg("do it"),
        call("c1"),
        call("c2"),
        Event::ToolResult {
            at_ms: 4,
            call_id: "c1".into(),
            status: ToolStatus::Completed,
            text: "ok".into(),
            is_error: false,
            spills: None,
        },
        call("c3"),
    ];
    for e in &history {
        log.append(e).unwrap();
    }
    drop(log);

    let (_, _, events) = SessionLog::open(dir.path(), "s1").unwrap();
    assert_eq!(&events[..history.len()], &history[..]);
    let added = &events[history.len()..];
    assert_eq!(added.len(), 3, "{added:?}");
    for (event, id) in added[..2].iter().zip(["c2", "c3"]) {
        match event {
            Event::ToolResult {
                call_id,
                status,
                text,
                is_error,
                ..
            } => {
                assert_eq!(call_id, id);
                assert_eq!(*status, ToolStatus::Failed);
                assert_eq!(text, INTERRUPTED_TEXT);
                assert!(*is_error);
            }
            other => panic!("expected a tool_result, got {other:?}"),
        }
    }
    match &added[2] {
        Event::TurnEnd {
            turn_id,
            stop_reason,
            ..
        } => {
            assert_eq!(turn_id, "t1");
            assert_eq!(stop_reason, STOP_INTERRUPTED);
        }
        other => panic!("expected a turn_end, got {other:?}"),
    }

    // Opening again finds everything closed and adds nothing.
    let (_, _, again) = SessionLog::open(dir.path(), "s1").unwrap();
    assert_eq!(again, events);
}

#[test]
fn finished_turns_get_nothing_added() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap();
    let history = vec![
        Event::TurnStart {
            at_ms: 1,
            turn_id: "t1".into(),
        },
        Event::TurnEnd {
            at_ms: 2,
            turn_id: "t1".into(),
            stop_reason: "cancelled".into(),
        },
        msg("between turns"),
    ];
    for e in &history {
        log.append(e).unwrap();
    }
    let path = log.path().to_path_buf();
    drop(log);
    let before = std::fs::read(&path).unwrap();
    let (_, _, events) = SessionLog::open(dir.path(), "s1").unwrap();
    assert_eq!(events, history);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn symlink_at_log_path_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(sessions_dir(dir.path())).unwrap();
    let target = dir.path().join("target");
    std::fs::write(&target, "precious\n").unwrap();
    std::os::unix::fs::symlink(&target, log_file(dir.path(), "s1")).unwrap();

    let err = SessionLog::create(dir.path(), &header("s1", "/w")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    assert!(SessionLog::open(dir.path(), "s1").is_err());
    let (sessions, _) = list(dir.path(), None, None, 10).unwrap();
    assert!(sessions.is_empty());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");

    // A dangling link is not followed either (no file appears at its target).
    let nowhere = dir.path().join("nowhere");
    std::os::unix::fs::symlink(&nowhere, log_file(dir.path(), "s2")).unwrap();
    assert!(SessionLog::create(dir.path(), &header("s2", "/w")).is_err());
    assert!(!nowhere.exists());
}

#[test]
fn fifo_at_log_path_does_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(sessions_dir(dir.path())).unwrap();
    let path = log_file(dir.path(), "s1");
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = SessionLog::open(dir.path(), "s1").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    let (sessions, _) = list(dir.path(), None, None, 10).unwrap();
    assert!(sessions.is_empty());
}

#[test]
fn directory_is_0700_and_files_0600() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let log = SessionLog::create(&state, &header("s1", "/w")).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sessions_dir(&state)), 0o700);
    assert_eq!(mode(log.path()), 0o600);

    // An existing, too-open directory is tightened.
    std::fs::set_permissions(sessions_dir(&state), std::fs::Permissions::from_mode(0o755)).unwrap();
    let log2 = SessionLog::create(&state, &header("s2", "/w")).unwrap();
    assert_eq!(mode(&sessions_dir(&state)), 0o700);
    assert_eq!(mode(log2.path()), 0o600);
}

#[test]
fn invalid_ids_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let long = "a".repeat(200);
    for id in [
        "../x",
        "",
        long.as_str(),
        "a/b",
        ".",
        "..",
        "a.b",
        "a b",
        "é",
    ] {
        assert!(!is_valid_session_id(id), "{id:?}");
        let err = SessionLog::create(dir.path(), &header(id, "/w")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{id:?}");
        let err = SessionLog::open(dir.path(), id).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{id:?}");
    }
    assert!(!dir.path().join("x.jsonl").exists());
    assert!(is_valid_session_id(&"a".repeat(MAX_ID_LEN)));
    assert!(!is_valid_session_id(&"a".repeat(MAX_ID_LEN + 1)));
    assert!(is_valid_session_id("0b7c1d2e-aaaa-4bbb-8ccc-123456789abc"));
    assert!(is_valid_session_id("A_z-9"));
}

/// Sets a log's mtime, so tests control the order (including ties).
fn set_mtime(path: &Path, ms: u64) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_modified(UNIX_EPOCH + Duration::from_millis(ms))
        .unwrap();
}

#[test]
fn list_pages_every_session_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    for i in 0..25u64 {
        let id = format!("s{i:02}");
        let cwd = if i % 2 == 0 { "/even" } else { "/odd" };
        let log = SessionLog::create(dir.path(), &header(&id, cwd)).unwrap();
        // Groups of three share an mtime, so the id tie-break is exercised.
        let ms = 1_700_000_000_000 + (i / 3) * 1000;
        set_mtime(log.path(), ms);
        expected.push((ms, id, cwd));
    }
    expected.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    // Things that are not logs are skipped.
    let sessions = sessions_dir(dir.path());
    std::fs::write(sessions.join("junk.jsonl"), "not a log\n").unwrap();
    std::fs::write(sessions.join("notes.txt"), "hello\n").unwrap();
    std::fs::write(sessions.join("torn.jsonl"), "{\"type\":\"header\"").unwrap();
    std::fs::create_dir(sessions.join("dir.jsonl")).unwrap();

    let page_through = |cwd: Option<&Path>| {
        let mut seen = Vec::new();
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let (page, next) = list(dir.path(), cwd, cursor.as_deref(), 10).unwrap();
            pages.push(page.len());
            seen.extend(page);
            match next {
                Some(n) => cursor = Some(n),
                None => break,
            }
        }
        (seen, pages)
    };

    let (seen, pages) = page_through(None);
    assert_eq!(pages, vec![10, 10, 5]);
    let got: Vec<(u64, &str)> = seen.iter().map(|s| (s.updated_ms, s.id.as_str())).collect();
    let want: Vec<(u64, &str)> = expected.iter().map(|e| (e.0, e.1.as_str())).collect();
    assert_eq!(got, want);
    assert!(seen.iter().all(|s| s.title.is_none()));

    let (even, pages) = page_through(Some(Path::new("/even")));
    assert_eq!(pages, vec![10, 3]);
    let want_even: Vec<&str> = expected
        .iter()
        .filter(|e| e.2 == "/even")
        .map(|e| e.1.as_str())
        .collect();
    let got_even: Vec<&str> = even.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(got_even, want_even);
    assert!(even.iter().all(|s| s.cwd == Path::new("/even")));

    let (none, next) = list(dir.path(), Some(Path::new("/nowhere")), None, 10).unwrap();
    assert!(none.is_empty() && next.is_none());

    // Exactly one full page: no cursor to an empty page.
    let (odd, next) = list(dir.path(), Some(Path::new("/odd")), None, 12).unwrap();
    assert_eq!(odd.len(), 12);
    assert!(next.is_none());
}

#[test]
fn list_reflects_appends_and_header_titles() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = header("old", "/w");
    h.title = Some("Named".into());
    let old = SessionLog::create(dir.path(), &h).unwrap();
    set_mtime(old.path(), 1_000);
    let new = SessionLog::create(dir.path(), &header("new", "/w")).unwrap();
    set_mtime(new.path(), 2_000);
    let ids = |v: &[SessionSummary]| v.iter().map(|s| s.id.clone()).collect::<Vec<_>>();

    let (page, _) = list(dir.path(), None, None, 10).unwrap();
    assert_eq!(ids(&page), ["new", "old"]);
    assert_eq!(page[1].title.as_deref(), Some("Named"));
    assert_eq!(page[1].updated_ms, 1_000);

    old.append(&msg("later")).unwrap();
    let (page, _) = list(dir.path(), None, None, 10).unwrap();
    assert_eq!(ids(&page), ["old", "new"]);
}

#[test]
fn list_rejects_bad_cursors_and_handles_zero_limit() {
    let dir = tempfile::tempdir().unwrap();
    for id in ["a", "b"] {
        SessionLog::create(dir.path(), &header(id, "/w")).unwrap();
    }
    for cursor in ["", "x", "12", "12:", ":a", "12:../a", "-1:a"] {
        let err = list(dir.path(), None, Some(cursor), 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{cursor:?}");
    }
    let (page, next) = list(dir.path(), None, None, 0).unwrap();
    assert_eq!(page.len(), 1);
    let (page2, next2) = list(dir.path(), None, next.as_deref(), 0).unwrap();
    assert_eq!(page2.len(), 1);
    assert_ne!(page[0].id, page2[0].id);
    assert!(next2.is_none());
}

#[test]
fn list_of_an_empty_state_dir_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (page, next) = list(&dir.path().join("fresh"), None, None, 10).unwrap();
    assert!(page.is_empty() && next.is_none());
}

#[test]
fn concurrent_appends_produce_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(SessionLog::create(dir.path(), &header("s1", "/w")).unwrap());
    const THREADS: usize = 8;
    const PER_THREAD: usize = 200;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    // Large enough that a torn or interleaved write would show.
                    let text = format!("{t}:{i}:{}", "x".repeat(8192 + t * 100));
                    log.append(&msg(&text)).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let path = log.path().to_path_buf();
    drop(log);

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + THREADS * PER_THREAD);
    for line in &lines[1..] {
        let event: Event = serde_json::from_str(line).unwrap();
        let Event::UserMessage { text, .. } = event else {
            panic!("unexpected event {line}");
        };
        let mut parts = text.splitn(3, ':');
        let t: usize = parts.next().unwrap().parse().unwrap();
        let _i: usize = parts.next().unwrap().parse().unwrap();
        assert_eq!(parts.next().unwrap().len(), 8192 + t * 100);
    }
    let (_, _, events) = SessionLog::open(dir.path(), "s1").unwrap();
    assert_eq!(events.len(), THREADS * PER_THREAD);
    // Each thread's own events stay in the order it appended them.
    for t in 0..THREADS {
        let order: Vec<usize> = events
            .iter()
            .filter_map(|e| match e {
                Event::UserMessage { text, .. } => {
                    let mut p = text.splitn(3, ':');
                    let tt: usize = p.next()?.parse().ok()?;
                    (tt == t).then(|| p.next()?.parse().ok())?
                }
                _ => None,
            })
            .collect();
        assert_eq!(order, (0..PER_THREAD).collect::<Vec<_>>());
    }
}

#[test]
fn log_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SessionLog>();
}
