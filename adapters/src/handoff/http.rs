//! A small bounded HTTP/1.1 client (hyper) for director -> cell requests and the resolve path:
//! one connection per request, a deadline over connect + request + body, a body size bound.

use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;

use super::proto::MAX_FRAME_BYTES;

#[derive(Debug, Clone, thiserror::Error)]
pub enum HttpError {
    #[error("bad URL {0:?}")]
    BadUrl(String),
    /// This build speaks plain HTTP only: TLS terminates at a reverse proxy in front of a cell.
    #[error("{0:?}: this build does not speak TLS (https); give the plain http:// address behind the TLS-terminating proxy")]
    NoTls(String),
    #[error("request to {0} timed out")]
    Timeout(String),
    #[error("transport error talking to {url}: {detail}")]
    Transport { url: String, detail: String },
}

#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: StatusCode,
    /// The answer's headers (HO-L3: the director reads the cell's `Date`).
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

/// `base` is `http://host:port`; `path` starts with `/`.
pub async fn request(
    method: Method,
    base: &str,
    path_and_query: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
    timeout: Duration,
) -> Result<HttpResponse, HttpError> {
    let url = format!("{}{}", base.trim_end_matches('/'), path_and_query);
    match tokio::time::timeout(timeout, send(method, &url, headers, body)).await {
        Ok(r) => r,
        Err(_) => Err(HttpError::Timeout(url)),
    }
}

async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> Result<HttpResponse, HttpError> {
    let uri: Uri = url.parse().map_err(|_| HttpError::BadUrl(url.to_owned()))?;
    if uri.scheme_str() == Some("https") {
        return Err(HttpError::NoTls(url.to_owned()));
    }
    if uri.scheme_str() != Some("http") {
        return Err(HttpError::BadUrl(url.to_owned()));
    }
    let host = uri
        .host()
        .ok_or_else(|| HttpError::BadUrl(url.to_owned()))?;
    let port = uri.port_u16().unwrap_or(80);
    let transport = |e: &dyn std::fmt::Display| HttpError::Transport {
        url: url.to_owned(),
        detail: e.to_string(),
    };
    let stream = crate::net::connect(host, port)
        .await
        .map_err(|e| transport(&e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| transport(&e))?;
    // The connection task ends with the request (or when this future is dropped).
    let conn_task = crate::machine::spawn(async move {
        let _ = conn.await;
    });
    let mut req = Request::builder()
        .method(method)
        .uri(uri.path_and_query().map_or("/", |p| p.as_str()))
        .header(hyper::header::HOST, format!("{host}:{port}"))
        .header(hyper::header::CONTENT_TYPE, "application/json");
    for (k, v) in headers {
        req = req.header(*k, v.as_str());
    }
    let req = req
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| transport(&e))?;
    let result = async {
        let resp = sender.send_request(req).await.map_err(|e| transport(&e))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = Limited::new(resp.into_body(), MAX_FRAME_BYTES)
            .collect()
            .await
            .map_err(|e| transport(&*e))?
            .to_bytes();
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }
    .await;
    conn_task.abort();
    result
}
