//! Live output of a running tool call: what the executor reads is kept, bounded, and
//! shown to the client as it comes, throttled so a command that prints a lot does not
//! flood the connection.

use super::{TurnContext, TurnEvent};
use crate::exec::{Collector, OutputStream};
use crate::hooks::waterfall::{CallWatcher, ToolOutput};
use crate::tools::CallView;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;
use tokio::time::{Duration, Instant};

/// The most of a running command's output a client is shown: its last 64 KB.
pub const SHOWN_BYTES: usize = 64 * 1024;
/// Output is shown at most this often...
const EVERY: Duration = Duration::from_millis(100);
/// ...unless this much more arrived since it was last shown...
const ENOUGH_BYTES: u64 = 8 * 1024;
/// ...and even then not more often than this: an update carries up to 64 KB, and a
/// command printing fast must not flood (and so lose) a slow editor.
const AT_MOST: Duration = Duration::from_millis(40);

/// What the turn knows of one running call, filled by the tool's own task.
pub struct LiveCall {
    running: AtomicBool,
    /// Arguments a hook rewrote the call to, until shown.
    rewritten: std::sync::Mutex<Option<serde_json::Value>>,
    /// stdout and stderr in the order they arrived, as a terminal shows them; the
    /// tail is kept and the part not yet shown is read as it grows.
    output: Collector,
    changed: Notify,
}

impl LiveCall {
    pub fn new() -> Self {
        Self {
            running: AtomicBool::new(false),
            rewritten: std::sync::Mutex::new(None),
            output: Collector::new(SHOWN_BYTES, None),
            changed: Notify::new(),
        }
    }
}

impl Default for LiveCall {
    fn default() -> Self {
        Self::new()
    }
}

impl CallWatcher for LiveCall {
    fn running(&self) {
        self.running.store(true, Ordering::Release);
        self.changed.notify_one();
    }

    fn output(&self, _stream: OutputStream, bytes: &[u8]) {
        self.output.push(bytes);
        self.changed.notify_one();
    }

    fn rewritten(&self, arguments: &serde_json::Value) {
        *self.rewritten.lock().unwrap_or_else(|p| p.into_inner()) = Some(arguments.clone());
        self.changed.notify_one();
    }
}

/// Runs `call` (the call's way through the waterfall) while telling the client when it
/// starts running and showing its output as it comes, and returns its result. What is
/// still unshown when the call ends goes out before this returns; nothing after: the
/// result is the caller's to send.
pub async fn watch(
    ctx: &TurnContext<'_>,
    call_id: &str,
    tool: &str,
    view: &CallView,
    live: &LiveCall,
    call: impl Future<Output = ToolOutput>,
) -> ToolOutput {
    tokio::pin!(call);
    let mut shown = Shown::default();
    let mut view = view.clone();
    let out = loop {
        let deadline = shown.due();
        tokio::select! {
            biased;
            out = &mut call => break out,
            () = live.changed.notified() => {}
            () = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {}
        }
        view = shown.rewrite(ctx, call_id, tool, view, live);
        shown.update(ctx, call_id, &view, live, false);
    };
    view = shown.rewrite(ctx, call_id, tool, view, live);
    shown.update(ctx, call_id, &view, live, true);
    out
}

/// What was shown of a call so far.
#[derive(Default)]
struct Shown {
    running: bool,
    /// Output bytes received when it was last shown.
    bytes: u64,
    at: Option<Instant>,
    /// Output waits to be shown when the throttle allows.
    waiting: bool,
}

impl Shown {
    /// Shows a hook's rewrite of the call, once, and returns the view of what runs.
    fn rewrite(
        &mut self,
        ctx: &TurnContext<'_>,
        call_id: &str,
        tool: &str,
        view: CallView,
        live: &LiveCall,
    ) -> CallView {
        let taken = live
            .rewritten
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(arguments) = taken else {
            return view;
        };
        let view = CallView::of(tool, &arguments, Some(&ctx.session.cwd));
        (ctx.events)(TurnEvent::ToolRewritten {
            call_id,
            view: &view,
            arguments: &arguments,
        });
        view
    }

    /// When waiting output is due (at the latest).
    fn due(&self) -> Option<Instant> {
        match (self.waiting, self.at) {
            (true, Some(at)) => Some(at + EVERY),
            _ => None,
        }
    }

    fn update(
        &mut self,
        ctx: &TurnContext<'_>,
        call_id: &str,
        view: &CallView,
        live: &LiveCall,
        last: bool,
    ) {
        if !self.running && live.running.load(Ordering::Acquire) {
            self.running = true;
            (ctx.events)(TurnEvent::ToolRunning { call_id, view });
        }
        let total = live.output.total_bytes();
        if total == self.bytes {
            self.waiting = false;
            return;
        }
        let now = Instant::now();
        let since = self.at.map(|at| now - at);
        let due = match since {
            None => true,
            Some(since) => {
                since >= EVERY || (since >= AT_MOST && total - self.bytes >= ENOUGH_BYTES)
            }
        };
        if !last && !due {
            self.waiting = true;
            return;
        }
        let new = live.output.read_new();
        let all = live.output.collected();
        (ctx.events)(TurnEvent::ToolOutput {
            call_id,
            view,
            shown: &all.text,
            new: &new.text,
        });
        self.bytes = total;
        self.at = Some(now);
        self.waiting = false;
    }
}
