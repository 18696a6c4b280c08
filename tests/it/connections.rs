//! Connections cannot exhaust the server (issue 22): over real loopback sockets, a
//! client slow to send its headers, an idle keep-alive connection and a trickled body
//! are closed by the server, and idle sockets past the connection cap do not keep
//! `/healthz` from answering. Time is injected as short configured timeouts; each test
//! waits for the server to close the socket (a long guard only stops a hung test).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::TestApp;
use qbets::store::Scope;

/// Longest a test waits for what must happen: a guard against a hang, not a timing.
const GUARD: Duration = Duration::from_secs(60);

async fn connect(base: &str) -> TcpStream {
    TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Reads until the server closes the socket (EOF or reset); returns what it sent.
async fn read_until_closed(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(GUARD, read)
        .await
        .expect("the server never closed the connection");
    String::from_utf8_lossy(&got).into_owned()
}

/// Sends a whole GET on `s` and reads one response's head and body (Content-Length).
async fn get_on(s: &mut TcpStream, path: &str) -> String {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before a whole response");
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let len: usize = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if got.len() >= end + 4 + len {
                    return text;
                }
            }
        }
    };
    tokio::time::timeout(GUARD, read)
        .await
        .expect("no response")
}

#[tokio::test]
async fn a_client_slow_to_send_its_headers_is_closed() {
    let app = TestApp::with_config(|c| {
        c.http.header_timeout_ms = 200;
        c.http.idle_timeout_ms = 3_600_000;
    })
    .await;
    let base = app.listen().await;
    let mut s = connect(&base).await;
    // Half a request's head, and then nothing.
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
        .await
        .unwrap();
    let sent = read_until_closed(&mut s).await;
    assert_eq!(sent, "", "no answer to an incomplete request");
    // A prompt client on the same server is served.
    let mut s = connect(&base).await;
    assert!(get_on(&mut s, "/healthz").await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let app = TestApp::with_config(|c| {
        c.http.idle_timeout_ms = 200;
        c.http.header_timeout_ms = 3_600_000;
    })
    .await;
    let base = app.listen().await;
    // Served, kept alive, then idle: closed.
    let mut s = connect(&base).await;
    let first = get_on(&mut s, "/healthz").await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(!first.to_ascii_lowercase().contains("connection: close"));
    assert_eq!(read_until_closed(&mut s).await, "");
    // A socket that never sends a byte is idle too.
    let mut s = connect(&base).await;
    assert_eq!(read_until_closed(&mut s).await, "");
}

#[tokio::test]
async fn a_trickled_body_is_answered_408_and_closed() {
    let app = TestApp::with_config(|c| {
        c.http.body_timeout_ms = 300;
        c.http.header_timeout_ms = 3_600_000;
        c.http.idle_timeout_ms = 3_600_000;
    })
    .await;
    let token = app.token("pusher", Scope::Ingest).await;
    let base = app.listen().await;
    let s = connect(&base).await;
    let (mut rd, mut wr) = s.into_split();
    let head = format!(
        "POST /v1/sites/x/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n["
    );
    wr.write_all(head.as_bytes()).await.unwrap();
    // One byte now and then, for as long as the server listens.
    let trickle = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if wr.write_all(b" ").await.is_err() {
                break;
            }
        }
    });
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(GUARD, read)
        .await
        .expect("the server never closed the trickled connection");
    trickle.abort();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    assert!(text.contains("application/problem+json"), "{text}");
}

#[tokio::test]
async fn idle_sockets_over_the_cap_do_not_stop_healthz() {
    let app = TestApp::with_config(|c| {
        c.http.max_connections = 8;
        c.http.header_timeout_ms = 3_600_000;
        c.http.idle_timeout_ms = 3_600_000;
    })
    .await;
    let base = app.listen().await;
    // Twenty idle sockets: some that never spoke, some kept alive after a request.
    let mut idle = Vec::new();
    for i in 0..20 {
        let mut s = connect(&base).await;
        if i % 2 == 0 {
            assert!(get_on(&mut s, "/healthz").await.starts_with("HTTP/1.1 200"));
        }
        idle.push(s);
    }
    // A newcomer is answered, however many idle sockets there are.
    for _ in 0..3 {
        let mut s = connect(&base).await;
        let answer = get_on(&mut s, "/healthz").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    // Room was made by closing the sockets idle longest: the first 12 for the last 12
    // of the twenty, the next 3 for the newcomers.
    for (i, s) in idle.iter_mut().take(15).enumerate() {
        assert_eq!(read_until_closed(s).await, "", "socket {i}");
    }
}
