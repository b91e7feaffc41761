//! The HTTP stack of `serve` (issue #43) over raw TCP on loopback: keep-alive, HTTP/2 with prior
//! knowledge, compression, the graceful stop, and what a slow or hostile client meets — a head
//! sent a byte a second, an oversized head, a request smuggled in a body, 200 idle connections.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::grow::grow;
use super::{read_response, Served};
use crate::common::TestRepo;

/// The server closes a connection without a request in flight after 10 s (`serve/conn.rs`);
/// the tests allow three times that, whatever the machine's load.
const CLOSED_WITHIN: Duration = Duration::from_secs(30);

fn connect(served: &Served) -> TcpStream {
    let stream = TcpStream::connect(&served.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
}

/// Reads until the server closes `stream` (end of file or reset); what it sent before.
fn until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("the connection stayed open: {e}"),
        }
    }
}

#[test]
fn keep_alive_answers_several_requests_on_one_connection() {
    let repo = TestRepo::complement_conference("kept");
    let served = Served::start(&repo, &["kept"]);
    let stream = connect(&served);
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    for path in ["/api/kept/status", "/api/kept/attempts", "/c/kept", "/nope"] {
        write!(
            writer,
            "GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n",
            served.addr
        )
        .unwrap();
        let (status, headers, body) = read_response(&mut reader).expect("an answer");
        let expected = if path == "/nope" { 404 } else { 200 };
        assert_eq!(
            status,
            expected,
            "{path}: {}",
            String::from_utf8_lossy(&body)
        );
        assert!(
            !headers
                .iter()
                .any(|(k, v)| k == "connection" && v == "close"),
            "{path}: {headers:?}"
        );
        // Every response carries the safety headers, the refusals the router makes included.
        for name in [
            "cache-control",
            "x-content-type-options",
            "content-security-policy",
        ] {
            assert!(headers.iter().any(|(k, _)| k == name), "{path}: {name}");
        }
    }
}

/// An HTTP/2 frame: its length, type, flags and stream, then its payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A GET over HTTP/2 with prior knowledge (h2c): the connection preface, then HEADERS with
/// each field a literal (HPACK, no Huffman, no indexing). Returns the response's header block
/// and its body.
fn h2_get(addr: &str, authority: &str, path: &str) -> (Vec<u8>, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", authority),
        (":path", path),
    ] {
        block.push(0);
        block.push(name.len() as u8);
        block.extend(name.bytes());
        block.push(value.len() as u8);
        block.extend(value.bytes());
    }
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(4, 0, 0, &[]));
    // END_STREAM | END_HEADERS
    out.extend(frame(1, 0x5, 1, &block));
    stream.write_all(&out).unwrap();
    let (mut head, mut body) = (Vec::new(), Vec::new());
    loop {
        let mut header = [0u8; 9];
        stream.read_exact(&mut header).unwrap();
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let (kind, flags) = (header[3], header[4]);
        let id = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
        let mut payload = vec![0; len];
        stream.read_exact(&mut payload).unwrap();
        match kind {
            4 if flags & 1 == 0 => stream.write_all(&frame(4, 1, 0, &[])).unwrap(),
            1 if id == 1 => head = payload,
            0 if id == 1 => body.extend(payload),
            7 => panic!("GOAWAY: {payload:?}"),
            _ => {}
        }
        if id == 1 && flags & 1 == 1 {
            return (head, body);
        }
    }
}

#[test]
fn http2_with_prior_knowledge_is_served_and_guarded_alike() {
    let repo = TestRepo::complement_conference("h2");
    let served = Served::start(&repo, &["h2"]);
    let (head, body) = h2_get(&served.addr, &served.addr, "/api/h2/status");
    // `:status: 200` is entry 8 of HPACK's static table.
    assert_eq!(head.first(), Some(&0x88), "{head:?}");
    let over_h2: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(over_h2, repo.status_json("h2"));
    // The Host check reads HTTP/2's `:authority`.
    let (head, body) = h2_get(&served.addr, "evil.example", "/api/h2/status");
    assert_ne!(head.first(), Some(&0x88));
    assert!(
        String::from_utf8_lossy(&body).contains("the Host header does not name this server"),
        "{body:?}"
    );
}

