//! OPS-2: `GET /healthz` (the process answers), `GET /readyz` (it should get traffic: 503 with
//! the reason otherwise) and `GET /metrics` for every server: the Prometheus text format
//! (version 0.0.4) by default, OpenMetrics 1.0 text when the `Accept` header asks for
//! `application/openmetrics-text` (as a Prometheus server does).
//!
//! The counters stay where they live (the relay's, the cell's, the director's, the listener's
//! `ServerStats`); a scrape takes a snapshot and encodes it with `prometheus-client`, so there
//! is no second copy of any count to drift. Every metric is named `switchyard_<what>`; the list
//! with what each means is in `docs/OPERATIONS.md`.

use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use crate::serve::ServerStats;

pub const HEALTHZ_PATH: &str = "/healthz";
pub const READYZ_PATH: &str = "/readyz";
pub const METRICS_PATH: &str = "/metrics";

/// A labelled counter family: label pairs to counter.
type LabelledFamily = Family<Vec<(String, String)>, Counter>;
/// A labelled gauge family: label pairs to gauge.
type GaugeFamily = Family<Vec<(String, String)>, Gauge>;

/// One value of a scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Without the `switchyard_` prefix; counters without `_total` (the encoder adds it).
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub value: u64,
    /// Label pairs (`{requirement="FO-D1"}`); samples of one name with labels form one family.
    pub labels: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    /// A gauge that may be negative (its value here; `Sample::value` is unused).
    SignedGauge(i64),
}

#[must_use]
pub fn counter(name: impl Into<String>, help: impl Into<String>, value: u64) -> Sample {
    Sample {
        name: name.into(),
        help: help.into(),
        kind: Kind::Counter,
        value,
        labels: Vec::new(),
    }
}

/// A counter with labels: the samples of one `name` are encoded as one family.
#[must_use]
pub fn labelled_counter(
    name: impl Into<String>,
    help: impl Into<String>,
    labels: Vec<(String, String)>,
    value: u64,
) -> Sample {
    Sample {
        labels,
        ..counter(name, help, value)
    }
}

#[must_use]
pub fn gauge(name: impl Into<String>, help: impl Into<String>, value: u64) -> Sample {
    Sample {
        name: name.into(),
        help: help.into(),
        kind: Kind::Gauge,
        value,
        labels: Vec::new(),
    }
}

/// A gauge with labels, possibly negative: the samples of one `name` are encoded as one
/// family.
#[must_use]
pub fn labelled_gauge(
    name: impl Into<String>,
    help: impl Into<String>,
    labels: Vec<(String, String)>,
    value: i64,
) -> Sample {
    Sample {
        name: name.into(),
        help: help.into(),
        kind: Kind::SignedGauge(value),
        value: 0,
        labels,
    }
}

/// The exposition formats `/metrics` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text 0.0.4 (`text/plain; version=0.0.4`): the default.
    Prometheus,
    /// OpenMetrics 1.0 text (`application/openmetrics-text; version=1.0.0`), ends `# EOF`.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` (with a non-zero quality), else Prometheus text.
    #[must_use]
    pub fn of_accept(accept: Option<&str>) -> Format {
        let asks = accept.is_some_and(|accept| {
            accept.split(',').any(|range| {
                let mut parts = range.split(';').map(str::trim);
                let media = parts.next().unwrap_or_default();
                let zero = parts.any(|p| {
                    p.strip_prefix("q=")
                        .is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q <= 0.0))
                });
                media.eq_ignore_ascii_case("application/openmetrics-text") && !zero
            })
        });
        if asks {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The Prometheus text exposition (0.0.4) of `samples`.
#[must_use]
pub fn encode(samples: &[Sample]) -> String {
    encode_as(samples, Format::Prometheus)
}

/// The exposition of `samples` in `format`.
#[must_use]
pub fn encode_as(samples: &[Sample], format: Format) -> String {
    let mut registry = Registry::with_prefix("switchyard");
    // Labelled counters, one family per name (first sample's help), in the order first seen.
    let mut families: Vec<(&str, &str, LabelledFamily)> = Vec::new();
    let mut gauges: Vec<(&str, &str, GaugeFamily)> = Vec::new();
    for s in samples.iter().filter(|s| !s.labels.is_empty()) {
        if let Kind::SignedGauge(v) = s.kind {
            let family = match gauges.iter().position(|(name, _, _)| *name == s.name) {
                Some(i) => &gauges[i].2,
                None => {
                    gauges.push((&s.name, &s.help, Family::default()));
                    &gauges[gauges.len() - 1].2
                }
            };
            family.get_or_create(&s.labels).set(v);
            continue;
        }
        let family = match families.iter().position(|(name, _, _)| *name == s.name) {
            Some(i) => &families[i].2,
            None => {
                families.push((&s.name, &s.help, Family::default()));
                &families[families.len() - 1].2
            }
        };
        family.get_or_create(&s.labels).inc_by(s.value);
    }
    for (name, help, family) in families {
        registry.register(name, help, family);
    }
    for (name, help, family) in gauges {
        registry.register(name, help, family);
    }
    for s in samples.iter().filter(|s| s.labels.is_empty()) {
        match s.kind {
            Kind::Counter => {
                registry.register(&s.name, &s.help, ConstCounter::new(s.value));
            }
            Kind::Gauge => registry.register(
                &s.name,
                &s.help,
                ConstGauge::new(i64::try_from(s.value).unwrap_or(i64::MAX)),
            ),
            Kind::SignedGauge(v) => registry.register(&s.name, &s.help, ConstGauge::new(v)),
        }
    }
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = match format {
        Format::Prometheus => {
            prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)
        }
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut text, &registry),
    };
    text
}

