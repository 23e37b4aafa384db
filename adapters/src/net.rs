//! The network seam (SIM-1). Every socket the drivers open goes through here: without the
//! `sim` cargo feature (every production build) these are tokio's own types and functions;
//! with it, a [`TcpListener`] or [`TcpStream`] is tokio's or the simulation's
//! ([`crate::sim::net`]), chosen when it is made by whether the thread runs a simulation, so
//! the same test binary can hold real-socket tests and simulations.

use std::io;
use std::net::SocketAddr;

use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Response;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::WebSocketStream;

#[cfg(not(feature = "sim"))]
pub use tokio::net::{TcpListener, TcpStream};

#[cfg(feature = "sim")]
pub use either::{TcpListener, TcpStream};

/// Connects to `host:port` (a name is resolved as tokio does; a simulation takes addresses
/// only).
pub async fn connect(host: &str, port: u16) -> io::Result<TcpStream> {
    #[cfg(feature = "sim")]
    if crate::sim::active() {
        let ip: std::net::IpAddr = host.trim_matches(['[', ']']).parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{host}: a simulation connects to addresses, not names"),
            )
        })?;
        return crate::sim::net::connect(SocketAddr::new(ip, port))
            .await
            .map(TcpStream::Sim);
    }
    let stream = tokio::net::TcpStream::connect((host, port)).await?;
    // As tokio-tungstenite's `connect_async` does: small frames go out at once.
    stream.set_nodelay(true)?;
    #[cfg(feature = "sim")]
    return Ok(TcpStream::Real(stream));
    #[cfg(not(feature = "sim"))]
    Ok(stream)
}

/// Listens on `addr`.
pub async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    #[cfg(feature = "sim")]
    if crate::sim::active() {
        return crate::sim::net::SimListener::bind(addr).map(TcpListener::Sim);
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    #[cfg(feature = "sim")]
    return Ok(TcpListener::Real(listener));
    #[cfg(not(feature = "sim"))]
    Ok(listener)
}

/// Opens a WebSocket client connection over [`connect`] (what `connect_async_with_config`
/// does, with the socket from this seam). `ws://` only: no TLS in these drivers.
pub async fn ws_connect<R: IntoClientRequest + Unpin>(
    request: R,
    config: Option<WebSocketConfig>,
) -> Result<(WebSocketStream<TcpStream>, Response), WsError> {
    use tokio_tungstenite::tungstenite::error::UrlError;
    let request = request.into_client_request()?;
    let uri = request.uri();
    match uri.scheme_str() {
        Some("ws") => {}
        Some("wss") => return Err(WsError::Url(UrlError::TlsFeatureNotEnabled)),
        _ => return Err(WsError::Url(UrlError::UnsupportedUrlScheme)),
    }
    let host = uri
        .host()
        .ok_or(WsError::Url(UrlError::NoHostName))?
        .to_owned();
    let port = uri.port_u16().unwrap_or(80);
    let stream = connect(&host, port).await.map_err(WsError::Io)?;
    tokio_tungstenite::client_async_with_config(request, stream, config).await
}

#[cfg(feature = "sim")]
mod either {
    use std::io;
    use std::net::SocketAddr;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    use crate::sim::net::{SimListener, SimStream};

    /// A listener on the OS or in the simulation.
    #[derive(Debug)]
    pub enum TcpListener {
        Real(tokio::net::TcpListener),
        Sim(SimListener),
    }

    impl TcpListener {
        pub async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
            super::bind(addr).await
        }

        pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
            match self {
                TcpListener::Real(l) => l.accept().await.map(|(s, a)| (TcpStream::Real(s), a)),
                TcpListener::Sim(l) => l.accept().await.map(|(s, a)| (TcpStream::Sim(s), a)),
            }
        }

        pub fn local_addr(&self) -> io::Result<SocketAddr> {
            match self {
                TcpListener::Real(l) => l.local_addr(),
                TcpListener::Sim(l) => Ok(l.local_addr()),
            }
        }
    }

    /// A connection on the OS or in the simulation.
    #[derive(Debug)]
    pub enum TcpStream {
        Real(tokio::net::TcpStream),
        Sim(SimStream),
    }

    impl TcpStream {
        pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
            match self {
                TcpStream::Real(s) => s.try_write(buf),
                TcpStream::Sim(s) => s.try_write(buf),
            }
        }

        pub fn peer_addr(&self) -> io::Result<SocketAddr> {
            match self {
                TcpStream::Real(s) => s.peer_addr(),
                TcpStream::Sim(s) => Ok(s.peer_addr()),
            }
        }

        pub fn local_addr(&self) -> io::Result<SocketAddr> {
            match self {
                TcpStream::Real(s) => s.local_addr(),
                TcpStream::Sim(s) => Ok(s.local_addr()),
            }
        }
    }

    impl AsyncRead for TcpStream {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            match self.get_mut() {
                TcpStream::Real(s) => Pin::new(s).poll_read(cx, buf),
                TcpStream::Sim(s) => Pin::new(s).poll_read(cx, buf),
            }
        }
    }

    impl AsyncWrite for TcpStream {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            match self.get_mut() {
                TcpStream::Real(s) => Pin::new(s).poll_write(cx, buf),
                TcpStream::Sim(s) => Pin::new(s).poll_write(cx, buf),
            }
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            match self.get_mut() {
                TcpStream::Real(s) => Pin::new(s).poll_flush(cx),
                TcpStream::Sim(s) => Pin::new(s).poll_flush(cx),
            }
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            match self.get_mut() {
                TcpStream::Real(s) => Pin::new(s).poll_shutdown(cx),
                TcpStream::Sim(s) => Pin::new(s).poll_shutdown(cx),
            }
        }
    }
}