#[test]
fn the_attempts_table_is_compressed_when_the_client_accepts_it() {
    let repo = TestRepo::complement_conference("packed");
    grow(&repo.dir, "packed", 2, 100, false);
    let served = Served::start(&repo, &["packed"]);
    let (_, plain) = served.get("/api/packed/attempts");
    assert_eq!(
        serde_json::from_str::<Value>(&plain)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        204
    );
    for (accepts, encoding) in [("gzip", "gzip"), ("gzip, deflate, br", "br")] {
        let mut stream = connect(&served);
        write!(
            stream,
            "GET /api/packed/attempts HTTP/1.1\r\nHost: {}\r\nAccept-Encoding: {accepts}\r\n\r\n",
            served.addr
        )
        .unwrap();
        let (status, headers, body) = read_response(&mut BufReader::new(stream)).unwrap();
        assert_eq!(status, 200);
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            header("content-encoding").as_deref(),
            Some(encoding),
            "{headers:?}"
        );
        assert!(
            body.len() * 4 < plain.len(),
            "{} of {} bytes",
            body.len(),
            plain.len()
        );
        let mut unpacked = String::new();
        if encoding == "gzip" {
            flate2::read::GzDecoder::new(&body[..])
                .read_to_string(&mut unpacked)
                .unwrap();
        } else {
            brotli::Decompressor::new(&body[..], 4096)
                .read_to_string(&mut unpacked)
                .unwrap();
        }
        assert_eq!(unpacked, plain);
    }
}

