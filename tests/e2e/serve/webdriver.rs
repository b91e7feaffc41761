//! A real headless Chromium driven through ChromeDriver's W3C WebDriver endpoints: the few
//! commands the page's tests need (open a page, run a script, look for an alert, take a
//! screenshot), as JSON over the same plain HTTP the other tests speak. ChromeDriver runs on a
//! free port with a fresh profile, and is stopped by its pid when the browser is dropped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::http_within;

pub struct Browser {
    driver: Child,
    /// One Chromium at a time: three starting together on CI's two cores took over 30 s to
    /// open a session.
    _turn: std::sync::MutexGuard<'static, ()>,
    addr: String,
    session: String,
    _profile: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Browser {
    /// Starts ChromeDriver and a headless Chromium session (1400×1000).
    pub fn start() -> Browser {
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let turn = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let port = free_port();
        let driver = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver");
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on {addr}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1400,1000",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
        }}});
        let mut browser = Browser {
            driver,
            _turn: turn,
            addr,
            session: String::new(),
            _profile: profile,
        };
        let created = browser.call("POST", "/session", Some(capabilities));
        browser.session = created["sessionId"]
            .as_str()
            .expect("a session")
            .to_string();
        browser
    }

    /// One WebDriver command; its `value` (panics on an error answer).
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (code, value) = self.try_call(method, path, body);
        assert_eq!(code, 200, "WebDriver {method} {path}: {value}");
        value
    }

    fn try_call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let (code, text) = http_within(
            &self.addr,
            method,
            path,
            &[("Content-Type", "application/json")],
            &body,
            Duration::from_secs(180),
        );
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        (code, value["value"].clone())
    }

    fn session(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    /// Opens `url` and waits for it to load.
    pub fn open(&self, url: &str) {
        self.call("POST", &self.session("/url"), Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body: `return …`) in the page; its result.
    pub fn run(&self, script: &str) -> Value {
        self.call(
            "POST",
            &self.session("/execute/sync"),
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Runs `script` until it returns something truthy, for up to `limit`; the result and when.
    pub fn wait_for(&self, script: &str, limit: Duration) -> (Value, Duration) {
        let start = Instant::now();
        loop {
            let v = self.run(script);
            let truthy =
                !matches!(&v, Value::Null | Value::Bool(false)) && v != json!("") && v != json!(0);
            if truthy {
                return (v, start.elapsed());
            }
            assert!(start.elapsed() < limit, "waited {limit:?} for: {script}");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The text of the open alert, if one is open.
    pub fn alert(&self) -> Option<String> {
        let (code, value) = self.try_call("GET", &self.session("/alert/text"), None);
        (code == 200).then(|| value.as_str().unwrap_or_default().to_string())
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        let b64 = self.call("GET", &self.session("/screenshot"), None);
        base64_decode(b64.as_str().unwrap())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.try_call("DELETE", &self.session(""), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let clean: Vec<u8> = text
        .bytes()
        .filter(|c| !matches!(c, b'=' | b'\n' | b'\r'))
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= (value(c) as u32) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
