//! Walks the failover machine through the seed's scene 4 with the production thresholds and
//! prints every decision, log line and the counters. Simulated time: no sockets, no waiting.
//!
//! Host A serves two candidate URLs, host B one; the client starts on A.
//! stop A -> switch to B (both A URLs cool) -> restore A -> stop B -> the one-hop exemption
//! brings the client back to A within the deadline, marked as exempt, from the health path.
#![allow(clippy::print_stdout)]

use switchyard_core::failover::*;
use switchyard_core::MonoMs;

const A1: &str = "wss://relay-a.example/dshs-relay";
const A2: &str = "wss://relay-direct-a.example/dshs-relay";
const B: &str = "wss://relay-b.example/dshs-relay";

struct Scene {
    sup: Supervisor,
    now: MonoMs,
    host_a_up: bool,
    host_b_up: bool,
    attempts: u32,
}

impl Scene {
    fn up(&self, url: &RelayUrl) -> bool {
        if url.as_str() == B {
            self.host_b_up
        } else {
            self.host_a_up
        }
    }

    fn drain(&mut self) {
        while let Some(output) = self.sup.poll_output() {
            match output {
                Output::Action(action) => println!("  t={:>7}  action  {action:?}", self.now),
                Output::Event(event) => println!("  t={:>7}  log     {}", self.now, render(&event)),
            }
        }
    }

    /// One `CHECK_MS` period: the channel reports, the tick runs, opens resolve.
    fn period(&mut self) {
        self.now = self.now.plus_ms(self.sup.thresholds().check_ms);
        if let Some(current) = self.sup.current().cloned() {
            let state = if self.up(&current) {
                self.attempts = 0;
                ChannelState::Healthy
            } else {
                self.attempts += 1;
                ChannelState::Backoff {
                    attempts: self.attempts,
                }
            };
            self.sup.handle_channel_state(self.now, &current, state);
        }
        self.sup.handle_tick(self.now);
        self.drain();
        while let Some(open) = self.sup.open_in_flight().cloned() {
            if self.up(open.url()) {
                self.sup.handle_open_succeeded(self.now, open.url());
            } else {
                self.sup
                    .handle_open_failed(self.now, open.url(), OpenFailure::Failed);
            }
            self.drain();
        }
    }

    fn run_until_on(&mut self, url: &str, limit_ms: u64) -> u64 {
        let started = self.now;
        while self.sup.current().map(RelayUrl::as_str) != Some(url) {
            assert!(
                self.now.since_ms(started) <= limit_ms,
                "no switch to {url} within {limit_ms} ms"
            );
            self.period();
        }
        self.now.since_ms(started)
    }
}

fn main() {
    let thresholds = Thresholds::default();
    println!("scene 4 with the production thresholds: {thresholds:?}\n");
    let mut scene = Scene {
        sup: Supervisor::new(thresholds, MonoMs::ZERO),
        now: MonoMs::ZERO,
        host_a_up: true,
        host_b_up: true,
        attempts: 0,
    };
    let list: Vec<RelayUrl> = [A1, A2, B].into_iter().map(RelayUrl::new).collect();
    scene
        .sup
        .handle_directory(scene.now, &list, DirectorySource::Signed);
    scene.drain();
    scene.sup.handle_open_succeeded(scene.now, &list[0]);
    scene.drain();

    println!("\n1. stop host A (both A URLs die)");
    scene.host_a_up = false;
    let took = scene.run_until_on(B, thresholds.deadline_ms);
    println!(
        "   -> on B after {took} ms (deadline {} ms)",
        thresholds.deadline_ms
    );

    println!("\n2. restore host A; 30 s pass on B");
    scene.host_a_up = true;
    for _ in 0..15 {
        scene.period();
    }

    println!("\n3. stop host B: every other candidate is still cooling");
    scene.host_b_up = false;
    let took = scene.run_until_on(A1, thresholds.deadline_ms);
    println!(
        "   -> back on A after {took} ms (deadline {} ms)",
        thresholds.deadline_ms
    );

    let stats = scene.sup.stats(scene.now);
    println!("\ncounters: {:?}", stats.counters);
    for row in &stats.cooldown {
        println!(
            "cooldown: {} kind={} left={} ms",
            row.url,
            row.kind.as_str(),
            row.left_ms
        );
    }
    assert_eq!(
        stats.counters.exempt_switches, 1,
        "the return to A used the exemption"
    );
    println!("\nscene 4: PASS");
}
