//! N1, N2 (issue 28): the sandbox's network proxy against a direct connection.
//!
//! Three parties, each on its own runtime as they are on separate processes in
//! real use: the far host (a loopback TCP server on one thread of its own), the
//! proxy (`dsh::exec::netproxy::ProxyServer` on a TCP listener on 127.0.0.1, on a
//! multi-threaded runtime as in the daemon, with a gate that allows at once, as
//! for a host already allowed) and the client (this bench's runtime), which
//! reaches the far host either directly or through an HTTP `CONNECT` tunnel. The
//! two ways alternate in one loop, so the judged ratio survives a noisy machine.
//!
//! The far host speaks a private protocol: the client sends one byte of kind and
//! eight of length (big-endian), the server answers with that many bytes (kind
//! `B`: then closes; `H`: then holds the connection until the client closes).
//!
//! N2 also states the proxy's memory per open tunnel: the bench's own RSS with
//! tunnels held open, minus the same number of direct connections (which cost
//! the client's and the far host's sockets, which a tunnel has too).

use crate::*;
use dsh::exec::netproxy::{Admission, ConnectRequest, ConnectionGate, Host, ProxyServer};
use serde_json::json;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// Write the length, then close.
const BULK: u8 = b'B';
/// Write the length, then wait for the client to close.
const HOLD: u8 = b'H';
/// The answer whose first byte N2 times: about the size of a small HTTP answer.
const ANSWER_BYTES: u64 = 200;
/// How much each held tunnel carries down in N2's second memory figure: more than
/// the tunnel's buffer, so the buffer of that direction is written all through.
const HELD_BULK: u64 = 256 * 1024;
/// How long the far host waits for a request, and holds a connection at most.
const SERVER_LIMIT: Duration = Duration::from_secs(120);
/// What the far host sends, shared by its connections: a buffer of each would
/// count in N2's memory figure as the far host's, not the proxy's.
static CHUNK: [u8; 256 * 1024] = [0x5a; 256 * 1024];

/// The gate of a host already allowed: answers at once, for loopback only.
struct Allowed;

#[async_trait::async_trait]
impl ConnectionGate for Allowed {
    async fn admit(&self, request: &ConnectRequest) -> Admission {
        match request.destination.host {
            Host::Ip(ip) if ip.is_loopback() => Admission::Allow,
            _ => Admission::Deny {
                reason: "the benchmark reaches only the loopback".into(),
            },
        }
    }
}

// ---------------------------------------------------------------------------
// The far host

/// The loopback server, on a thread and runtime of its own; it stops when dropped.
struct FarHost {
    addr: SocketAddr,
    cancel: CancellationToken,
}

impl FarHost {
    fn start() -> Res<FarHost> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| format!("far host: bind: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("far host: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("far host: runtime: {e}"))?;
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        std::thread::Builder::new()
            .name("bench-far-host".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    loop {
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            accepted = listener.accept() => match accepted {
                                Ok((stream, _)) => {
                                    tokio::spawn(async move {
                                        // Bounded: a connection lives at most this long.
                                        let _ = tokio::time::timeout(SERVER_LIMIT, answer(stream)).await;
                                    });
                                }
                                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                            },
                        }
                    }
                });
                // Returning drops the runtime, and with it every connection.
            })
            .map_err(|e| format!("far host: thread: {e}"))?;
        Ok(FarHost { addr, cancel })
    }
}

impl Drop for FarHost {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

async fn answer(mut stream: TcpStream) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut request = [0u8; 9];
    stream.read_exact(&mut request).await?;
    let mut left = u64::from_be_bytes(request[1..].try_into().unwrap_or_default());
    while left > 0 {
        let n = left.min(CHUNK.len() as u64) as usize;
        stream.write_all(&CHUNK[..n]).await?;
        left -= n as u64;
    }
    match request[0] {
        HOLD => {
            let mut rest = [0u8; 64];
            while stream.read(&mut rest).await? > 0 {}
        }
        _ => stream.shutdown().await?,
    }
    Ok(())
}

