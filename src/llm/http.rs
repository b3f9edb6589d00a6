//! The model adapter's HTTP client: hyper's pooled HTTP/1.1 client (rustls for
//! `https`) over a connector whose sockets re-arm `TCP_QUICKACK` before every read.
//!
//! Why not reqwest, which this adapter used before: a kept-alive connection that
//! exchanges request and answer turns "ping-pong" in Linux's eyes (the client
//! sends within the delayed-ACK timeout of its last receipt), and from then on the
//! kernel delays the ACK of what arrives. A server that leaves Nagle on and writes
//! an answer's head and body apart (Python's `http.server`, some local model
//! servers) cannot send the body until the head is acknowledged, so every request
//! waited for the client's delayed-ACK timer: about 40 ms each, 45 ms measured
//! (BENCHMARKS.md, B7). Setting `TCP_QUICKACK` leaves ping-pong mode and sends any
//! ACK that is pending; the kernel re-enters the mode at the next request, so it
//! is set again before each read. reqwest offers no way to reach its sockets
//! (its connector layers see a sealed connection type), so the adapter builds the
//! same stack from the crates reqwest is made of: hyper-util's pooled client and
//! connector, hyper-rustls with the webpki roots and ring, as reqwest's
//! `rustls-tls` feature did.
//!
//! Proxies are honoured as reqwest honoured them, from `HTTPS_PROXY`, `HTTP_PROXY`,
//! `ALL_PROXY` and `NO_PROXY`: an `https` endpoint through a `CONNECT` tunnel, a
//! plain `http` one by sending the request to the proxy in absolute form.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Uri;
use hyper::header::HeaderValue;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;

/// The pooled client requests go through.
pub type Client =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<Connector>, Full<Bytes>>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A client for requests to `base`, with the proxy the environment names for it
/// (`env` reads a variable). Also returns the `Proxy-Authorization` value to send
/// with each request when a plain `http` endpoint goes through a proxy.
pub fn client(
    base: &Uri,
    connect_timeout: Duration,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(Client, Option<HeaderValue>), String> {
    let (connector, request_auth) = connector(base, connect_timeout, env);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(provider)
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector);
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https);
    Ok((client, request_auth))
}

/// The TCP side of [`client`]: the route to `base` and the request's proxy auth.
fn connector(
    base: &Uri,
    connect_timeout: Duration,
    env: impl Fn(&str) -> Option<String>,
) -> (Connector, Option<HeaderValue>) {
    let mut tcp = HttpConnector::new();
    // `https` is the TLS layer's business; this one only makes TCP connections.
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(connect_timeout));
    let mut connector = Connector {
        tcp: tcp.clone(),
        route: Route::Direct,
    };
    let mut request_auth = None;
    if let Some(proxy) = proxy_matcher(&env).intercept(base) {
        let auth = proxy.basic_auth().cloned();
        if base.scheme_str() == Some("https") {
            let mut tunnel = Tunnel::new(proxy.uri().clone(), tcp);
            if let Some(auth) = auth {
                tunnel = tunnel.with_auth(auth);
            }
            connector.route = Route::Tunnel(tunnel);
        } else {
            connector.route = Route::Forward(proxy.uri().clone());
            request_auth = auth;
        }
    }
    (connector, request_auth)
}

/// The proxy rules of the environment, read through `env` (as curl reads them).
fn proxy_matcher(
    env: &impl Fn(&str) -> Option<String>,
) -> hyper_util::client::proxy::matcher::Matcher {
    let var = |upper: &str| {
        env(upper)
            .or_else(|| env(&upper.to_ascii_lowercase()))
            .unwrap_or_default()
    };
    hyper_util::client::proxy::matcher::Matcher::builder()
        .all(var("ALL_PROXY"))
        .https(var("HTTPS_PROXY"))
        .http(var("HTTP_PROXY"))
        .no(var("NO_PROXY"))
        .build()
}

/// How a connection reaches the endpoint.
#[derive(Clone)]
enum Route {
    Direct,
    /// Through an HTTP proxy's `CONNECT` (for `https`).
    Tunnel(Tunnel<HttpConnector>),
    /// To an HTTP proxy that forwards absolute-form requests (for plain `http`).
    Forward(Uri),
}

/// Makes TCP connections (directly or through a proxy) whose reads re-arm
/// `TCP_QUICKACK`.
#[derive(Clone)]
pub struct Connector {
    tcp: HttpConnector,
    route: Route,
}

