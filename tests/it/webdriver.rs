//! A small W3C WebDriver client over the project's own reqwest, driving Debian's
//! headless Chromium through `chromedriver`.
//!
//! Why not a WebDriver crate (fantoccini, thirtyfour): the tests use eight endpoints of
//! the protocol (session, navigate, find, click, clear, type, execute, screenshot) —
//! a page of code — while a crate brings its own HTTP stack and the `webdriver` crate's
//! dependency tree (ICU segmentation, cookies) to compile on CI's two shared cores.
//! Errors panic with the driver's message: this is test code, and a failing step
//! should say exactly what the browser answered.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The key W3C WebDriver names element references by.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A `chromedriver` process on a free loopback port, killed on drop.
pub struct Driver {
    child: Child,
    url: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

/// A browser session; ended on [`Session::quit`].
pub struct Session<'a> {
    driver: &'a Driver,
    id: String,
}

/// The loopback port of a listener the OS picked, freed for a child process to take.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The reqwest client of the tests (rustls needs a process-wide crypto provider even
/// for plain HTTP).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn find_program(names: &[&str]) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "none of {names:?} is on PATH: install Debian's chromium and chromium-driver \
         (scripts/test does: apt-get install chromium chromium-driver)"
    );
}

impl Driver {
    /// Starts `chromedriver` and waits (with a deadline) until it is ready.
    pub async fn start() -> Driver {
        let program = find_program(&["chromedriver"]);
        let port = free_port();
        let child = Command::new(program)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            http: http_client(),
            _profile: tempfile::tempdir().unwrap(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(res) = driver
                .http
                .get(format!("{}/status", driver.url))
                .send()
                .await
                && let Ok(v) = res.json::<Value>().await
                && v["value"]["ready"] == true
            {
                return driver;
            }
            assert!(Instant::now() < deadline, "chromedriver not ready in 20 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A new headless Chromium session with a fresh profile and the given window size.
    pub async fn session(&self, width: u32, height: u32) -> Session<'_> {
        let binary = find_program(&["chromium", "chromium-browser", "google-chrome"]);
        let profile = self
            ._profile
            .path()
            .join(format!("p{}", rand::random::<u32>()));
        let args = [
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-background-networking".into(),
            "--no-first-run".into(),
            "--disable-quic".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--hide-scrollbars".into(),
            "--lang=en-GB".into(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": binary, "args": args},
        }}});
        let v = self.call("POST", "/session", Some(caps)).await;
        Session {
            driver: self,
            id: v["sessionId"]
                .as_str()
                .unwrap_or_else(|| panic!("no session id in {v}"))
                .to_string(),
        }
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.url);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let res = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = res.status();
        let v: Value = res.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path}: {status} {v}");
        v["value"].clone()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Session<'_> {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.driver
            .call(method, &format!("/session/{}{path}", self.id), body)
            .await
    }

    /// Opens `url` and waits for the page's load event.
    pub async fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({ "url": url }))).await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns its value.
    pub async fn eval(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// Polls `script` until it returns something other than null/false/empty, or
    /// panics with `what` after `timeout`.
    pub async fn wait_for(&self, what: &str, timeout: Duration, script: &str) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(script, json!([])).await;
            let done = match &v {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                _ => true,
            };
            if done {
                return v;
            }
            if Instant::now() >= deadline {
                let text = self
                    .eval(
                        "return document.body ? document.body.innerText : ''",
                        json!([]),
                    )
                    .await;
                panic!("waited {timeout:?} for {what}; the page says:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// The element matching a CSS selector.
    pub async fn find(&self, css: &str) -> String {
        let v = self
            .call(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v[ELEMENT_KEY]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    /// Replaces the text of an input.
    pub async fn fill(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        self.call("POST", &format!("/element/{e}/clear"), None)
            .await;
        self.call(
            "POST",
            &format!("/element/{e}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Clicks an element.
    pub async fn click(&self, css: &str) {
        let e = self.find(css).await;
        self.call("POST", &format!("/element/{e}/click"), None)
            .await;
    }

    /// Saves a PNG screenshot of the window to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let v = self.call("GET", "/screenshot", None).await;
        let png = decode_base64(v.as_str().expect("screenshot is base64 text"));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Saves a PNG of the whole page: the window grows to the page's height for the
    /// shot, then returns to its size.
    pub async fn screenshot_page(&self, path: &Path) {
        let size = self
            .eval(
                "return [window.outerWidth, window.outerHeight, window.innerHeight, \
                 document.documentElement.scrollHeight]",
                json!([]),
            )
            .await;
        let n = |i: usize| size[i].as_u64().unwrap_or(0) as u32;
        let (width, outer, inner, page) = (n(0), n(1), n(2), n(3));
        if page > inner {
            self.resize(width, page + outer.saturating_sub(inner)).await;
        }
        self.screenshot(path).await;
        if page > inner {
            self.resize(width, outer).await;
        }
    }

    /// Resizes the window (CSS pixels of the outer window).
    pub async fn resize(&self, width: u32, height: u32) {
        self.call(
            "POST",
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await;
    }

    /// Ends the session (closes the browser).
    pub async fn quit(self) {
        self.driver
            .call("DELETE", &format!("/session/{}", self.id), None)
            .await;
    }
}

/// Standard base64 (with padding) to bytes.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let bytes: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            acc |= value(*c) << (18 - 6 * i);
        }
        let n = chunk.len() * 6 / 8;
        for i in 0..n {
            out.push((acc >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[test]
fn base64_decodes() {
    assert_eq!(decode_base64("aGVsbG8="), b"hello");
    assert_eq!(decode_base64("aGVsbG8h"), b"hello!");
    assert_eq!(decode_base64("aGk="), b"hi");
}

/// Where screenshots go: `$CARGO_TARGET_DIR/screenshots` or `target/screenshots`.
pub fn screenshot_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("screenshots")
}