/// The listener's counters (SEC-3), shared by every server.
#[must_use]
pub fn server_samples(s: &ServerStats) -> Vec<Sample> {
    vec![
        gauge(
            "server_connections_open",
            "TCP connections held now",
            s.connections_open,
        ),
        counter(
            "server_connections_admitted",
            "TCP connections admitted",
            s.connections_admitted,
        ),
        counter(
            "server_refused_server_full",
            "connections refused: the server held --max-connections",
            s.refused_server_full,
        ),
        counter(
            "server_refused_peer_full",
            "connections refused: the peer address held --max-connections-per-peer",
            s.refused_peer_full,
        ),
        counter(
            "server_connection_errors",
            "connections closed on an error (request head not read in time, malformed request, reset)",
            s.connection_errors,
        ),
        counter(
            "server_ws_idle_closed",
            "WebSockets closed for silence (--ws-idle-timeout-ms)",
            s.ws_idle_closed,
        ),
        counter(
            "server_ws_protocol_closed",
            "WebSockets closed on a protocol error (a message over --ws-max-message-bytes included)",
            s.ws_protocol_closed,
        ),
    ]
}

/// Every numeric field of a flat counters struct as `<prefix>_<field>` counters (the field
/// docs in `docs/OPERATIONS.md` say what each counts); nested objects are skipped.
pub fn counters_of<T: serde::Serialize>(prefix: &str, what: &str, value: &T) -> Vec<Sample> {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(value) else {
        return Vec::new();
    };
    fields
        .iter()
        .filter_map(|(field, v)| {
            v.as_u64().map(|n| {
                counter(
                    format!("{prefix}_{field}"),
                    format!("{what}: {}", field.replace('_', " ")),
                    n,
                )
            })
        })
        .collect()
}

/// What a server tells the probes.
pub trait Probe: Send + Sync + 'static {
    /// `Err(reason)` while the process should get no traffic (starting, stopping, lost its
    /// lease or its store).
    fn ready(&self) -> Result<(), String>;
    fn samples(&self) -> Vec<Sample>;
}

/// The three routes, for merging into a server's router (or serving alone).
pub fn routes(probe: Arc<dyn Probe>) -> Router {
    let ready = probe.clone();
    let metrics = probe;
    Router::new()
        .route(HEALTHZ_PATH, get(|| async { "ok\n" }))
        .route(
            READYZ_PATH,
            get(move || {
                let verdict = ready.ready();
                async move {
                    match verdict {
                        Ok(()) => (StatusCode::OK, "ready\n".to_owned()).into_response(),
                        Err(why) => (
                            StatusCode::SERVICE_UNAVAILABLE,
                            format!("not ready: {why}\n"),
                        )
                            .into_response(),
                    }
                }
            }),
        )
        .route(
            METRICS_PATH,
            get(move |headers: axum::http::HeaderMap| {
                let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
                let format = Format::of_accept(accept);
                let text = encode_as(&metrics.samples(), format);
                async move { metrics_response(format, text) }
            }),
        )
}

/// The probes on a listener of their own (the director, and the failover client when asked:
/// processes without a server of their own), with the default limits (SEC-3). Stops when
/// `stop` says stop.
pub async fn serve_alone(
    name: &'static str,
    listen: std::net::SocketAddr,
    probe: Arc<dyn Probe>,
    stop: crate::stop::StopListener,
) -> Result<std::net::SocketAddr, String> {
    let listener = crate::net::bind(listen)
        .await
        .map_err(|e| format!("--metrics-listen {listen}: cannot listen: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("--metrics-listen {listen}: {e}"))?;
    let server = crate::serve::Server::new(name, crate::serve::DEFAULT_LIMITS);
    let app = server.layer(routes(probe));
    crate::machine::spawn(server.run(listener, app, stop));
    tracing::info!(server = name, metrics_addr = %addr, "probes listening (/healthz, /readyz, /metrics)");
    Ok(addr)
}

fn metrics_response(format: Format, text: String) -> Response {
    ([(header::CONTENT_TYPE, format.content_type())], text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_2_metrics_format_follows_the_accept_header() {
        assert_eq!(Format::of_accept(None), Format::Prometheus);
        assert_eq!(Format::of_accept(Some("*/*")), Format::Prometheus);
        assert_eq!(Format::of_accept(Some("text/plain")), Format::Prometheus);
        let prometheus_server = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(
            Format::of_accept(Some(prometheus_server)),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::of_accept(Some("application/openmetrics-text;q=0, text/plain")),
            Format::Prometheus
        );
        let samples = [counter("cell_clients_attached", "clients attached", 3)];
        let text = encode(&samples);
        assert!(
            text.contains("switchyard_cell_clients_attached_total 3"),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn ops_2_samples_encode_as_openmetrics_text_with_the_prefix() {
        let text = encode_as(
            &[
                counter("cell_clients_attached", "clients attached", 3),
                gauge("server_connections_open", "open", 2),
            ],
            Format::OpenMetrics,
        );
        assert!(text.contains("# HELP switchyard_cell_clients_attached clients attached"));
        assert!(text.contains("# TYPE switchyard_cell_clients_attached counter"));
        assert!(
            text.contains("switchyard_cell_clients_attached_total 3"),
            "{text}"
        );
        assert!(
            text.contains("switchyard_server_connections_open 2"),
            "{text}"
        );
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
    }
}