impl tower_service::Service<Uri> for Connector {
    type Response = QuickAck;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<QuickAck, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match &mut self.route {
            Route::Tunnel(tunnel) => tunnel.poll_ready(cx).map_err(Into::into),
            Route::Direct | Route::Forward(_) => self.tcp.poll_ready(cx).map_err(Into::into),
        }
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        match &mut self.route {
            Route::Direct => {
                let connecting = self.tcp.call(dst);
                Box::pin(async move { Ok(QuickAck::new(connecting.await?, false)) })
            }
            Route::Tunnel(tunnel) => {
                let connecting = tunnel.call(dst);
                Box::pin(async move { Ok(QuickAck::new(connecting.await?, false)) })
            }
            Route::Forward(proxy) => {
                let connecting = self.tcp.call(proxy.clone());
                Box::pin(async move { Ok(QuickAck::new(connecting.await?, true)) })
            }
        }
    }
}

/// A TCP connection that asks for an immediate ACK before every read (see the
/// module's documentation for why).
pub struct QuickAck {
    io: TokioIo<TcpStream>,
    /// Connected to a forwarding proxy: hyper then writes absolute-form requests.
    forwarding: bool,
}

impl QuickAck {
    fn new(io: TokioIo<TcpStream>, forwarding: bool) -> Self {
        Self { io, forwarding }
    }
}

impl Connection for QuickAck {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.forwarding)
    }
}

impl hyper::rt::Read for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        // One setsockopt, under a microsecond: leaves ping-pong mode, and sends
        // at once an ACK the kernel was holding back. A failure costs only the
        // wait this avoids, so it is not an error of the read.
        let _ = socket2::SockRef::from(self.io.inner()).set_tcp_quickack(true);
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// An error and its causes, joined: hyper's own words ("client error
/// (Connect)") say little without what caused them.
pub fn error_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(base: &str, vars: &[(&str, &str)]) -> (Route, Option<HeaderValue>) {
        let env = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        let (c, auth) = connector(&base.parse().unwrap(), Duration::from_secs(1), env);
        (c.route, auth)
    }

    #[test]
    fn proxies_come_from_the_environment_as_curl_reads_them() {
        let proxy = [("HTTPS_PROXY", "http://u:p@proxy:3128")];
        assert!(matches!(
            route("https://api.example.com/v1", &[]).0,
            Route::Direct
        ));
        assert!(matches!(
            route("https://api.example.com/v1", &proxy).0,
            Route::Tunnel(_)
        ));
        // The tunnel carries the credentials; no request header leaks them.
        assert!(route("https://api.example.com/v1", &proxy).1.is_none());
        let no = [
            ("https_proxy", "http://proxy:3128"),
            ("NO_PROXY", "example.com"),
        ];
        assert!(matches!(
            route("https://api.example.com/v1", &no).0,
            Route::Direct
        ));
        let plain = [("http_proxy", "http://u:p@proxy:3128")];
        let (r, auth) = route("http://10.0.0.5:8000/v1", &plain);
        assert!(matches!(r, Route::Forward(u) if u.host() == Some("proxy")));
        assert!(auth.is_some_and(|a| a.as_bytes().starts_with(b"Basic ")));
    }

    #[tokio::test]
    async fn a_refused_connection_says_why() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let uri: Uri = format!("http://127.0.0.1:{port}/v1/chat/completions")
            .parse()
            .unwrap();
        let (client, _) = client(&uri, Duration::from_secs(5), |_| None).unwrap();
        let request = hyper::Request::post(uri)
            .body(Full::new(Bytes::new()))
            .unwrap();
        let error = client.request(request).await.unwrap_err();
        assert!(error.is_connect());
        let text = error_text(&error);
        assert!(text.contains("refused"), "{text}");
    }

    /// The `https` path end to end without the network: openssl serves TLS on
    /// loopback with a self-signed certificate, and the client must get as far as
    /// the handshake and refuse that certificate (it trusts the webpki roots only).
    #[tokio::test]
    async fn https_speaks_tls_and_checks_the_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let made = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ])
            .args(["-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl is needed for this test");
        assert!(made.success());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = tokio::process::Command::new("openssl")
            .args(["s_server", "-quiet", "-www", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-cert")
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // Ready once it accepts; bounded, it only guards a server that never starts.
        for _ in 0..500 {
            if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let uri: Uri = format!("https://localhost:{port}/v1/chat/completions")
            .parse()
            .unwrap();
        let (client, _) = client(&uri, Duration::from_secs(5), |_| None).unwrap();
        let request = hyper::Request::post(uri)
            .body(Full::new(Bytes::new()))
            .unwrap();
        let error = client.request(request).await.unwrap_err();
        server.kill().await.unwrap();
        let text = error_text(&error);
        assert!(text.contains("certificate"), "{text}");
    }
}
