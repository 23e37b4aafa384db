//! FO-X4 on real sockets: the channel counts its relay alive only on a pong answering its own
//! heartbeat, and declares it lost `heartbeat_timeout` after the last such pong (a deadline,
//! not a check at the next heartbeat tick). The relay keeps answering pings, and its idle close
//! spares a client whose heartbeat is slower than the relay's idle timeout.
//!
//! All three run on the simulator's clock (SIM-1): two simulated hosts, paused time.
//!
//! Red before the fix: the relay's own pings and other frames kept a channel whose pings never
//! arrived "alive" (the first test waited in vain), and a lost relay was only noticed at the
//! next heartbeat tick (the second test, with a tick far past the timeout, waited in vain).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use switchyard_adapters::failover::channel::{
    self, BackoffConfig, Channel, ChannelConfig, ChannelReport,
};
use switchyard_adapters::failover::relay::{RelayConfig, RelayHandle, RELAY_LIMITS};
use switchyard_adapters::net;
use switchyard_adapters::sim::World;
use switchyard_core::failover::{ChannelState, RelayUrl};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// Long enough that a test waiting for a report that should come never hangs CI, far past
/// every timeout used below.
const EVENTUALLY: Duration = Duration::from_secs(10);

fn config(heartbeat_ms: u64, timeout_ms: u64) -> ChannelConfig {
    ChannelConfig {
        heartbeat: Duration::from_millis(heartbeat_ms),
        heartbeat_timeout: Duration::from_millis(timeout_ms),
        connect_timeout: Duration::from_millis(500),
        backoff: BackoffConfig {
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_millis(400),
            factor: 1.6,
            jitter: false,
        },
    }
}

const RELAY_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1));
const CLIENT_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1));

/// SIM-1: these tests wait only for time to pass (heartbeats, deadlines, idle timeouts), so
/// they run in the simulated world on paused time: the relay and the client on two simulated
/// hosts, the seconds simulated, the assertions unchanged.
fn simulated_world() -> (Arc<World>, switchyard_adapters::sim::Installed) {
    let world = World::new(1, 1_800_000_000_000);
    let installed = world.install();
    (world, installed)
}

/// Opens a channel to `url` from the client's host.
async fn open_channel(
    world: &World,
    url: RelayUrl,
    config: ChannelConfig,
    tx: mpsc::Sender<ChannelReport>,
) -> Channel {
    world
        .run_on(CLIENT_IP, async move {
            let stream = channel::open(&url, Duration::from_secs(2))
                .await
                .expect("open");
            Channel::spawn(url, stream, config, tx)
        })
        .await
        .expect("the client's task")
}

/// A "relay" whose bytes reach the client but which never hears it: it sends transport pings
/// and a text frame every 50 ms and reads (so its WebSocket layer works) but never answers a
/// heartbeat, as with client-to-relay packets dropped. With `answer_first`, it answers the
/// first heartbeat only.
async fn deaf_relay(world: &World, answer_first: bool) -> SocketAddr {
    let addr = SocketAddr::new(RELAY_IP, 9000);
    let listener = world
        .run_on(RELAY_IP, async move { net::bind(addr).await })
        .await
        .expect("the relay's task")
        .expect("bind");
    world.run_on(RELAY_IP, async move {
        let Ok((socket, _)) = listener.accept().await else {
            return;
        };
        let Ok(ws) = tokio_tungstenite::accept_async(socket).await else {
            return;
        };
        let (mut write, mut read) = ws.split();
        let mut answered = !answer_first;
        let mut every = tokio::time::interval(Duration::from_millis(50));
        loop {
            tokio::select! {
                _ = every.tick() => {
                    if write.send(Message::Ping(Default::default())).await.is_err()
                        || write.send(Message::Text("news".into())).await.is_err()
                    {
                        return;
                    }
                }
                frame = read.next() => match frame {
                    Some(Ok(Message::Text(text))) if text.as_str() == "ping" && !answered => {
                        answered = true;
                        let _ = write.send(Message::Text("pong".into())).await;
                    }
                    Some(Ok(_)) => {}
                    _ => {
                        // Keep the socket open (no FIN from us): silence, not a close.
                        std::future::pending::<()>().await;
                    }
                },
            }
        }
    });
    addr
}