#[test]
fn a_head_sent_a_byte_a_second_is_cut_off_while_others_are_served() {
    let repo = TestRepo::complement_conference("slow");
    let served = Served::start(&repo, &["slow"]);
    let mut slow = connect(&served);
    let head = format!(
        "GET /api/slow/status HTTP/1.1\r\nHost: {}\r\nX-Slowly: {}\r\n\r\n",
        served.addr,
        "a".repeat(40)
    );
    let mut writer = slow.try_clone().unwrap();
    let started = Instant::now();
    let trickle = std::thread::spawn(move || {
        for byte in head.bytes() {
            if writer.write_all(&[byte]).is_err() {
                return false;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        true
    });
    std::thread::sleep(Duration::from_secs(2));
    // Meanwhile others are answered, on new connections.
    for _ in 0..3 {
        assert_eq!(served.get("/api/slow/status").0, 200);
    }
    let got = until_closed(&mut slow);
    let took = started.elapsed();
    assert!(took < CLOSED_WITHIN, "closed after {took:?}");
    assert!(
        !String::from_utf8_lossy(&got).contains(" 200 "),
        "the slow head was answered: {got:?}"
    );
    assert!(!trickle.join().unwrap(), "the whole head went through");
}

#[test]
fn an_oversized_head_is_refused_and_its_connection_closed() {
    let repo = TestRepo::complement_conference("big-head");
    let served = Served::start(&repo, &["big-head"]);
    // A head that fills the 16 KiB it may take without ending: 431, then the end.
    let mut stream = connect(&served);
    let start = format!(
        "GET /api/big-head/status HTTP/1.1\r\nHost: {}\r\nX-Big: ",
        served.addr
    );
    let filler = "a".repeat(16 * 1024 - start.len());
    stream
        .write_all(format!("{start}{filler}").as_bytes())
        .unwrap();
    let got = String::from_utf8_lossy(&until_closed(&mut stream)).into_owned();
    assert!(
        got.starts_with("HTTP/1.1 431 ") || got.starts_with("HTTP/1.1 400 "),
        "{got}"
    );
    // A head of 64 KiB sent at once: the connection is closed (reset, with its rest unread),
    // and what was answered, if anything, is a refusal.
    let mut stream = connect(&served);
    let head = format!("{start}{}\r\n\r\n", "a".repeat(64 * 1024));
    let _ = stream.write_all(head.as_bytes());
    let got = String::from_utf8_lossy(&until_closed(&mut stream)).into_owned();
    assert!(
        got.is_empty() || got.starts_with("HTTP/1.1 431 ") || got.starts_with("HTTP/1.1 400 "),
        "{got}"
    );
    assert_eq!(served.get("/api/big-head/status").0, 200);
}

#[test]
fn a_request_smuggled_in_a_body_is_refused_and_never_read() {
    let repo = TestRepo::complement_conference("smuggle");
    let served = Served::start(&repo, &["smuggle"]);
    let (addr, token) = (&served.addr, &served.token);
    let guard = format!("Host: {addr}\r\nOrigin: http://{addr}\r\nContent-Type: application/json");
    let steer = |text: &str| {
        let body = format!(r#"{{"text": "{text}"}}"#);
        format!(
            "POST /api/smuggle/steer?token={token} HTTP/1.1\r\n{guard}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    // Each framing makes the inner steer the next request to one reading of the lengths.
    let inner = steer("smuggled");
    let chunked = format!("0\r\n\r\n{inner}");
    let attempts = [
        format!(
            "POST /api/smuggle/steer?token={token} HTTP/1.1\r\n{guard}\r\nContent-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{chunked}",
            chunked.len()
        ),
        format!(
            "POST /api/smuggle/steer?token={token} HTTP/1.1\r\n{guard}\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n{chunked}"
        ),
        format!(
            "POST /api/smuggle/steer?token={token} HTTP/1.1\r\n{guard}\r\nContent-Length: 0\r\nContent-Length: {}\r\n\r\n{inner}",
            inner.len()
        ),
    ];
    for attempt in attempts {
        let mut stream = connect(&served);
        stream.write_all(attempt.as_bytes()).unwrap();
        let got = String::from_utf8_lossy(&until_closed(&mut stream)).into_owned();
        assert!(got.starts_with("HTTP/1.1 400 "), "{attempt}\n---\n{got}");
        assert_eq!(
            got.matches("HTTP/1.1 ").count(),
            1,
            "a second answer: {got}"
        );
    }
    assert!(
        repo.events_named("smuggle", "conference.guidance")
            .is_empty(),
        "a smuggled steer was recorded"
    );
    // The same steer, framed once, is recorded.
    let mut stream = connect(&served);
    stream.write_all(steer("framed once").as_bytes()).unwrap();
    let (status, _, body) = read_response(&mut BufReader::new(stream)).unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(repo.events_named("smuggle", "conference.guidance").len(), 1);
}

#[test]
fn two_hundred_idle_connections_leave_a_request_answered() {
    let repo = TestRepo::complement_conference("crowd");
    let served = Served::start(&repo, &["crowd"]);
    let idle: Vec<TcpStream> = (0..200).map(|_| connect(&served)).collect();
    let at = Instant::now();
    let (code, _) = served.get("/api/crowd/status");
    assert_eq!(code, 200);
    let took = at.elapsed();
    // Answered while all 200 were still open, not once the idle ones were closed.
    for stream in &idle {
        stream.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        let open =
            matches!(stream.peek(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        assert!(
            open,
            "an idle connection was closed before the request was answered ({took:?})"
        );
    }
    // They are closed later, within the bound.
    let mut first = idle.into_iter().next().unwrap();
    first.set_nonblocking(false).unwrap();
    until_closed(&mut first);
    assert!(at.elapsed() < CLOSED_WITHIN, "{:?}", at.elapsed());
}

#[test]
fn ctrl_c_lets_the_request_in_flight_finish_and_ends_the_stream_cleanly() {
    let repo = TestRepo::complement_conference("stop");
    let mut served = Served::start(&repo, &["stop"]);
    // An open event stream, as the page keeps one.
    let mut events = connect(&served);
    write!(
        events,
        "GET /api/stop/events HTTP/1.1\r\nHost: {}\r\n\r\n",
        served.addr
    )
    .unwrap();
    let mut events = BufReader::new(events);
    let mut line = String::new();
    while line.trim_end() != ": connected" {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut events, &mut line).unwrap() > 0);
    }
    // A steer whose body has not all arrived when Ctrl-C comes.
    let body = r#"{"text": "sent across the stop"}"#;
    let mut steer = connect(&served);
    write!(
        steer,
        "POST /api/stop/steer?token={} HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nContent-Length: {}\r\n\r\n{}",
        served.token,
        body.len(),
        &body[..10],
        addr = served.addr,
    )
    .unwrap();
    let status = std::thread::scope(|s| {
        let stopper = s.spawn(|| served.interrupt(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(500));
        steer.write_all(&body.as_bytes()[10..]).unwrap();
        let (status, _, said) = read_response(&mut BufReader::new(&steer)).unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&said));
        stopper.join().unwrap()
    });
    let status = status.expect("serve did not exit within 30 s of Ctrl-C");
    assert!(status.success(), "{status:?}");
    assert_eq!(repo.events_named("stop", "conference.guidance").len(), 1);
    // The stream ended with HTTP/1.1's last chunk, not a reset.
    let mut rest = String::new();
    events.read_to_string(&mut rest).unwrap();
    assert!(rest.ends_with("0\r\n\r\n"), "{rest:?}");
}
