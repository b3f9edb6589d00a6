//! The sandbox's way out (E10, issue 28): a proxy the daemon runs per sandboxed
//! command on a Unix socket, through which every connection the command makes
//! leaves, once it was admitted.
//!
//! This is only the part that carries bytes. Whether a host may be reached is
//! asked of a [`ConnectionGate`], a trait defined here and implemented by the
//! layer that judges (the `network` tool through the waterfall), so the
//! executor still imports nothing from hooks, tools or policy.
//!
//! One listener speaks three protocols, told apart by the first byte (0x05 is
//! SOCKS5, anything else HTTP/1.1):
//! - HTTP `CONNECT host:port`: judged, then `200` and a raw tunnel (TLS passes
//!   untouched);
//! - plain HTTP (`GET http://host/path`): each request judged by its own host
//!   and forwarded in origin form, hop-by-hop headers removed;
//! - SOCKS5 CONNECT, without authentication, to a name, an IPv4 or an IPv6
//!   address.
//!
//! Names resolve only here, after the gate allowed them: nothing inside the
//! sandbox resolves, so DNS cannot carry data out. The proxy keeps no
//! decisions; the judge caches what it wants to.

mod address;
mod conn;
mod http;
pub mod local;
mod outbound;
mod server;
pub mod socks;
mod socks_conn;
#[cfg(test)]
mod tests;

pub use address::{AddressError, Destination, Host, HostName};
pub use conn::ProxyOptions;
pub use outbound::{Resolver, SystemResolver};
pub use server::{OpenConnections, ProxyListener, ProxyServer};

use std::fmt;

/// How a connection reached the proxy, which the judge may weigh (a plain-HTTP
/// request is readable on the way, a tunnel is not) and the person is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// An HTTP `CONNECT` tunnel (in practice TLS, hence the name the `network`
    /// tool's arguments use).
    Https,
    /// A plain HTTP request forwarded by the proxy.
    Http,
    /// A SOCKS5 CONNECT.
    Socks,
}

impl Scheme {
    /// The word for it in the `network` tool's arguments.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Https => "https",
            Scheme::Http => "http",
            Scheme::Socks => "socks",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One connection a sandboxed command asks for: what the gate judges.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConnectRequest {
    pub destination: Destination,
    pub scheme: Scheme,
}

/// The gate's answer. A denial's reason goes back to the client (the body of
/// the 403), so the command's output can say why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Allow,
    Deny { reason: String },
}

/// Whether a connection may be made: asked once for every CONNECT, SOCKS
/// request and forwarded HTTP request, before any name is resolved.
///
/// Defined here and implemented above (the `network` tool through the
/// waterfall), so the proxy stays below hooks and tools. One gate serves one
/// command: it carries that command's context (session, task, command line),
/// which is why `admit` takes only the request. It may take long (a person may
/// be asked); the client waits. The future is dropped unanswered when the
/// client goes away or the proxy stops, so an implementation must not rely on
/// running to the end (withdraw the question on drop).
#[async_trait::async_trait]
pub trait ConnectionGate: Send + Sync {
    async fn admit(&self, request: &ConnectRequest) -> Admission;
}

/// Where a command's connections come from, for the judge: the session that ran it,
/// its command line and the call or task that started it (what the person is told,
/// and what the `network` call's arguments name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandOrigin {
    /// The session (the executor's scope).
    pub session: Option<String>,
    pub command: String,
    /// The tool call that ran it in the foreground.
    pub call_id: Option<String>,
    /// The task it runs as, in the background.
    pub task_id: Option<crate::exec::TaskId>,
}

/// Makes the gate of each command whose network goes through the proxy. Set on the
/// executor once the side that judges exists (the tool registry is built over the
/// executor, so it cannot be given at construction).
pub trait ConnectionJudge: Send + Sync {
    fn gate_for(&self, origin: CommandOrigin) -> std::sync::Arc<dyn ConnectionGate>;
}

/// The gate when nobody judges (an executor used without a daemon): every
/// connection is refused, saying why. Closed, never open.
pub struct NoJudge;

#[async_trait::async_trait]
impl ConnectionGate for NoJudge {
    async fn admit(&self, _request: &ConnectRequest) -> Admission {
        Admission::Deny {
            reason: "no judge of network access is set up for this executor".into(),
        }
    }
}
