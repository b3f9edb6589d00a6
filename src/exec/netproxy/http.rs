//! The HTTP/1.1 side, on hyper: `CONNECT` tunnels (through hyper's upgrades)
//! and plain requests forwarded one by one.
//!
//! hyper bounds the head (431 past [`ProxyOptions::max_head_bytes`]), times out
//! a slow one and answers a malformed one with 400 itself; what is left here is
//! reading the destination, asking the gate and carrying the exchange.
//!
//! [`ProxyOptions::max_head_bytes`]: super::ProxyOptions::max_head_bytes

use super::conn::{ClientStream, Conn, tunnel};
use super::outbound::Refused;
use super::{AddressError, ConnectRequest, Destination, Scheme};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri, Version};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;

type Body = BoxBody<Bytes, hyper::Error>;

/// hyper will not buffer less than this much of a head.
const HYPER_MIN_BUF: usize = 8 * 1024;

/// Serve one client connection until it closes (or is upgraded to a tunnel,
/// which then runs as a task of its own).
pub(super) async fn serve<S: ClientStream>(stream: S, conn: Arc<Conn>) {
    let options = &conn.shared.options;
    let max_head = options.max_head_bytes.max(HYPER_MIN_BUF);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.head_timeout)
        .max_buf_size(max_head)
        .max_header_size(max_head);
    let service_conn = conn.clone();
    let service = hyper::service::service_fn(move |request| {
        let conn = service_conn.clone();
        async move { Ok::<_, Infallible>(handle(request, conn).await) }
    });
    let served = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
    if let Err(e) = served {
        tracing::debug!(error = %e, "network proxy: HTTP connection ended");
    }
}

/// Why a request gets an error response instead of being carried.
enum Failure {
    BadRequest(String),
    Refused(Destination, Refused),
    Origin(hyper::Error),
}

impl Failure {
    fn response(self) -> Response<Body> {
        match self {
            Failure::BadRequest(why) => {
                // What else the client sends on this connection cannot be
                // trusted to be framed as it thinks: end it here.
                let mut response = text(StatusCode::BAD_REQUEST, why);
                let close = HeaderValue::from_static("close");
                response.headers_mut().insert(header::CONNECTION, close);
                response
            }
            Failure::Refused(destination, refused) => {
                text(refused.http_status(), refused.message(&destination))
            }
            Failure::Origin(e) => text(StatusCode::BAD_GATEWAY, format!("origin: {e}")),
        }
    }
}

fn bad_address(what: &str, e: AddressError) -> Failure {
    Failure::BadRequest(format!("{what}: {e}"))
}

async fn handle(request: Request<Incoming>, conn: Arc<Conn>) -> Response<Body> {
    let handled = if request.method() == Method::CONNECT {
        connect(request, conn).await
    } else {
        forward(request, conn).await
    };
    handled.unwrap_or_else(Failure::response)
}

/// `CONNECT host:port`: judged, connected, then `200` and the tunnel, which
/// starts once hyper hands over the connection.
async fn connect(request: Request<Incoming>, conn: Arc<Conn>) -> Result<Response<Body>, Failure> {
    let authority = request
        .uri()
        .authority()
        .ok_or_else(|| Failure::BadRequest("CONNECT needs host:port".into()))?;
    let destination = Destination::parse_authority(authority.as_str(), None)
        .map_err(|e| bad_address("CONNECT target", e))?;
    let upstream = open(&conn, destination, Scheme::Https).await?;
    let tunnel_conn = conn.clone();
    conn.shared.spawn(async move {
        match hyper::upgrade::on(request).await {
            Ok(upgraded) => tunnel(TokioIo::new(upgraded), upstream).await,
            Err(e) => tracing::debug!(error = %e, "network proxy: CONNECT not upgraded"),
        }
        drop(tunnel_conn);
    });
    Ok(Response::new(empty()))
}

