//! The host side of a proxied connection: the gate asked, the name resolved,
//! the TCP connection made.

use super::address::{Destination, Host, HostName};
use super::socks::Reply;
use super::{Admission, ConnectRequest, ConnectionGate};
use hyper::StatusCode;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;

/// Turns an allowed name into addresses. The system's resolver in the daemon;
/// a table in tests, so they reach names without depending on /etc/hosts.
#[async_trait::async_trait]
pub trait Resolver: Send + Sync {
    async fn resolve(&self, name: &HostName, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// getaddrinfo, through tokio (on its blocking pool).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait::async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, name: &HostName, port: u16) -> io::Result<Vec<SocketAddr>> {
        // Fully qualified (a trailing dot): the resolver's search list must not turn
        // the judged `build.internal` into `build.internal.corp.example`.
        // (`localhost` is the hosts file's, which is read as written.)
        let absolute = match name.as_str() {
            "localhost" => "localhost".to_string(),
            other => format!("{other}."),
        };
        Ok(tokio::net::lookup_host((absolute.as_str(), port))
            .await?
            .collect())
    }
}

/// Why a connection was not made; the HTTP side and the SOCKS side each say it
/// in their own terms.
#[derive(Debug)]
pub(super) enum Refused {
    /// The gate said no, with its reason.
    Denied(String),
    /// The name did not resolve, or resolved to nothing.
    Unresolved(String),
    Failed(io::Error),
    TimedOut,
}

impl Refused {
    pub(super) fn socks_reply(&self) -> Reply {
        match self {
            Refused::Denied(_) => Reply::NotAllowed,
            Refused::Unresolved(_) | Refused::TimedOut => Reply::HostUnreachable,
            Refused::Failed(e) => match e.kind() {
                io::ErrorKind::ConnectionRefused => Reply::ConnectionRefused,
                io::ErrorKind::HostUnreachable => Reply::HostUnreachable,
                io::ErrorKind::NetworkUnreachable => Reply::NetworkUnreachable,
                _ => Reply::GeneralFailure,
            },
        }
    }

    pub(super) fn http_status(&self) -> StatusCode {
        match self {
            Refused::Denied(_) => StatusCode::FORBIDDEN,
            Refused::TimedOut => StatusCode::GATEWAY_TIMEOUT,
            Refused::Unresolved(_) | Refused::Failed(_) => StatusCode::BAD_GATEWAY,
        }
    }

    /// The text a client reads: the gate's reason as given, else what failed.
    pub(super) fn message(&self, destination: &Destination) -> String {
        match self {
            Refused::Denied(reason) => reason.clone(),
            Refused::Unresolved(why) => format!("{}: cannot resolve: {why}", destination.host),
            Refused::Failed(e) => format!("{destination}: {e}"),
            Refused::TimedOut => format!("{destination}: connect timed out"),
        }
    }
}

/// Ask the gate, and only if it allows, resolve and connect. A name whose answer
/// holds only non-public addresses is judged again by the address it would reach
/// ([`judged_by_address`]). The connect timeout covers resolving, and again every
/// address tried; never the second question, which a person may be answering.
pub(super) async fn open(
    gate: &dyn ConnectionGate,
    request: &ConnectRequest,
    resolver: &dyn Resolver,
    limit: Duration,
) -> Result<TcpStream, Refused> {
    if let Admission::Deny { reason } = gate.admit(request).await {
        return Err(Refused::Denied(reason));
    }
    let destination = &request.destination;
    let addresses = match &destination.host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, destination.port)],
        Host::Name(name) => {
            let found = tokio::time::timeout(limit, resolver.resolve(name, destination.port))
                .await
                .map_err(|_| Refused::TimedOut)?
                .map_err(|e| Refused::Unresolved(e.to_string()))?;
            let outward = this_machine_only_by_its_name(name, found)?;
            judged_by_address(gate, request, name, outward).await?
        }
    };
    tokio::time::timeout(limit, connect_any(&addresses))
        .await
        .unwrap_or(Err(Refused::TimedOut))
}