fn request(kind: u8, bytes: u64) -> [u8; 9] {
    let mut r = [kind; 9];
    r[1..].copy_from_slice(&bytes.to_be_bytes());
    r
}

// ---------------------------------------------------------------------------
// The proxy

/// `ProxyServer` on 127.0.0.1, on a runtime of its own (the daemon's kind).
struct Proxy {
    addr: SocketAddr,
    server: Option<ProxyServer>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Proxy {
    fn start() -> Res<Proxy> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("bench-proxy")
            .build()
            .map_err(|e| format!("proxy: runtime: {e}"))?;
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| format!("proxy: bind: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("proxy: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let server = {
            let _inside = runtime.enter();
            let listener = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| format!("proxy: listener: {e}"))?;
            ProxyServer::start(listener, Arc::new(Allowed), CancellationToken::new())
        };
        Ok(Proxy {
            addr,
            server: Some(server),
            runtime: Some(runtime),
        })
    }

    fn open_connections(&self) -> usize {
        self.server
            .as_ref()
            .map_or(0, |s| s.open_connections().get())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Dropping the server cancels it; its tasks go with the runtime, which
        // may be dropped here inside the bench's runtime only in the background.
        drop(self.server.take());
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

// ---------------------------------------------------------------------------
// The client

async fn direct(far: SocketAddr) -> Res<TcpStream> {
    let stream = TcpStream::connect(far)
        .await
        .map_err(|e| format!("connect to the far host: {e}"))?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// A `CONNECT` tunnel to `far`, its `200` read.
async fn tunnel(proxy: SocketAddr, far: SocketAddr) -> Res<TcpStream> {
    let mut stream = TcpStream::connect(proxy)
        .await
        .map_err(|e| format!("connect to the proxy: {e}"))?;
    let _ = stream.set_nodelay(true);
    let head = format!("CONNECT {far} HTTP/1.1\r\nHost: {far}\r\n\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|e| format!("send CONNECT: {e}"))?;
    let mut answer = Vec::with_capacity(128);
    let mut buf = [0u8; 512];
    loop {
        let n = stream
            .read(&mut buf)
            .await
            .map_err(|e| format!("read the CONNECT answer: {e}"))?;
        if n == 0 {
            return Err("the proxy closed before answering CONNECT".into());
        }
        answer.extend_from_slice(&buf[..n]);
        if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            if !answer.starts_with(b"HTTP/1.1 200") {
                return Err(format!(
                    "CONNECT refused: {}",
                    String::from_utf8_lossy(&answer)
                ));
            }
            // The far host speaks only when asked: nothing may follow the head.
            if end + 4 != answer.len() {
                return Err("bytes after the CONNECT answer before any request".into());
            }
            return Ok(stream);
        }
        if answer.len() > 16 * 1024 {
            return Err("CONNECT answer without an end".into());
        }
    }
}

/// Read to the end; the count.
async fn drain(stream: &mut TcpStream, buf: &mut [u8]) -> Res<u64> {
    let mut total = 0u64;
    loop {
        match stream.read(buf).await {
            Ok(0) => return Ok(total),
            Ok(n) => total += n as u64,
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

async fn expect_len(stream: &mut TcpStream, buf: &mut [u8], bytes: u64) -> Res<()> {
    let got = tokio::time::timeout(REQUEST_LIMIT, drain(stream, buf))
        .await
        .map_err(|_| "timed out reading from the far host".to_string())??;
    if got != bytes {
        return Err(format!("read {got} bytes, expected {bytes}"));
    }
    Ok(())
}

/// CPU time (user + system) of this whole process so far: the client, the proxy
/// and the far host all live in it.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// One download of `bytes`, connection included, through the proxy or not: its
/// wall time and the CPU time it took (all parties together).
async fn download(
    proxy: Option<SocketAddr>,
    far: SocketAddr,
    bytes: u64,
    buf: &mut [u8],
) -> Res<(Duration, Duration)> {
    let (t, cpu) = (Instant::now(), cpu_time());
    let mut stream = match proxy {
        Some(p) => tunnel(p, far).await?,
        None => direct(far).await?,
    };
    stream
        .write_all(&request(BULK, bytes))
        .await
        .map_err(|e| format!("send the request: {e}"))?;
    expect_len(&mut stream, buf, bytes).await?;
    Ok((t.elapsed(), cpu_time().saturating_sub(cpu)))
}

/// Connect (and `CONNECT`), ask for a small answer, and time its first byte; the
/// rest is read untimed and checked.
async fn first_byte(proxy: Option<SocketAddr>, far: SocketAddr, buf: &mut [u8]) -> Res<Duration> {
    let t = Instant::now();
    let mut stream = match proxy {
        Some(p) => tunnel(p, far).await?,
        None => direct(far).await?,
    };
    stream
        .write_all(&request(BULK, ANSWER_BYTES))
        .await
        .map_err(|e| format!("send the request: {e}"))?;
    let first = tokio::time::timeout(REQUEST_LIMIT, stream.read(buf))
        .await
        .map_err(|_| "timed out waiting for the first byte".to_string())?
        .map_err(|e| format!("read: {e}"))?;
    let elapsed = t.elapsed();
    if first == 0 {
        return Err("closed before the first byte".into());
    }
    expect_len(&mut stream, buf, ANSWER_BYTES - first as u64).await?;
    Ok(elapsed)
}

/// A connection held open after `bytes` came down it (the far host holds it too).
async fn held(proxy: Option<SocketAddr>, far: SocketAddr, bytes: u64) -> Res<TcpStream> {
    let mut stream = match proxy {
        Some(p) => tunnel(p, far).await?,
        None => direct(far).await?,
    };
    stream
        .write_all(&request(HOLD, bytes))
        .await
        .map_err(|e| format!("send the request: {e}"))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0u64;
    while got < bytes {
        let n = tokio::time::timeout(REQUEST_LIMIT, stream.read(&mut buf))
            .await
            .map_err(|_| "timed out reading a held connection".to_string())?
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("a held connection closed".into());
        }
        got += n as u64;
    }
    Ok(stream)
}

/// This process's resident memory, KiB.
fn own_rss() -> Res<u64> {
    memory(std::process::id()).map(|m| m.rss)
}

fn mb(bytes: u64) -> String {
    if bytes >= 1_000_000 {
        format!("{} MB", bytes / 1_000_000)
    } else {
        format!("{} KB", bytes / 1000)
    }
}

// ---------------------------------------------------------------------------
// The scenarios

/// N1: a bulk download, through the proxy and directly, alternating; ratio of
/// medians (issue 28: <= 1.3).
pub(crate) async fn n1(env: &Env) -> Res<Outcome> {
    let (bytes, rounds) = (env.counts.n1_bytes, env.counts.n1_rounds);
    let far = FarHost::start()?;
    let proxy = Proxy::start()?;
    let mut buf = vec![0u8; 64 * 1024];
    // Untimed: the first connections fault in code and grow the socket buffers.
    let warm = bytes.min(8_000_000);
    download(Some(proxy.addr), far.addr, warm, &mut buf).await?;
    download(None, far.addr, warm, &mut buf).await?;
    let (mut through, mut straight) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for i in 0..rounds {
        if i % 2 == 0 {
            through.push(download(Some(proxy.addr), far.addr, bytes, &mut buf).await?);
            straight.push(download(None, far.addr, bytes, &mut buf).await?);
        } else {
            straight.push(download(None, far.addr, bytes, &mut buf).await?);
            through.push(download(Some(proxy.addr), far.addr, bytes, &mut buf).await?);
        }
    }
    drop(proxy);
    drop(far);
    let wall = |v: &[(Duration, Duration)]| Stats::of(&v.iter().map(|x| x.0).collect::<Vec<_>>());
    let cpu = |v: &[(Duration, Duration)]| Stats::of(&v.iter().map(|x| x.1).collect::<Vec<_>>());
    let (p, d) = (wall(&through), wall(&straight));
    // Less at the mercy of other load than wall time: what each way costs the
    // machine (the client, the far host and, through, the proxy).
    let (pc, dc) = (cpu(&through), cpu(&straight));
    let rate = |ms: f64| bytes as f64 / 1e6 / (ms / 1e3);
    Ok(Outcome {
        rows: vec![Row {
            id: "N1",
            scenario: format!(
                "{} from a loopback server, through the proxy's CONNECT tunnel vs direct",
                mb(bytes)
            ),
            metric: "median download time",
            unit: "ms",
            dsh: p.p50,
            baseline: Some(d.p50),
            ratio: Some(p.p50 / d.p50),
            target: Target::RatioAtMost(1.3),
        }],
        notes: vec![
            p.line("N1 through the proxy"),
            d.line("N1 direct           "),
            format!(
                "N1 {} rounds of {} each way: {:.0} MB/s through the proxy, {:.0} MB/s direct (medians)",
                rounds,
                mb(bytes),
                rate(p.p50),
                rate(d.p50)
            ),
            pc.line("N1 CPU time (all parties), through"),
            dc.line("N1 CPU time (all parties), direct "),
            format!(
                "N1 CPU ratio through/direct {:.3} (medians): the proxy's copy costs {:.2} ms of CPU per MB",
                pc.p50 / dc.p50,
                (pc.p50 - dc.p50) / (bytes as f64 / 1e6)
            ),
        ],
        details: json!({"bytes": bytes, "rounds": rounds, "proxy": p.json(), "direct": d.json(),
                        "proxy_cpu": pc.json(), "direct_cpu": dc.json()}),
    })
}

/// N2: time to the first byte of a small answer from a host already allowed,
/// through the proxy and directly, alternating (issue 28: <= 1 ms more at the
/// median); then the proxy's memory per open tunnel.
pub(crate) async fn n2(env: &Env) -> Res<Outcome> {
    let n = env.counts.n2_iterations;
    let far = FarHost::start()?;
    let proxy = Proxy::start()?;
    let mut buf = vec![0u8; 4096];
    let (mut through, mut straight) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..env.counts.warmup + n {
        let (a, b) = if i % 2 == 0 {
            let a = first_byte(Some(proxy.addr), far.addr, &mut buf).await?;
            (a, first_byte(None, far.addr, &mut buf).await?)
        } else {
            let b = first_byte(None, far.addr, &mut buf).await?;
            (first_byte(Some(proxy.addr), far.addr, &mut buf).await?, b)
        };
        if i >= env.counts.warmup {
            through.push(a);
            straight.push(b);
        }
    }
    let (p, d) = (Stats::of(&through), Stats::of(&straight));
    let memory = tunnel_memory(&proxy, &far, env.counts.n2_tunnels).await?;
    drop(proxy);
    drop(far);
    let mut notes = vec![
        p.line("N2 first byte through the proxy"),
        d.line("N2 first byte direct           "),
        format!(
            "N2 the proxy adds {:.3} ms to the first byte at the median",
            p.p50 - d.p50
        ),
    ];
    notes.extend(memory.notes);
    Ok(Outcome {
        rows: vec![
            Row {
                id: "N2",
                scenario: format!(
                    "{n} connects + first byte of a {ANSWER_BYTES}-byte answer, allowed host, proxy vs direct"
                ),
                metric: "median time to first byte",
                unit: "ms",
                dsh: p.p50,
                baseline: Some(d.p50),
                ratio: Some(p.p50 / d.p50),
                target: Target::ExcessAtMost(1.0),
            },
            Row {
                id: "N2",
                scenario: format!(
                    "{} tunnels held open, each after {} KiB came down",
                    env.counts.n2_tunnels,
                    HELD_BULK / 1024
                ),
                metric: "proxy RSS per open tunnel",
                unit: "KiB",
                dsh: memory.after_bulk,
                baseline: None,
                ratio: None,
                target: Target::Reported,
            },
        ],
        notes,
        details: json!({"proxy": p.json(), "direct": d.json(), "memory": memory.details}),
    })
}

struct TunnelMemory {
    /// The proxy's KiB per tunnel that carried `HELD_BULK` down.
    after_bulk: f64,
    notes: Vec<String>,
    details: serde_json::Value,
}

/// The bench's RSS with `k` direct connections held, then `k` idle tunnels more
/// (one byte came down each), then `k` tunnels more that each carried
/// `HELD_BULK` down; every connection stays open to the end, so no freed memory
/// is reused by the next step. A tunnel's figure minus a direct connection's is
/// the proxy's part (its two sockets, its tasks and the tunnel's buffers).
async fn tunnel_memory(proxy: &Proxy, far: &FarHost, k: usize) -> Res<TunnelMemory> {
    // As the daemon does (src/main.rs), so the allocator behaves as it does there.
    // SAFETY: mallopt only sets a limit of glibc's allocator.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
    raise_descriptor_limit();
    // Untimed warm-up: the first tunnels grow the runtimes' and allocator's own tables.
    let mut warm = Vec::new();
    for _ in 0..8 {
        warm.push(held(None, far.addr, 1).await?);
        warm.push(held(Some(proxy.addr), far.addr, 1).await?);
        warm.push(held(Some(proxy.addr), far.addr, HELD_BULK).await?);
    }
    drop(warm);
    settle(proxy, 0).await?;
    let rss0 = own_rss()?;
    let mut direct_held = Vec::with_capacity(k);
    for _ in 0..k {
        direct_held.push(held(None, far.addr, 1).await?);
    }
    let rss1 = own_rss()?;
    let mut idle = Vec::with_capacity(k);
    for _ in 0..k {
        idle.push(held(Some(proxy.addr), far.addr, 1).await?);
    }
    settle(proxy, k).await?;
    let rss2 = own_rss()?;
    let mut bulk = Vec::with_capacity(k);
    for _ in 0..k {
        bulk.push(held(Some(proxy.addr), far.addr, HELD_BULK).await?);
    }
    settle(proxy, 2 * k).await?;
    let rss3 = own_rss()?;
    drop((direct_held, idle, bulk));
    let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / k as f64;
    let (direct_each, idle_each, bulk_each) = (per(rss0, rss1), per(rss1, rss2), per(rss2, rss3));
    let (idle_proxy, bulk_proxy) = (idle_each - direct_each, bulk_each - direct_each);
    Ok(TunnelMemory {
        after_bulk: bulk_proxy,
        notes: vec![format!(
            "N2 memory, {k} of each held open (bench RSS {rss0} -> {rss1} -> {rss2} -> {rss3} KiB): \
             a direct connection {direct_each:.1} KiB (both ends), a tunnel {idle_each:.1} KiB idle \
             and {bulk_each:.1} KiB after {} KiB came down; the proxy's part {idle_proxy:.1} KiB idle, \
             {bulk_proxy:.1} KiB after traffic",
            HELD_BULK / 1024
        )],
        details: json!({"held": k, "rss_kib": [rss0, rss1, rss2, rss3],
                        "direct_kib_each": direct_each, "tunnel_idle_kib_each": idle_each,
                        "tunnel_after_bulk_kib_each": bulk_each,
                        "proxy_idle_kib_each": idle_proxy, "proxy_after_bulk_kib_each": bulk_proxy}),
    })
}

/// Wait (bounded) until the proxy counts `open` connections.
async fn settle(proxy: &Proxy, open: usize) -> Res<()> {
    let t = Instant::now();
    while proxy.open_connections() != open {
        if t.elapsed() > REQUEST_LIMIT {
            return Err(format!(
                "the proxy holds {} connections, expected {open}",
                proxy.open_connections()
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Many connections are held at once (four descriptors a tunnel in this one
/// process): lift the soft limit to the hard one where it is lower.
fn raise_descriptor_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
