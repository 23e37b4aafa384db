//! FO-X4: a relay host that fails without a word, on loopback and without privileges.
//!
//! A [`FaultHost`] is a userspace TCP forwarder in front of one relay: it listens on one or more
//! ports of its own loopback address (a drill host's "IP", e.g. `127.0.0.2`) and forwards each
//! connection to the relay. Told a [`Fault`], it misbehaves the way a real host does when it
//! drops packets instead of refusing them:
//!
//! - [`Fault::Dark`] (power loss, a partition, a frozen VM, a firewall that drops): no byte
//!   moves in either direction and nothing is closed (no RST, no FIN): a live connection just
//!   goes silent. A new connection is accepted (the listener is the forwarder's, not the
//!   relay's) but never forwarded, so an open hangs until its timeout, as a SYN to a dark host
//!   does.
//! - [`Fault::OneWay`]: bytes from the client are read and dropped; bytes from the relay are
//!   still delivered. A new connection is forwarded, but its upgrade request never arrives.
//! - [`Fault::Lossy`]: every chunk is delayed (`delay` each way) and, with probability
//!   `stall_percent`, held a further `stall` to `2 x stall` (what a lost segment costs once
//!   TCP retransmits it: loopback never loses, so the loss is emulated by its effect on
//!   timing). Nothing is dropped or reordered. `tc qdisc ... netem delay 400ms loss 30%` in a
//!   network namespace is the privileged equivalent.
//!
//! The randomness is a fixed-seed xorshift per connection, so a drill run is repeatable.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// What a host does to the bytes it should move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forwards everything at once.
    None,
    /// Moves nothing either way, closes nothing; new connections hang.
    Dark,
    /// Drops client-to-relay bytes; relay-to-client bytes still arrive.
    OneWay,
    /// Delays every chunk, and stalls some.
    Lossy {
        delay: Duration,
        stall: Duration,
        stall_percent: u8,
    },
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::Dark => "dark",
            Fault::OneWay => "one-way",
            Fault::Lossy { .. } => "lossy",
        }
    }
}

/// A forwarder for one relay host: its listeners, its connections and its fault switch.
/// Dropping it closes everything.
#[derive(Debug)]
pub struct FaultHost {
    addrs: Vec<SocketAddr>,
    fault: watch::Sender<Fault>,
    tasks: JoinSet<()>,
}

impl FaultHost {
    /// Listens on `ports` ports of `ip` (each picked by the system) and forwards each to
    /// `relay`.
    pub async fn start(ip: IpAddr, ports: usize, relay: SocketAddr) -> std::io::Result<FaultHost> {
        let (fault, fault_rx) = watch::channel(Fault::None);
        let mut tasks = JoinSet::new();
        let mut addrs = Vec::with_capacity(ports);
        for _ in 0..ports {
            let listener = TcpListener::bind(SocketAddr::new(ip, 0)).await?;
            addrs.push(listener.local_addr()?);
            tasks.spawn(serve(listener, relay, fault_rx.clone()));
        }
        Ok(FaultHost {
            addrs,
            fault,
            tasks,
        })
    }

    /// The addresses clients connect to, one per port asked for.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Applies `fault` to every connection, live or new, from now on.
    pub fn set(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }

    pub fn fault(&self) -> Fault {
        *self.fault.borrow()
    }

    /// Closes the listeners and every connection.
    pub async fn stop(mut self) {
        self.tasks.shutdown().await;
    }
}

async fn serve(listener: TcpListener, relay: SocketAddr, fault: watch::Receiver<Fault>) {
    let mut connections = JoinSet::new();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(relay.port());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            // Reap finished connections as they end.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let Ok((client, _)) = accepted else {
            continue;
        };
        seed = seed.wrapping_add(0x2545_f491_4f6c_dd1d);
        connections.spawn(connection(client, relay, fault.clone(), seed));
    }
}

async fn connection(
    client: TcpStream,
    relay: SocketAddr,
    mut fault: watch::Receiver<Fault>,
    seed: u64,
) {
    // A dark host: the connection is accepted (here) but nothing ever reaches the relay.
    if *fault.borrow_and_update() == Fault::Dark {
        let _held = client;
        std::future::pending::<()>().await;
        return;
    }
    let Ok(upstream) = TcpStream::connect(relay).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (relay_read, relay_write) = upstream.into_split();
    tokio::join!(
        pump(client_read, relay_write, fault.clone(), true, seed),
        pump(relay_read, client_write, fault, false, seed.rotate_left(17)),
    );
}

