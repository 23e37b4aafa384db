//! SIM-1: the simulated network. A connection is two one-way [`Pipe`]s; a listener is a
//! queue of accepted connections in the [`World`]. Bytes written at `t` are readable at
//! `t + delay` if the path is open then; while it is held (a dark host, a partition) they wait,
//! as TCP retransmits them, and flow once it heals. A crash resets the pipes (the peer reads
//! `ECONNRESET`); dropping one end is a FIN for its peer.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

use super::{current_host, world, World};

/// Bytes one direction of a connection holds unread before its writer waits (a socket's
/// send and receive buffers together).
const PIPE_BYTES: usize = 256 * 1024;
/// Connections a listener queues before a connect waits (the backlog).
const BACKLOG: usize = 1024;
/// The first port handed to a connecting socket (ports below it are for listeners).
const EPHEMERAL_FROM: u16 = 40_000;

/// A connection waiting in a listener's queue: the server's end and the client's address.
pub(crate) type Queued = (SimStream, SocketAddr);

/// One direction of a connection.
#[derive(Debug)]
pub(crate) struct Pipe {
    pub(crate) from: IpAddr,
    pub(crate) to: IpAddr,
    state: Mutex<PipeState>,
}

#[derive(Debug, Default)]
struct PipeState {
    /// (readable at, bytes) in order.
    segments: VecDeque<(Instant, Vec<u8>)>,
    queued: usize,
    /// The writer closed (or dropped) its end: EOF after the segments.
    fin: bool,
    /// The reader dropped its end: writes fail.
    reader_gone: bool,
    /// Reset by a crash: reads and writes fail.
    reset: bool,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
}

