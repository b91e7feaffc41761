//! Who may read the page and who may act on the conference. The page shows what agents wrote and
//! its actions change a running conference, so: on 127.0.0.1 anyone on this machine may read, on
//! any other address every request needs the token `serve` printed; every action (a POST) needs
//! the token and an `Origin` that is this server's own, so another site open in the same browser
//! cannot act through it (CSRF); and the `Host` must name this server, so a site whose name is
//! made to point at 127.0.0.1 (DNS rebinding) reads nothing.

use std::net::{IpAddr, SocketAddr};

use axum::http::{header, Method, Request};

/// What the server checks requests against.
#[derive(Debug, Clone)]
pub struct Access {
    pub token: String,
    /// The address the server listens on (its port is the one the `Host` must name).
    pub addr: SocketAddr,
}

/// Why a request is refused (the status and the text the client gets).
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub why: &'static str,
}

/// A new token: 32 hex digits from the kernel's random source.
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Access {
    /// Whether the server listens on the loopback address only.
    fn loopback_only(&self) -> bool {
        self.addr.ip().is_loopback()
    }

    /// The token the request carries: `?token=`, or the `X-Conference-Token` header.
    fn carries_token<B>(&self, request: &Request<B>) -> bool {
        let query = super::http::query(request.uri());
        let given = query
            .get("token")
            .map(String::as_str)
            .or_else(|| header_text(request, "x-conference-token"));
        given.is_some_and(|t| same(t.as_bytes(), self.token.as_bytes()))
    }

    /// The `Host` names this server: its own address, or a loopback name, with its port.
    fn host_is_ours(&self, host: Option<&str>) -> bool {
        let Some(host) = host else {
            return false;
        };
        let port = self.addr.port();
        let mut names = vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ];
        match self.addr.ip() {
            IpAddr::V4(ip) if !ip.is_unspecified() => names.push(format!("{ip}:{port}")),
            IpAddr::V6(ip) if !ip.is_unspecified() => names.push(format!("[{ip}]:{port}")),
            // Listening on every address: any host name reaches it, and the token guards it.
            _ => return !self.loopback_only(),
        }
        names.iter().any(|n| n.eq_ignore_ascii_case(host))
    }

    /// Checks a request before it is routed: None lets it through.
    pub fn check<B>(&self, request: &Request<B>) -> Option<Refusal> {
        let host = host(request);
        if !self.host_is_ours(host) {
            return Some(Refusal {
                status: 403,
                why: "the Host header does not name this server",
            });
        }
        let action = request.method() == Method::POST;
        if (action || !self.loopback_only()) && !self.carries_token(request) {
            return Some(Refusal {
                status: 401,
                why: "this request needs the token `git conference serve` printed (?token=…)",
            });
        }
        if action {
            let host = host.unwrap_or_default();
            let origin = header_text(request, "origin");
            if origin != Some(format!("http://{host}").as_str()) {
                return Some(Refusal {
                    status: 403,
                    why: "an action must come from this server's own page (Origin)",
                });
            }
        }
        None
    }
}

/// The host a request names: HTTP/2's `:authority` (hyper puts it in the URI), else the
/// `Host` header of HTTP/1.1.
fn host<B>(request: &Request<B>) -> Option<&str> {
    match request.uri().authority() {
        Some(authority) => Some(authority.as_str()),
        None => header_text(request, header::HOST.as_str()),
    }
}

/// A header's value, when it is text.
fn header_text<'r, B>(request: &'r Request<B>, name: &str) -> Option<&'r str> {
    request.headers().get(name)?.to_str().ok()
}

/// Compares two byte strings in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, target: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut request = Request::builder().method(method).uri(target);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        request.body(()).unwrap()
    }

    #[test]
    fn reads_on_loopback_are_free_actions_need_token_and_origin() {
        let access = Access {
            token: "t0k".into(),
            addr: "127.0.0.1:8765".parse().unwrap(),
        };
        let host = ("host", "127.0.0.1:8765");
        assert_eq!(access.check(&request("GET", "/", &[host])), None);
        assert_eq!(
            access
                .check(&request("GET", "/", &[("host", "evil.example:8765")]))
                .map(|r| r.status),
            Some(403)
        );
        let post = |target: &str, origin: &str| {
            access
                .check(&request("POST", target, &[host, ("origin", origin)]))
                .map(|r| r.status)
        };
        assert_eq!(post("/api/x/stop", "http://127.0.0.1:8765"), Some(401));
        assert_eq!(
            post("/api/x/stop?token=bad", "http://127.0.0.1:8765"),
            Some(401)
        );
        assert_eq!(
            post("/api/x/stop?token=t0k", "http://evil.example"),
            Some(403)
        );
        assert_eq!(post("/api/x/stop?token=t0k", "http://127.0.0.1:8765"), None);
        // HTTP/2 names the host in `:authority`, which hyper puts in the URI.
        let h2 = |authority: &str| {
            let uri = format!("http://{authority}/api/x/stop?token=t0k");
            let origin = ("origin", "http://127.0.0.1:8765");
            access
                .check(&request("POST", &uri, &[origin]))
                .map(|r| r.status)
        };
        assert_eq!(h2("127.0.0.1:8765"), None);
        assert_eq!(h2("evil.example:8765"), Some(403));
    }

    #[test]
    fn another_address_needs_the_token_for_every_request() {
        let access = Access {
            token: "t0k".into(),
            addr: "0.0.0.0:9000".parse().unwrap(),
        };
        let host = ("host", "192.0.2.7:9000");
        assert_eq!(
            access
                .check(&request("GET", "/", &[host]))
                .map(|r| r.status),
            Some(401)
        );
        assert_eq!(access.check(&request("GET", "/?token=t0k", &[host])), None);
        assert!(new_token().unwrap().len() == 32);
    }
}
