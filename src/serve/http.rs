//! Just enough HTTP/1.1 for a page on a second screen: one request per connection (then
//! `Connection: close`), a bounded head and body, and responses written whole or as a stream of
//! Server-Sent Events. Written here rather than pulled in as a framework: the server answers a
//! handful of GETs and three POSTs, and every byte it accepts is bounded and checked below.

use std::collections::HashMap;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most a request's head (request line and headers) may take.
const MAX_HEAD: usize = 16 * 1024;
/// The most a request's body may take (an action's JSON).
const MAX_BODY: usize = 64 * 1024;

/// One request as read from the connection.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The path, percent-decoded, without the query.
    pub path: String,
    /// The query's parameters, percent-decoded.
    pub query: HashMap<String, String>,
    /// Header names lower-cased.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// Reads one request; None when the connection closed or sent something that is not one.
pub async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end]).ok()?;
    let mut request = parse_head(head)?;
    let length: usize = request
        .header("content-length")
        .map(|l| l.trim().parse().ok())
        .unwrap_or(Some(0))?;
    if length > MAX_BODY {
        return None;
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    request.body = body;
    Some(request)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The request line and headers.
fn parse_head(head: &str) -> Option<Request> {
    let mut lines = head.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let method = parts.next()?.to_string();
    let target = parts.next()?;
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((target, ""));
    let mut headers = HashMap::new();
    for line in lines {
        let (name, value) = line.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let query = raw_query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((decode(k)?, decode(v)?))
        })
        .collect();
    Some(Request {
        method,
        path: decode(raw_path)?,
        query,
        headers,
        body: Vec::new(),
    })
}

/// Percent-decoding (`+` is a space in a query); None for a malformed escape or bytes that are
/// not UTF-8.
pub fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A whole response.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// The nonce the page's own script carries: the only script the browser will run.
    pub nonce: Option<String>,
}

impl Response {
    pub fn json(value: &serde_json::Value) -> Response {
        Response {
            status: 200,
            content_type: "application/json",
            body: serde_json::to_vec(value).unwrap_or_default(),
            nonce: None,
        }
    }
    /// JSON already written as text.
    pub fn json_text(body: String) -> Response {
        Response {
            status: 200,
            content_type: "application/json",
            body: body.into_bytes(),
            nonce: None,
        }
    }
    pub fn text(status: u16, text: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: text.into().into_bytes(),
            nonce: None,
        }
    }
    pub fn html(body: String, nonce: String) -> Response {
        Response {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: body.into_bytes(),
            nonce: Some(nonce),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Internal Server Error",
    }
}

/// Headers every response carries: nothing is cached, nothing is sniffed, no address leaks.
const SAFETY_HEADERS: &str = "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
Referrer-Policy: no-referrer\r\n";

/// The content security policy: the browser runs no script but the page's own (its nonce), reaches
/// only this server, and lets no other site frame the page. Were some agent's text ever to
/// become markup, nothing in it would run.
fn security_policy(nonce: Option<&str>) -> String {
    let scripts = nonce.map_or("'none'".to_string(), |n| format!("'nonce-{n}'"));
    format!(
        "Content-Security-Policy: default-src 'none'; script-src {scripts}; style-src 'unsafe-inline'; \
         connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'\r\n"
    )
}

/// Writes `response` and closes the connection.
pub async fn write_response(stream: &mut TcpStream, response: Response) {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{SAFETY_HEADERS}{}Connection: close\r\n\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len(),
        security_policy(response.nonce.as_deref())
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&response.body).await;
    let _ = stream.shutdown().await;
}

/// Starts a stream of Server-Sent Events; false when the client is gone.
pub async fn start_events(stream: &mut TcpStream) -> bool {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{SAFETY_HEADERS}Connection: close\r\n\r\n: connected\n\n"
    );
    stream.write_all(head.as_bytes()).await.is_ok()
}

/// One Server-Sent Event (`data` is one line of JSON); false when the client is gone.
pub async fn send_event(stream: &mut TcpStream, id: u64, kind: &str, data: &str) -> bool {
    let text = format!("id: {id}\nevent: {kind}\ndata: {data}\n\n");
    stream.write_all(text.as_bytes()).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_head_is_read_with_its_decoded_path_and_query() {
        let r = parse_head(
            "GET /api/a%20b/attempts?since=3&token=x+y HTTP/1.1\r\nHost: h:1\r\nOrigin: http://h:1",
        )
        .unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/api/a b/attempts");
        assert_eq!(r.query["since"], "3");
        assert_eq!(r.query["token"], "x y");
        assert_eq!(r.header("host"), Some("h:1"));
        assert!(parse_head("GET /x SPDY/3").is_none());
        assert_eq!(decode("%2e%2e%2f"), Some("../".into()));
        assert_eq!(decode("%zz"), None);
        assert_eq!(decode("%ff"), None);
    }
}