impl Pipe {
    fn new(from: IpAddr, to: IpAddr) -> Arc<Pipe> {
        Arc::new(Pipe {
            from,
            to,
            state: Mutex::new(PipeState::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, PipeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn reset(&self) {
        self.state().reset = true;
    }

    /// Wakes both ends (a fault changed: held bytes may move, a reset must be seen).
    pub(crate) fn wake(&self) {
        let (r, w) = {
            let mut st = self.state();
            (st.read_waker.take(), st.write_waker.take())
        };
        if let Some(r) = r {
            r.wake();
        }
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// One end of a simulated connection.
#[derive(Debug)]
pub struct SimStream {
    local: SocketAddr,
    peer: SocketAddr,
    tx: Arc<Pipe>,
    rx: Arc<Pipe>,
    world: Arc<World>,
    timer: Option<Pin<Box<Sleep>>>,
}

impl SimStream {
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    #[must_use]
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Writes what fits now without waiting (the accept loop's one-line refusal).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        let mut st = self.tx.state();
        if st.reset || st.reader_gone {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        let n = buf.len().min(PIPE_BYTES.saturating_sub(st.queued));
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        push(&self.world, &self.tx, &mut st, &buf[..n]);
        let waker = st.read_waker.take();
        drop(st);
        if let Some(w) = waker {
            w.wake();
        }
        Ok(n)
    }
}

fn push(world: &World, pipe: &Pipe, st: &mut PipeState, bytes: &[u8]) {
    let delay = Duration::from_millis(world.delay_ms(pipe.from, pipe.to));
    let mut at = Instant::now() + delay;
    if let Some((last, _)) = st.segments.back() {
        at = at.max(*last);
    }
    st.segments.push_back((at, bytes.to_vec()));
    st.queued += bytes.len();
}

impl AsyncRead for SimStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            let mut st = this.rx.state();
            if st.reset {
                return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
            }
            let Some((at, _)) = st.segments.front() else {
                if st.fin {
                    return Poll::Ready(Ok(()));
                }
                st.read_waker = Some(cx.waker().clone());
                return Poll::Pending;
            };
            let at = *at;
            if !this.world.passable(this.rx.from, this.rx.to) {
                // Held: the world wakes every pipe when a fault changes.
                st.read_waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            if at > Instant::now() {
                st.read_waker = Some(cx.waker().clone());
                drop(st);
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                continue;
            }
            let Some((_, bytes)) = st.segments.front_mut() else {
                continue;
            };
            let n = bytes.len().min(buf.remaining());
            buf.put_slice(&bytes[..n]);
            if n == bytes.len() {
                st.segments.pop_front();
            } else {
                bytes.drain(..n);
            }
            st.queued -= n;
            let waker = st.write_waker.take();
            drop(st);
            if let Some(w) = waker {
                w.wake();
            }
            return Poll::Ready(Ok(()));
        }
    }
}

impl AsyncWrite for SimStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut st = self.tx.state();
        if st.reset {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        if st.reader_gone || st.fin {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let room = PIPE_BYTES.saturating_sub(st.queued);
        if room == 0 {
            st.write_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(room);
        push(&self.world, &self.tx, &mut st, &buf[..n]);
        let waker = st.read_waker.take();
        drop(st);
        if let Some(w) = waker {
            w.wake();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.tx.state().fin = true;
        self.tx.wake();
        Poll::Ready(Ok(()))
    }
}

impl Drop for SimStream {
    fn drop(&mut self) {
        self.tx.state().fin = true;
        self.tx.wake();
        self.rx.state().reader_gone = true;
        self.rx.wake();
    }
}

/// A simulated listening socket.
#[derive(Debug)]
pub struct SimListener {
    addr: SocketAddr,
    queue: tokio::sync::Mutex<mpsc::Receiver<Queued>>,
    world: Arc<World>,
}

impl SimListener {
    /// Listens on `addr` (port 0: one the world picks) on the calling task's host.
    pub fn bind(addr: SocketAddr) -> io::Result<SimListener> {
        let world = world().ok_or_else(|| io::Error::other("no simulation on this thread"))?;
        let host = current_host().unwrap_or(addr.ip());
        let ip = if addr.ip().is_unspecified() {
            host
        } else {
            addr.ip()
        };
        if ip != host {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("{ip} is not this simulated host's address ({host})"),
            ));
        }
        let (tx, queue) = mpsc::channel(BACKLOG);
        let mut inner = world.lock();
        let port = if addr.port() == 0 {
            next_port(&mut inner.next_port)
        } else {
            addr.port()
        };
        let addr = SocketAddr::new(ip, port);
        if inner.listeners.contains_key(&addr) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{addr} is in use"),
            ));
        }
        inner.listeners.insert(addr, tx);
        drop(inner);
        Ok(SimListener {
            addr,
            queue: tokio::sync::Mutex::new(queue),
            world,
        })
    }

    pub async fn accept(&self) -> io::Result<(SimStream, SocketAddr)> {
        self.queue
            .lock()
            .await
            .recv()
            .await
            .ok_or_else(|| io::Error::other("listener closed by a crash"))
    }

    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for SimListener {
    fn drop(&mut self) {
        // Closed first, so the world's sender for this listener reads closed; an open sender
        // at this address belongs to a newer listener (a restart) and stays.
        self.queue.get_mut().close();
        let mut inner = self.world.lock();
        if inner
            .listeners
            .get(&self.addr)
            .is_some_and(mpsc::Sender::is_closed)
        {
            inner.listeners.remove(&self.addr);
        }
    }
}

fn next_port(next: &mut u16) -> u16 {
    let port = *next;
    *next = if port == u16::MAX {
        EPHEMERAL_FROM
    } else {
        port + 1
    };
    port
}

/// Connects from the calling task's host to `to`. A closed port is refused at once; a dark
/// host or a held path makes the connect wait until it heals (the caller bounds it, as a
/// real connect's SYN retries are bounded by the caller's timeout).
pub async fn connect(to: SocketAddr) -> io::Result<SimStream> {
    let world = world().ok_or_else(|| io::Error::other("no simulation on this thread"))?;
    let from =
        current_host().ok_or_else(|| io::Error::other("connect outside a simulated host"))?;
    loop {
        let changed = world.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if world.passable(from, to.ip()) && world.passable(to.ip(), from) {
            let listener = world.lock().listeners.get(&to).cloned();
            let Some(listener) = listener else {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    format!("connection to {to} refused"),
                ));
            };
            let port = next_port(&mut world.lock().next_port);
            let local = SocketAddr::new(from, port);
            let up = Pipe::new(from, to.ip());
            let down = Pipe::new(to.ip(), from);
            {
                let mut inner = world.lock();
                inner.pipes.push(Arc::downgrade(&up));
                inner.pipes.push(Arc::downgrade(&down));
                if inner.pipes.len() > 2 * inner.pipes_after_prune + 256 {
                    inner.pipes.retain(|p| p.strong_count() > 0);
                    inner.pipes_after_prune = inner.pipes.len();
                }
            }
            let client = SimStream {
                local,
                peer: to,
                tx: up.clone(),
                rx: down.clone(),
                world: world.clone(),
                timer: None,
            };
            let server = SimStream {
                local: to,
                peer: local,
                tx: down,
                rx: up,
                world: world.clone(),
                timer: None,
            };
            // The handshake's round trip.
            let rtt = world.delay_ms(from, to.ip()) * 2;
            if rtt > 0 {
                tokio::time::sleep(Duration::from_millis(rtt)).await;
            }
            return match listener.send((server, local)).await {
                Ok(()) => Ok(client),
                Err(_) => Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    format!("connection to {to} refused"),
                )),
            };
        }
        changed.await;
    }
}
