//! A SOCKS5 client connection: greeting, request, the gate, the reply, the
//! tunnel. The bytes are read here and parsed by the pure functions of
//! `socks.rs`.

use super::conn::{ClientStream, Conn, hung_up, tunnel};
use super::socks::{self, Greeting, NO_ACCEPTABLE_METHOD, Parsed, Reply, SocksError};
use super::{ConnectRequest, Destination, Scheme};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// Why the handshake stopped before a request was read.
enum Stop {
    /// The client closed, failed or was too slow: nothing more to say to it.
    Gone,
    /// The client sent something the proxy does not serve: say which.
    Refuse(SocksError),
}

/// Bytes read but not yet parsed, and the deadline for the whole handshake.
/// What a client sends after its request (a TLS hello, sent without waiting
/// for the reply) stays here and goes out first.
struct Handshake {
    buf: Vec<u8>,
    deadline: Instant,
}

pub(super) async fn serve<S: ClientStream>(mut stream: S, conn: Arc<Conn>) {
    let mut handshake = Handshake {
        buf: Vec::with_capacity(512),
        deadline: Instant::now() + conn.shared.options.head_timeout,
    };
    let destination = match negotiate(&mut stream, &mut handshake).await {
        Ok(destination) => destination,
        Err(Stop::Gone) => return,
        Err(Stop::Refuse(error)) => {
            tracing::debug!(%error, "network proxy: SOCKS request refused");
            let _ = stream.write_all(&error.reply().encode()).await;
            return;
        }
    };
    let request = ConnectRequest {
        destination,
        scheme: Scheme::Socks,
    };
    // The gate may ask a person; if the client gives up meanwhile, so does the
    // question.
    let opened = tokio::select! {
        opened = conn.shared.open(&request) => opened,
        () = hung_up(&stream) => return,
    };
    let mut upstream = match opened {
        Ok(upstream) => upstream,
        Err(refused) => {
            let _ = stream.write_all(&refused.socks_reply().encode()).await;
            return;
        }
    };
    if stream.write_all(&Reply::Succeeded.encode()).await.is_err()
        || upstream.write_all(&handshake.buf).await.is_err()
    {
        return;
    }
    tunnel(stream, upstream).await;
}

/// The greeting (answered "no authentication", or "no acceptable method"),
/// then the request.
async fn negotiate<S: ClientStream>(
    stream: &mut S,
    handshake: &mut Handshake,
) -> Result<Destination, Stop> {
    let greeting: Greeting = read_message(stream, handshake, socks::parse_greeting).await?;
    if !greeting.offers_no_auth {
        let _ = stream
            .write_all(&[socks::VERSION, NO_ACCEPTABLE_METHOD])
            .await;
        return Err(Stop::Gone);
    }
    let accepted = [socks::VERSION, 0x00];
    stream.write_all(&accepted).await.map_err(|_| Stop::Gone)?;
    read_message(stream, handshake, socks::parse_request).await
}

/// Read until `parse` has a whole message, and take its bytes off the buffer.
/// The buffer stays small: every message is bounded (at most 262 bytes), and
/// a parser says complete or wrong as soon as it can.
async fn read_message<T, S: ClientStream>(
    stream: &mut S,
    handshake: &mut Handshake,
    parse: fn(&[u8]) -> Result<Parsed<T>, SocksError>,
) -> Result<T, Stop> {
    let mut chunk = [0u8; 512];
    loop {
        match parse(&handshake.buf).map_err(Stop::Refuse)? {
            Parsed::Complete { value, consumed } => {
                handshake.buf.drain(..consumed);
                return Ok(value);
            }
            Parsed::Incomplete => {}
        }
        let read = tokio::time::timeout_at(handshake.deadline, stream.read(&mut chunk)).await;
        match read {
            Ok(Ok(n)) if n > 0 => handshake.buf.extend_from_slice(&chunk[..n]),
            _ => return Err(Stop::Gone),
        }
    }
}
