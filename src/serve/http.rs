//! What every answer of the server is made of: a status, a type and a body, with the headers
//! every response carries (nothing cached, nothing sniffed, no script but the page's own); and
//! the query's parameters, percent-decoded. HTTP itself (framing, keep-alive, HTTP/2, limits,
//! timeouts) is hyper's, set up in [`super::conn`].

use std::collections::HashMap;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::IntoResponse;

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

/// The query's parameters, percent-decoded; a malformed one is left out.
pub fn query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((decode(k)?, decode(v)?))
        })
        .collect()
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

impl IntoResponse for Response {
    fn into_response(self) -> axum::response::Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, self.body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        if let Ok(policy) = HeaderValue::from_str(&security_policy(self.nonce.as_deref())) {
            headers.insert(header::CONTENT_SECURITY_POLICY, policy);
        }
        response
    }
}

/// Adds the headers every response carries: nothing is cached, nothing is sniffed, no address
/// leaks; a response without a policy of its own (a refusal hyper or the router made) gets
/// the one that runs no script.
pub fn add_safety_headers(headers: &mut HeaderMap) {
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        if let Ok(policy) = HeaderValue::from_str(&security_policy(None)) {
            headers.insert(header::CONTENT_SECURITY_POLICY, policy);
        }
    }
}

/// The content security policy: the browser runs no script but the page's own (its nonce), reaches
/// only this server, and lets no other site frame the page. Were some agent's text ever to
/// become markup, nothing in it would run.
fn security_policy(nonce: Option<&str>) -> String {
    let scripts = nonce.map_or("'none'".to_string(), |n| format!("'nonce-{n}'"));
    format!(
        "default-src 'none'; script-src {scripts}; style-src 'unsafe-inline'; \
         connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_read_decoded() {
        let uri: Uri = "/api/a%20b/attempts?since=3&token=x+y&bad=%zz"
            .parse()
            .unwrap();
        let q = query(&uri);
        assert_eq!(q["since"], "3");
        assert_eq!(q["token"], "x y");
        assert!(!q.contains_key("bad"));
        assert_eq!(decode("%2e%2e%2f"), Some("../".into()));
        assert_eq!(decode("%zz"), None);
        assert_eq!(decode("%ff"), None);
    }
}
