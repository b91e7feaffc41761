//! `git conference serve` (issue #25): the JSON endpoints and the stream (`api`), the page in a
//! real headless Chromium (`browser`, through `webdriver`), a conference of 10,000 attempts
//! (`big`), the HTTP stack under load and abuse (`stack`, issue #43), and the attempt tree and
//! its ancestries (`lineage`, issue #41). Each test starts the real binary on a free port and
//! talks to it over TCP.

mod api;
mod big;
mod browser;
pub mod grow;
mod lineage;
mod stack;
mod webdriver;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::common::{ConfigBuilder, TestRepo};

/// A running `git conference serve`, stopped (by its pid) when dropped.
pub struct Served {
    child: Child,
    /// `127.0.0.1:<port>`
    pub addr: String,
    pub token: String,
    /// The address it printed.
    pub url: String,
}

impl Served {
    /// Starts `git-conference serve <args> --port 0` in `repo` and waits for its address.
    pub fn start(repo: &TestRepo, args: &[&str]) -> Served {
        Served::start_in(repo, &repo.dir, args)
    }

    /// [`Served::start`] in the clone at `dir`.
    pub fn start_in(repo: &TestRepo, dir: &std::path::Path, args: &[&str]) -> Served {
        let mut child = repo
            .command(env!("CARGO_BIN_EXE_git-conference"))
            .current_dir(dir)
            .arg("serve")
            .args(args)
            .args(["--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Some(url) = line.trim().strip_prefix("Serving ").map(str::to_string) else {
            panic!("serve printed {line:?}, then: {:?}", child.wait());
        };
        let rest = url.strip_prefix("http://").unwrap();
        let addr = rest[..rest.find('/').unwrap()].to_string();
        let token = url.split("token=").nth(1).unwrap().to_string();
        Served {
            child,
            addr,
            token,
            url,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGINT (Ctrl-C) and waits up to `patience` for the server to exit; its status.
    pub fn interrupt(&mut self, patience: Duration) -> Option<std::process::ExitStatus> {
        let sent = std::process::Command::new("kill")
            .args(["-INT", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let deadline = std::time::Instant::now() + patience;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// GET `path` with this server's own Host; (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        http(&self.addr, "GET", path, &[], "")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request over a fresh connection (`Host` is `addr` unless `headers` name one);
/// (status, body).
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    http_within(addr, method, path, headers, body, Duration::from_secs(30))
}

/// [`http`] that waits up to `patience` for the answer (a browser starting on a loaded
/// machine takes longer than a page).
pub fn http_within(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    patience: Duration,
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(patience)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(head.as_bytes()).unwrap();
    let (status, _, body) = read_response(&mut BufReader::new(stream))
        .unwrap_or_else(|| panic!("no HTTP response to {method} {path}"));
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A response as read: its status, its headers (names lower-cased), its body.
pub type Answer = (u16, Vec<(String, String)>, Vec<u8>);

/// A response read from `reader`: its status, its headers (names lower-cased) and its body, as
/// much as it announces (ChromeDriver keeps the connection open), in chunks or up to the end;
/// None when the connection closed before a status line.
pub fn read_response(reader: &mut impl BufRead) -> Option<Answer> {
    let mut status_line = String::new();
    if reader.read_line(&mut status_line).ok()? == 0 {
        return None;
    }
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let mut body = Vec::new();
    if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(n, 0);
        reader.read_exact(&mut body).unwrap();
    } else if header("transfer-encoding").is_some_and(|v| v == "chunked") {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).unwrap();
            let size = usize::from_str_radix(size.trim(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        reader.read_to_end(&mut body).unwrap();
    }
    Some((status, headers, body))
}

/// A conference of two researchers (the complement fixture) paused after round 1 of 2: `resume`
/// then records round 2's events while a test watches.
pub fn paused_conference(name: &str) -> TestRepo {
    paused_conference_of(TestRepo::from_fixture("complement"), name, "./agent.sh")
}

/// [`paused_conference`] in `repo` with researchers running `agent`.
pub fn paused_conference_of(repo: TestRepo, name: &str, agent: &str) -> TestRepo {
    let config = ConfigBuilder::new("Live", agent)
        .count(2)
        .iterations(2)
        .rounds(2)
        .constraint("- **Pause every:** 1")
        .build();
    let run = repo.start(name, &config);
    assert_eq!(
        run.code, 3,
        "paused after round 1: {}{}",
        run.stdout, run.stderr
    );
    repo
}

/// A conference of one researcher whose two attempts describe themselves as markup: an image
/// whose error handler alerts, and the end of a script element followed by a script.
pub const XSS_IMG: &str = "<img src=x onerror=alert(1)>";
pub const XSS_SCRIPT: &str = "</script><script>alert(2)</script>";

pub fn markup_conference(name: &str) -> TestRepo {
    let repo = TestRepo::from_fixture("complement");
    repo.write_executable(
        "markup.sh",
        &format!(
            "#!/bin/sh\nv=$(cat a.txt)\necho $((v - 1)) > a.txt\nif [ \"$CONFERENCE_ITERATION\" = 1 ]; then\n  echo '{XSS_IMG}' > \"$CONFERENCE_NOTE_FILE\"\nelse\n  echo '{XSS_SCRIPT}' > \"$CONFERENCE_NOTE_FILE\"\nfi\n"
        ),
    );
    repo.commit_all("markup agent");
    let config = ConfigBuilder::new("Markup", "./markup.sh")
        .iterations(2)
        .rounds(1)
        .build();
    repo.start(name, &config).ok();
    repo
}
