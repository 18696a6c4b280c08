//! The server loop: accepts TCP connections and serves the router on each (HTTP/1.1),
//! with the limits that keep slow, idle or numerous clients from exhausting the process
//! (issue 22): a client must send a request's headers within `header_timeout`, an idle
//! keep-alive connection is closed after `idle_timeout`, and at most `max_connections`
//! are held open. When a new client arrives at the cap, the connection idle longest
//! (no request in progress) is closed to make room, as nginx reuses its idle keep-alive
//! connections; only when every connection is busy is the newcomer turned away. So idle
//! sockets can never keep `/healthz` from answering, nor use up the process's file
//! descriptors. (The body read timeout is a layer of the router, [`super::router`].)
//!
//! Each connection is watched through its socket (bytes read start a request's head)
//! and its service (a request in progress until its response body is dropped). May
//! import: axum, hyper, tokio.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;

use crate::config::HttpConfig;

/// The connection limits (see the module's description).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest a client may take from its first byte to a request's last header byte.
    pub header_timeout: Duration,
    /// Longest a connection may stay open with no request in progress.
    pub idle_timeout: Duration,
    /// Most connections held open at once.
    pub max_connections: usize,
}

impl Limits {
    /// The limits the configuration states.
    pub fn from_config(http: &HttpConfig) -> Self {
        Self {
            header_timeout: Duration::from_millis(http.header_timeout_ms),
            idle_timeout: Duration::from_millis(http.idle_timeout_ms),
            max_connections: http.max_connections,
        }
    }

    /// How often each connection checks its timers: a quarter of the shorter timeout,
    /// within 5 ms and 1 s.
    fn tick(&self) -> Duration {
        (self.header_timeout.min(self.idle_timeout) / 4)
            .clamp(Duration::from_millis(5), Duration::from_secs(1))
    }
}

/// One open connection, as the loop and its watchers see it.
struct Watch {
    /// Requests in progress (from the service's call until the response body is dropped).
    busy: AtomicUsize,
    /// Whether bytes of a new request arrived since the connection last went idle.
    head: AtomicBool,
    /// When it last went idle, or its new request's first bytes arrived (ms since
    /// `epoch`).
    since_ms: AtomicU64,
    /// Set when the loop asks it to close (to make room, or at shutdown).
    closing: AtomicBool,
    /// Wakes the connection's task when `closing` is set.
    wake: tokio::sync::Notify,
    epoch: Instant,
}

impl Watch {
    fn new(epoch: Instant) -> Self {
        let w = Self {
            busy: AtomicUsize::new(0),
            head: AtomicBool::new(false),
            since_ms: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
            epoch,
        };
        w.mark();
        w
    }

    fn mark(&self) {
        self.since_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn elapsed(&self) -> Duration {
        let now = self.epoch.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.since_ms.load(Ordering::Relaxed)))
    }

    fn begin(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
    }

    fn end(&self) {
        if self.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.head.store(false, Ordering::Release);
            self.mark();
        }
    }

    fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire) > 0
    }

    fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Why the connection must close now, if it must.
    fn expired(&self, limits: &Limits) -> Option<&'static str> {
        if self.is_busy() {
            return None;
        }
        if self.head.load(Ordering::Acquire) {
            (self.elapsed() >= limits.header_timeout).then_some("header read timeout")
        } else {
            (self.elapsed() >= limits.idle_timeout).then_some("idle timeout")
        }
    }
}

/// A socket that tells its [`Watch`] when a new request's first bytes arrive.
struct Watched {
    inner: TcpStream,
    watch: Arc<Watch>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let w = &self.watch;
            if !w.is_busy() && !w.head.swap(true, Ordering::AcqRel) {
                w.mark();
            }
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Ends its request's time in progress when dropped (with the response body, once it
/// is written or the connection is gone).
struct InProgress(Arc<Watch>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A response body that holds its request's [`InProgress`].
struct Tracked {
    inner: Body,
    _in_progress: InProgress,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The open connections, oldest first.
#[derive(Default)]
struct Registry {
    next: u64,
    open: BTreeMap<u64, Arc<Watch>>,
}

impl Registry {
    /// Asks the connection idle longest (no request in progress, not already closing)
    /// to close; false when every connection is busy.
    fn evict_one(&self) -> bool {
        let idle = self
            .open
            .values()
            .filter(|w| !w.is_busy() && !w.closing.load(Ordering::Acquire))
            // The first of equals is the oldest connection.
            .min_by_key(|w| w.since_ms.load(Ordering::Relaxed));
        match idle {
            Some(w) => {
                w.close();
                true
            }
            None => false,
        }
    }

    /// Connections not already asked to close.
    fn live(&self) -> usize {
        self.open
            .values()
            .filter(|w| !w.closing.load(Ordering::Acquire))
            .count()
    }
}

/// Serves `router` on `listener` under `limits` until `shutdown` completes; then stops
/// accepting, lets requests in progress finish, and returns once every connection is
/// closed.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let epoch = Instant::now();
    let registry = Arc::new(Mutex::new(Registry::default()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => a,
            // Reap finished connections' tasks as they end.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors (EMFILE, ENFILE) or a connection that died in
                // the backlog: make room if we can, pause, go on.
                tracing::warn!(error = %e, "cannot accept a connection");
                registry.lock().expect("registry").evict_one();
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let watch = Arc::new(Watch::new(epoch));
        let id = {
            let mut r = registry.lock().expect("registry");
            if r.live() >= limits.max_connections && !r.evict_one() {
                tracing::warn!(
                    %peer,
                    max_connections = limits.max_connections,
                    "every connection is busy; turning a new one away"
                );
                drop(stream);
                continue;
            }
            r.next += 1;
            let id = r.next;
            r.open.insert(id, watch.clone());
            id
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let registry = registry.clone();
        let stopped = stopped.clone();
        tasks.spawn(async move {
            serve_connection(stream, router, watch, limits, stopped).await;
            registry.lock().expect("registry").open.remove(&id);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// Serves one connection until it ends, times out, is asked to close, or the server
/// stops (then requests in progress finish first).
async fn serve_connection(
    stream: TcpStream,
    router: Router,
    watch: Arc<Watch>,
    limits: Limits,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let io = TokioIo::new(Watched {
        inner: stream,
        watch: watch.clone(),
    });
    let service_watch = watch.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        service_watch.begin();
        let in_progress = InProgress(service_watch.clone());
        let router = router.clone();
        async move {
            let res = router.oneshot(req.map(Body::new)).await;
            res.map(|r| {
                r.map(|inner| {
                    Body::new(Tracked {
                        inner,
                        _in_progress: in_progress,
                    })
                })
            })
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(io, service)
        .with_upgrades();
    tokio::pin!(conn);
    let mut tick = tokio::time::interval(limits.tick());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut draining = false;
    loop {
        tokio::select! {
            res = conn.as_mut() => {
                if let Err(e) = res {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            () = watch.wake.notified() => {
                if !watch.is_busy() {
                    tracing::debug!("closing an idle connection to make room");
                    return;
                }
                // Busy since it was chosen: finish its request, then close.
                conn.as_mut().graceful_shutdown();
                draining = true;
            }
            _ = tick.tick() => {
                if let Some(why) = watch.expired(&limits) {
                    tracing::debug!(why, "closing a connection");
                    return;
                }
            }
            _ = stopped.changed(), if !draining => {
                conn.as_mut().graceful_shutdown();
                draining = true;
            }
        }
    }
}