/// A plain request: judged by its own host, sent to the origin on a connection
/// of its own in origin form, the answer streamed back. Each request opens its
/// own origin connection, so a kept-alive client connection can go to a
/// different host with every request and each is judged.
async fn forward(request: Request<Incoming>, conn: Arc<Conn>) -> Result<Response<Body>, Failure> {
    let destination = forward_destination(&request)?;
    // Everything that can be wrong with the request is found before anyone is
    // asked about it.
    let request = to_origin_form(request, &destination)?;
    let upstream = open(&conn, destination, Scheme::Http).await?;
    let (mut sender, origin) = hyper::client::conn::http1::handshake(TokioIo::new(upstream))
        .await
        .map_err(Failure::Origin)?;
    conn.shared.spawn(async move {
        if let Err(e) = origin.await {
            tracing::debug!(error = %e, "network proxy: origin connection ended");
        }
    });
    let mut response = sender
        .send_request(request)
        .await
        .map_err(Failure::Origin)?;
    strip_hop_by_hop(response.headers_mut());
    Ok(response.map(BodyExt::boxed))
}

async fn open(
    conn: &Conn,
    destination: Destination,
    scheme: Scheme,
) -> Result<tokio::net::TcpStream, Failure> {
    let request = ConnectRequest {
        destination,
        scheme,
    };
    conn.shared
        .open(&request)
        .await
        .map_err(|refused| Failure::Refused(request.destination, refused))
}

/// The host a plain request goes to: the absolute-form target's (port 80 by
/// default), or the Host header's when the target is a bare path. Only `http`
/// is forwarded: anything else must come as a CONNECT tunnel.
fn forward_destination(request: &Request<Incoming>) -> Result<Destination, Failure> {
    let uri = request.uri();
    match (uri.scheme_str(), uri.authority()) {
        (Some("http"), Some(authority)) => {
            Destination::parse_authority(authority.as_str(), Some(80))
                .map_err(|e| bad_address("request target", e))
        }
        (Some(scheme), _) => Err(Failure::BadRequest(format!(
            "scheme {scheme:?} is not forwarded (use CONNECT)"
        ))),
        (None, _) => {
            let host = request
                .headers()
                .get(header::HOST)
                .and_then(|value| value.to_str().ok())
                .ok_or_else(|| Failure::BadRequest("no host in the request".into()))?;
            Destination::parse_authority(host, Some(80)).map_err(|e| bad_address("Host", e))
        }
    }
}

/// What the origin is sent: the path and query only, the judged host as Host
/// (RFC 9112 §3.2.2: a proxy replaces Host with the target's, so the origin
/// serves the host that was judged), no hop-by-hop headers.
fn to_origin_form(
    request: Request<Incoming>,
    destination: &Destination,
) -> Result<Request<Incoming>, Failure> {
    let (mut parts, body) = request.into_parts();
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let target = if target.starts_with('/') {
        target.to_string()
    } else {
        format!("/{target}")
    };
    parts.uri = target
        .parse::<Uri>()
        .map_err(|e| Failure::BadRequest(format!("request target: {e}")))?;
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    let host = HeaderValue::from_str(&destination.host_header())
        .map_err(|e| Failure::BadRequest(format!("Host: {e}")))?;
    parts.headers.insert(header::HOST, host);
    Ok(Request::from_parts(parts, body))
}

/// Headers that describe one hop, not the message (RFC 9110 §7.6.1), and the
/// ones the client's `Connection` header names. hyper frames each hop's body
/// itself, so Transfer-Encoding goes too.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    const HOP_BY_HOP: [&str; 9] = [
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ];
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

fn text(status: StatusCode, message: String) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(message + "\n"))
            .map_err(never)
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn empty() -> Body {
    Empty::new().map_err(never).boxed()
}

fn never(never: Infallible) -> hyper::Error {
    match never {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_go() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, X-Trace"),
            ("x-trace", "1"),
            ("proxy-connection", "keep-alive"),
            ("proxy-authorization", "Basic eA=="),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("te", "trailers"),
            ("upgrade", "websocket"),
            ("accept", "*/*"),
            ("user-agent", "curl"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_hop_by_hop(&mut headers);
        let mut left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        left.sort();
        assert_eq!(left, ["accept", "user-agent"]);
    }
}