async fn next_report(rx: &mut mpsc::Receiver<ChannelReport>) -> Option<ChannelReport> {
    tokio::time::timeout(EVENTUALLY, rx.recv())
        .await
        .ok()
        .flatten()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn sim_1_fo_x4_relay_frames_without_a_pong_to_our_ping_do_not_keep_the_channel_alive() {
    let (world, _installed) = simulated_world();
    let addr = deaf_relay(&world, false).await;
    let url = RelayUrl::new(format!("ws://{addr}/r"));
    let (tx, mut rx) = mpsc::channel(16);
    let started = Instant::now();
    let channel = open_channel(&world, url, config(100, 400), tx).await;
    let first = next_report(&mut rx).await.expect("a report");
    assert_eq!(first.state, ChannelState::Healthy);
    let lost = next_report(&mut rx)
        .await
        .expect("the channel must be lost: nothing answered its pings");
    assert_eq!(lost.state, ChannelState::Backoff { attempts: 0 });
    // Not before the timeout: the channel gave the relay the whole of it.
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(channel.heartbeat().pongs(), 0);
    channel.close();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn sim_1_fo_x4_the_channel_is_lost_at_the_timeout_after_the_last_pong_not_at_the_next_tick() {
    // One pong, then silence; the next heartbeat tick is a minute away. Checked at the next
    // tick the loss would come after a minute; the deadline timer says it 500 ms after the pong.
    let (world, _installed) = simulated_world();
    let addr = deaf_relay(&world, true).await;
    let url = RelayUrl::new(format!("ws://{addr}/r"));
    let (tx, mut rx) = mpsc::channel(16);
    let started = Instant::now();
    let channel = open_channel(&world, url, config(60_000, 500), tx).await;
    assert_eq!(
        next_report(&mut rx).await.map(|r| r.state),
        Some(ChannelState::Healthy)
    );
    let lost = next_report(&mut rx)
        .await
        .expect("lost at the deadline, long before the next tick");
    assert_eq!(lost.state, ChannelState::Backoff { attempts: 0 });
    assert_eq!(
        channel.heartbeat().pongs(),
        1,
        "the first ping was answered"
    );
    // At the deadline, not at the next tick a minute away (simulated time).
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    channel.close();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn sim_1_fo_x4_a_relay_answers_pings_and_its_idle_close_spares_a_client_with_a_slower_heartbeat(
) {
    // The relay closes a channel it hears nothing on for 600 ms; the client pings every second.
    // Its WebSocket layer answers the relay's transport pings (sent after a third of the idle
    // timeout of silence), so the relay keeps hearing it: any heartbeat value is compatible.
    let (world, _installed) = simulated_world();
    let relay = world
        .run_on(RELAY_IP, async move {
            RelayHandle::start(RelayConfig {
                listen: SocketAddr::new(RELAY_IP, 9000),
                paths: vec!["/r".to_owned()],
                limits: switchyard_adapters::serve::ServerLimits {
                    ws_idle_timeout: Duration::from_millis(600),
                    ..RELAY_LIMITS
                },
            })
            .await
        })
        .await
        .expect("the relay's task")
        .expect("relay");
    let url = RelayUrl::new(format!("ws://{}/r", relay.local_addr()));
    let (tx, mut rx) = mpsc::channel(16);
    let channel = open_channel(&world, url, config(1_000, 3_000), tx).await;
    let started = Instant::now();
    assert_eq!(
        next_report(&mut rx).await.map(|r| r.state),
        Some(ChannelState::Healthy)
    );
    // Four idle timeouts and three heartbeats later: still one channel, no report of a loss.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(rx.try_recv().is_err(), "the channel was lost");
    assert_eq!(relay.server_stats().ws_idle_closed, 0);
    assert_eq!(relay.open_channels(), 1);
    let heartbeat = channel.heartbeat();
    assert!(heartbeat.pongs() >= 2, "pongs: {}", heartbeat.pongs());
    assert!(!heartbeat.slow());
    // Simulated time: the clock moved on by the seconds waited, and no more.
    assert!(started.elapsed() >= Duration::from_millis(2_500));
    assert!(started.elapsed() < Duration::from_millis(2_600));
    channel.close();
    relay.stop().await;
}
