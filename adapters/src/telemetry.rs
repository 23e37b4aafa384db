//! Logging (OPS-2): `tracing` to stderr, filtered by `RUST_LOG` (default `info`), plain text
//! (colour only on a terminal) or one JSON object a line (`--log-format json`).

use std::io::IsTerminal;

/// How log lines are written.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines; ANSI colour only when stderr is a terminal.
    #[default]
    Text,
    /// One JSON object per line (for log shippers).
    Json,
}

/// What every process filters when `RUST_LOG` is not set. PostgreSQL's notices (for example
/// "relation already exists, skipping" from an idempotent migration at every start, logged by
/// sqlx at INFO, and its WARNING notices at WARN) are the database's business, not an
/// operator's: they are off.
pub const DEFAULT_FILTER: &str = "info,sqlx::postgres::notice=off";

/// The directive that keeps PostgreSQL's notices out of the log whatever `RUST_LOG` says,
/// unless it names them itself (`RUST_LOG=info,sqlx::postgres::notice=info` shows them).
pub const NOTICES_OFF: &str = "sqlx::postgres::notice=off";

/// The filter `RUST_LOG=value` means here: the value, plus [`NOTICES_OFF`] unless the value
/// names the notices' target.
#[must_use]
pub fn filter_of(value: &str) -> String {
    if value.contains("sqlx::postgres::notice") {
        value.to_owned()
    } else {
        format!("{value},{NOTICES_OFF}")
    }
}

/// Install the subscriber once. A `RUST_LOG` that does not parse is an error naming it (not a
/// silent fall-back to `info`).
pub fn init(format: LogFormat) -> Result<(), String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(value) if !value.trim().is_empty() => tracing_subscriber::EnvFilter::builder()
            .parse(filter_of(value.trim()))
            .map_err(|e| format!("RUST_LOG={value:?} is not a log filter: {e}"))?,
        Ok(_) | Err(std::env::VarError::NotPresent) => {
            tracing_subscriber::EnvFilter::new(DEFAULT_FILTER)
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err("RUST_LOG is not valid UTF-8".to_owned())
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    // A second call (tests) finds a subscriber installed: nothing to do.
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.event_format(JsonLines).try_init(),
    };
    Ok(())
}

/// OPS-2: one JSON object a line: `timestamp`, `level`, `message` and the event's fields, each
/// a JSON value: numbers and booleans as such, a field logged with `?` (Rust `Debug` text) as
/// the JSON it reads as (`["/a","/b"]` an array, `Some(3)` 3, `None` null, `[A, B]`
/// `["A","B"]`), text otherwise.
struct JsonLines;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for JsonLines
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_subscriber::fmt::time::FormatTime;
        let mut timestamp = String::new();
        tracing_subscriber::fmt::time::SystemTime.format_time(
            &mut tracing_subscriber::fmt::format::Writer::new(&mut timestamp),
        )?;
        let mut fields = serde_json::Map::new();
        fields.insert("timestamp".into(), timestamp.into());
        fields.insert(
            "level".into(),
            event.metadata().level().as_str().to_owned().into(),
        );
        event.record(&mut JsonFields(&mut fields));
        let line = serde_json::to_string(&fields).map_err(|_| std::fmt::Error)?;
        writeln!(writer, "{line}")
    }
}

struct JsonFields<'a>(&'a mut serde_json::Map<String, serde_json::Value>);

impl JsonFields<'_> {
    /// A field, unless it is the `log` bridge's own (`log.target`, `log.file`, ...).
    fn put(&mut self, field: &tracing::field::Field, value: serde_json::Value) {
        if !field.name().starts_with("log.") {
            self.0.insert(field.name().to_owned(), value);
        }
    }
}

impl tracing::field::Visit for JsonFields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        let value = if field.name() == "message" {
            text.into()
        } else {
            debug_value(&text)
        };
        self.put(field, value);
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.put(field, value.into());
    }

    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.put(field, value.into());
    }

    fn record_error(
        &mut self,
        field: &tracing::field::Field,
        value: &(dyn std::error::Error + 'static),
    ) {
        self.put(field, value.to_string().into());
    }
}

/// The JSON value of a field's `Debug` text (see [`JsonLines`]). Bounded by the text: each
/// level of nesting consumes its brackets.
fn debug_value(text: &str) -> serde_json::Value {
    let text = text.trim();
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        return value;
    }
    if text == "None" {
        return serde_json::Value::Null;
    }
    if let Some(inner) = text.strip_prefix("Some(").and_then(|t| t.strip_suffix(')')) {
        return debug_value(inner);
    }
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        if let Some(items) = split_top_level(inner) {
            return serde_json::Value::Array(items.iter().map(|i| debug_value(i)).collect());
        }
    }
    text.into()
}

/// `inner` split at its top-level `, ` (not inside brackets, parentheses, braces or quotes);
/// `None` when they do not balance.
fn split_top_level(inner: &str) -> Option<Vec<&str>> {
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    let mut items = Vec::new();
    let (mut depth, mut quoted, mut escaped, mut start) = (0i32, false, false, 0usize);
    for (i, c) in inner.char_indices() {
        if quoted {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
            }
            ',' if depth == 0 => {
                items.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 || quoted {
        return None;
    }
    items.push(inner[start..].trim());
    Some(items)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ops_2_debug_text_becomes_json_values() {
        use serde_json::json;
        assert_eq!(debug_value(r#"["/a", "/b"]"#), json!(["/a", "/b"]));
        assert_eq!(debug_value("Some(3)"), json!(3));
        assert_eq!(debug_value("None"), json!(null));
        assert_eq!(debug_value("[Busy, Idle]"), json!(["Busy", "Idle"]));
        assert_eq!(debug_value("[Some(1), None]"), json!([1, null]));
        assert_eq!(debug_value("Emergency"), json!("Emergency"));
        assert_eq!(
            debug_value("Thresholds { a: 1 }"),
            json!("Thresholds { a: 1 }")
        );
        assert_eq!(debug_value("[(1, 2)"), json!("[(1, 2)"));
    }

    use super::*;

    #[test]
    fn ops_2_postgres_notices_are_off_whatever_rust_log_says_unless_it_names_them() {
        assert!(DEFAULT_FILTER.ends_with("sqlx::postgres::notice=off"));
        assert_eq!(filter_of("info"), "info,sqlx::postgres::notice=off");
        assert_eq!(filter_of("debug"), "debug,sqlx::postgres::notice=off");
        assert_eq!(
            filter_of("info,sqlx::postgres::notice=info"),
            "info,sqlx::postgres::notice=info"
        );
        for value in ["info", "warn,switchyard_adapters=debug"] {
            assert!(tracing_subscriber::EnvFilter::builder()
                .parse(filter_of(value))
                .is_ok());
        }
    }
}