/// Moves bytes from `from` to `to` as the fault says, until either side ends.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut fault: watch::Receiver<Fault>,
    client_to_relay: bool,
    seed: u64,
) {
    let mut rng = XorShift(seed | 1);
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        // Dark: read nothing (the sender's buffers fill as a dark host's would), close nothing.
        if wait_while_dark(&mut fault).await.is_err() {
            return;
        }
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let read_at = Instant::now();
        // A chunk read just before the host went dark is held until it comes back.
        if wait_while_dark(&mut fault).await.is_err() {
            return;
        }
        let now = *fault.borrow();
        match now {
            Fault::OneWay if client_to_relay => continue,
            Fault::Lossy {
                delay,
                stall,
                stall_percent,
            } => {
                let mut due = read_at + delay;
                if rng.percent() < u64::from(stall_percent) {
                    let extra = stall.as_millis() as u64;
                    due += Duration::from_millis(extra + rng.next() % (extra + 1));
                }
                tokio::time::sleep_until(due).await;
            }
            _ => {}
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

/// Returns once the host is not dark; `Err` when the host is gone.
async fn wait_while_dark(fault: &mut watch::Receiver<Fault>) -> Result<(), ()> {
    while *fault.borrow_and_update() == Fault::Dark {
        if fault.changed().await.is_err() {
            return Err(());
        }
    }
    Ok(())
}

/// A small fixed-seed generator (xorshift64): the drill's stalls are repeatable.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn percent(&mut self) -> u64 {
        self.next() % 100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buffer = [0u8; 1024];
                    while let Ok(n) = socket.read(&mut buffer).await {
                        if n == 0 || socket.write_all(&buffer[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn round_trip(socket: &mut TcpStream, within: Duration) -> Option<Duration> {
        let started = Instant::now();
        socket.write_all(b"x").await.ok()?;
        let mut byte = [0u8; 1];
        match tokio::time::timeout(within, socket.read_exact(&mut byte)).await {
            Ok(Ok(_)) => Some(started.elapsed()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn fo_x4_a_dark_host_moves_nothing_closes_nothing_and_hangs_new_connections() {
        let echo = echo_server().await;
        let host = FaultHost::start("127.0.0.2".parse().expect("ip"), 1, echo)
            .await
            .expect("listen on 127.0.0.2");
        let addr = host.addrs()[0];
        assert_eq!(addr.ip().to_string(), "127.0.0.2");
        let mut live = TcpStream::connect(addr).await.expect("connect");
        assert!(round_trip(&mut live, Duration::from_secs(2))
            .await
            .is_some());
        host.set(Fault::Dark);
        // Silent, not closed: the read neither returns bytes nor end-of-stream.
        assert_eq!(
            round_trip(&mut live, Duration::from_millis(300)).await,
            None
        );
        // A new connection is accepted by the forwarder but nothing reaches the relay.
        let mut fresh = TcpStream::connect(addr).await.expect("accepted");
        assert_eq!(
            round_trip(&mut fresh, Duration::from_millis(300)).await,
            None
        );
        // Back: the byte held while dark arrives, nothing was closed.
        host.set(Fault::None);
        let mut byte = [0u8; 2];
        let echoed = tokio::time::timeout(Duration::from_secs(2), live.read(&mut byte)).await;
        assert!(matches!(echoed, Ok(Ok(n)) if n >= 1), "{echoed:?}");
        host.stop().await;
    }

    #[tokio::test]
    async fn fo_x4_one_way_drops_client_bytes_and_delivers_relay_bytes() {
        // A "relay" that writes on its own every 50 ms and counts what it reads.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let relay = listener.local_addr().expect("addr");
        let (heard_tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let (socket, _) = listener.accept().await.expect("accept");
            let (mut read, mut write) = socket.into_split();
            tokio::spawn(async move {
                let mut buffer = [0u8; 64];
                while let Ok(n) = read.read(&mut buffer).await {
                    if n == 0 {
                        return;
                    }
                    let _ = heard_tx.send(n);
                }
            });
            while write.write_all(b"r").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let host = FaultHost::start("127.0.0.3".parse().expect("ip"), 1, relay)
            .await
            .expect("listen on 127.0.0.3");
        let mut client = TcpStream::connect(host.addrs()[0]).await.expect("connect");
        client.write_all(b"before").await.expect("write");
        assert!(heard.recv().await.is_some());
        host.set(Fault::OneWay);
        tokio::time::sleep(Duration::from_millis(100)).await;
        while heard.try_recv().is_ok() {}
        client.write_all(b"after").await.expect("write");
        let mut byte = [0u8; 1];
        // The relay's bytes still come...
        tokio::time::timeout(Duration::from_secs(2), client.read_exact(&mut byte))
            .await
            .expect("relay bytes arrive")
            .expect("read");
        tokio::time::sleep(Duration::from_millis(200)).await;
        // ...ours do not.
        assert!(heard.try_recv().is_err());
        host.stop().await;
    }

    #[tokio::test]
    async fn fo_x4_lossy_delays_every_chunk_each_way() {
        let echo = echo_server().await;
        let host = FaultHost::start("127.0.0.2".parse().expect("ip"), 1, echo)
            .await
            .expect("listen");
        let mut socket = TcpStream::connect(host.addrs()[0]).await.expect("connect");
        host.set(Fault::Lossy {
            delay: Duration::from_millis(100),
            stall: Duration::from_millis(50),
            stall_percent: 0,
        });
        let rtt = round_trip(&mut socket, Duration::from_secs(3))
            .await
            .expect("delivered, late");
        assert!(rtt >= Duration::from_millis(200), "{rtt:?}");
        host.stop().await;
    }
}
