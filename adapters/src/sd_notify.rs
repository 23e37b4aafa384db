//! OPS-1 / OPS-2 under systemd (`Type=notify`, `WatchdogSec=`): the service manager's
//! notification protocol, implemented here with the standard library (it is one datagram of
//! `KEY=VALUE` lines to the unix socket named by `NOTIFY_SOCKET`, a path or, with a leading
//! `@`, an abstract name). Without `NOTIFY_SOCKET` every call does nothing, so the same binary
//! runs unchanged outside systemd. See `adapters/systemd/` and docs/OPERATIONS.md.
//!
//! - [`ready`]: `READY=1` once the process serves (a relay or cell listening, a director
//!   whose probes listen, a failover client with its first channel up).
//! - [`spawn_watchdog`]: when systemd set `WATCHDOG_USEC` (for this process), `WATCHDOG=1` at
//!   half that interval from a runtime task, so a wedged runtime stops feeding it and systemd
//!   restarts the unit.
//! - [`stopping`]: `STOPPING=1` when a graceful stop begins.
//! - [`status`]: `STATUS=…`, e.g. the failover client's readiness each time it changes
//!   (FO-H-3: `not ready: … since …`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The environment variable naming the socket.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

static READY_SENT: AtomicBool = AtomicBool::new(false);

/// Send `state` (newline-separated `KEY=VALUE` lines) to the service manager. `Ok(false)`:
/// not under a service manager (no `NOTIFY_SOCKET`).
pub fn notify(state: &str) -> Result<bool, String> {
    let Some(socket) = std::env::var_os(NOTIFY_SOCKET) else {
        return Ok(false);
    };
    send(&socket.to_string_lossy(), state).map(|()| true)
}

#[cfg(target_os = "linux")]
fn send(socket: &str, state: &str) -> Result<(), String> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let bad = |e: std::io::Error| format!("{NOTIFY_SOCKET}={socket}: {e}");
    let address = match socket.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes()).map_err(bad)?,
        None if socket.starts_with('/') => SocketAddr::from_pathname(socket).map_err(bad)?,
        None => {
            return Err(format!(
                "{NOTIFY_SOCKET}={socket}: neither an absolute path nor an @abstract name"
            ))
        }
    };
    let datagram = UnixDatagram::unbound().map_err(bad)?;
    datagram
        .send_to_addr(state.as_bytes(), &address)
        .map_err(bad)?;
    Ok(())
}

#[cfg(all(unix, not(target_os = "linux")))]
fn send(socket: &str, state: &str) -> Result<(), String> {
    let datagram = std::os::unix::net::UnixDatagram::unbound()
        .map_err(|e| format!("{NOTIFY_SOCKET}={socket}: {e}"))?;
    datagram
        .send_to(state.as_bytes(), socket)
        .map_err(|e| format!("{NOTIFY_SOCKET}={socket}: {e}"))?;
    Ok(())
}

#[cfg(not(unix))]
fn send(socket: &str, _state: &str) -> Result<(), String> {
    Err(format!(
        "{NOTIFY_SOCKET}={socket}: no unix sockets on this platform"
    ))
}

/// Log a notification that could not be sent (once per kind: it is not retried).
fn sent_or_warn(what: &str, result: Result<bool, String>) {
    if let Err(e) = result {
        tracing::warn!(error = %e, "systemd notification {what} not sent");
    }
}

/// `READY=1`, once per process (later calls do nothing).
pub fn ready(status: &str) {
    if READY_SENT.swap(true, Ordering::SeqCst) {
        return;
    }
    let result = notify(&format!("READY=1\nSTATUS={status}"));
    if matches!(result, Ok(true)) {
        tracing::info!(status, "told systemd: ready");
    }
    sent_or_warn("READY=1", result);
}

/// `STATUS=<text>` (one line: newlines become spaces): what `systemctl status` shows. FO-H-3:
/// the failover client sends its readiness here each time it changes.
pub fn status(text: &str) {
    let line: String = text
        .chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect();
    sent_or_warn("STATUS=", notify(&format!("STATUS={line}")));
}

/// `STOPPING=1`: a graceful stop has begun.
pub fn stopping() {
    sent_or_warn("STOPPING=1", notify("STOPPING=1"));
}

/// The watchdog interval systemd asks this process to keep (`WATCHDOG_USEC`, and
/// `WATCHDOG_PID` naming this process when it is set).
#[must_use]
pub fn watchdog_interval() -> Option<Duration> {
    std::env::var_os(NOTIFY_SOCKET)?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
            return None;
        }
    }
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.trim().parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// Feed the watchdog (`WATCHDOG=1`) at half its interval, from a task of the current
/// runtime, when systemd asked for one. Returns the feeding period.
pub fn spawn_watchdog() -> Option<Duration> {
    let every = watchdog_interval()? / 2;
    let every = every.max(Duration::from_millis(10));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        let mut failing = false;
        loop {
            tick.tick().await;
            match notify("WATCHDOG=1") {
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "systemd watchdog not fed");
                }
                Err(_) => {}
                Ok(_) => failing = false,
            }
        }
    });
    tracing::info!(
        every_ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX),
        "feeding the systemd watchdog"
    );
    Some(every)
}

/// `READY=1` once `ready` first holds (polled every 100 ms), and the watchdog fed meanwhile:
/// for a process whose readiness is its `/readyz` verdict.
pub fn ready_when<F>(status: &'static str, ready: F)
where
    F: Fn() -> bool + Send + 'static,
{
    if std::env::var_os(NOTIFY_SOCKET).is_none() {
        return;
    }
    tokio::spawn(async move {
        loop {
            if ready() {
                self::ready(status);
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}