/// The addresses of a name's answer the connection may use (E10, issue 40). What
/// was judged is the name; a non-public address (a private range, shared address
/// space, unique-local IPv6: [`super::local::is_non_public`]) is local in E10's
/// sense, which a default never lets through. So a public answer is used without
/// its non-public addresses (they were not judged), and an answer with only
/// non-public ones is asked of the gate again for the first of them, as the
/// address itself (a rule naming it allows it; else the person is asked, like for
/// `localhost`), and only that address is used. Names that say they are this
/// machine (`localhost`, `*.localhost`) were judged as such already.
async fn judged_by_address(
    gate: &dyn ConnectionGate,
    request: &ConnectRequest,
    name: &HostName,
    outward: Vec<SocketAddr>,
) -> Result<Vec<SocketAddr>, Refused> {
    if says_this_machine(name) {
        return Ok(outward);
    }
    let (private, public): (Vec<SocketAddr>, Vec<SocketAddr>) = outward
        .into_iter()
        .partition(|a| super::local::is_non_public(a.ip().to_canonical()));
    let Some(first) = private.first().filter(|_| public.is_empty()) else {
        return Ok(public);
    };
    let by_address = ConnectRequest {
        destination: super::Destination {
            host: Host::Ip(first.ip().to_canonical()),
            port: first.port(),
        },
        scheme: request.scheme,
    };
    match gate.admit(&by_address).await {
        Admission::Allow => Ok(vec![*first]),
        Admission::Deny { reason } => Err(Refused::Denied(format!(
            "{} resolves to {}, a non-public address, which was judged as itself: {reason}",
            name.as_str(),
            first.ip()
        ))),
    }
}

/// Whether a name says it is this machine (`localhost`, `*.localhost`).
fn says_this_machine(name: &HostName) -> bool {
    name.as_str() == "localhost" || name.as_str().ends_with(".localhost")
}

/// The addresses a name may lead to. What was judged is the name, so a name whose
/// DNS answer points at this machine (loopback, the unspecified address, which
/// reaches it too, any address of its own interfaces, in any spelling:
/// `::ffff:127.0.0.1` is 127.0.0.1), at a link-local address (the cloud's metadata
/// service at 169.254.169.254), a multicast or a broadcast one would let an allowed
/// public host lead to services the person never named: only a name that says so
/// (`localhost`, `*.localhost`) may reach this machine, and the rest only by their
/// address (judged as itself, E10: never let through by a default). Private ranges
/// stay reachable by name (a company's hosts live there), once judged by their
/// address too ([`judged_by_address`]).
fn this_machine_only_by_its_name(
    name: &HostName,
    found: Vec<SocketAddr>,
) -> Result<Vec<SocketAddr>, Refused> {
    if says_this_machine(name) {
        return Ok(found);
    }
    let outward: Vec<SocketAddr> = found
        .iter()
        .copied()
        .filter(|a| !hidden_behind_a_name(a.ip()))
        .collect();
    if outward.is_empty() && !found.is_empty() {
        return Err(Refused::Unresolved(
            "it resolves to this machine or a link-local, multicast or broadcast address; \
             ask for the address itself (or localhost) if that is what is meant"
                .into(),
        ));
    }
    Ok(outward)
}

/// Whether `ip` is one a name must not lead to (see [`this_machine_only_by_its_name`]).
pub(super) fn hidden_behind_a_name(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    let ip = ip.to_canonical();
    let hidden_class = match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_unspecified()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.octets()[0] == 0
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    };
    hidden_class || super::local::is_this_machine(ip)
}

/// Each address in the resolver's order; the last failure is the one told.
async fn connect_any(addresses: &[SocketAddr]) -> Result<TcpStream, Refused> {
    let mut last = Refused::Unresolved("no address".into());
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                // The tunnel carries whatever the client writes when it writes
                // it (TLS handshakes, interactive protocols): no Nagle delay.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = Refused::Failed(e),
        }
    }
    Err(last)
}
