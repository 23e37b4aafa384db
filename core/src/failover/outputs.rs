//! The queue of decided outputs, drained by the caller after every input.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::types::Output;

/// Outputs held inline. One input decides at most two (a tick: the failed probe round and the
/// no-candidate line; an open result: the skip line and the next open, or the close and the
/// switch line), so the outputs of an input never touch the heap, also on a machine that was
/// just cloned (whose spill queue has no capacity yet).
const INLINE: usize = 2;

/// A FIFO: up to `INLINE` outputs in a ring inside the machine, the rest (a caller that has not
/// drained) in a spill queue behind them.
#[derive(Debug, Clone, Default)]
pub(super) struct Outputs {
    ring: [Option<Output>; INLINE],
    /// Where the oldest ring output is.
    head: usize,
    ring_len: usize,
    /// Only used while the ring is full or already spilled: every spilled output is newer than
    /// every ring output.
    spill: VecDeque<Output>,
}

impl Outputs {
    pub(super) fn len(&self) -> usize {
        self.ring_len + self.spill.len()
    }

    #[inline]
    pub(super) fn push(&mut self, output: Output) {
        self.push_with(|| output);
    }

    /// `push(make())`, with the output built straight into its ring slot when it goes there.
    #[inline(always)]
    pub(super) fn push_with(&mut self, make: impl FnOnce() -> Output) {
        if self.ring_len < INLINE && self.spill.is_empty() {
            let slot = &mut self.ring[(self.head + self.ring_len) % INLINE];
            assert!(slot.is_none(), "a free ring slot is empty");
            slot.get_or_insert_with(make);
            self.ring_len += 1;
        } else {
            self.spill.push_back(make());
        }
    }

    #[inline]
    pub(super) fn pop(&mut self) -> Option<Output> {
        if self.ring_len == 0 {
            return self.spill.pop_front();
        }
        let output = self.ring[self.head].take();
        crate::invariant!(output.is_some(), "ring_len counts the ring's outputs");
        self.head = (self.head + 1) % INLINE;
        self.ring_len -= 1;
        output
    }

    fn iter(&self) -> impl Iterator<Item = &Output> {
        (0..self.ring_len)
            .filter_map(|i| self.ring[(self.head + i) % INLINE].as_ref())
            .chain(self.spill.iter())
    }
}

// Equality, hashing and serialisation see the sequence, not where it is stored.

impl PartialEq for Outputs {
    fn eq(&self, other: &Outputs) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Outputs {}

impl Hash for Outputs {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.len().hash(state);
        self.iter().for_each(|output| output.hash(state));
    }
}

impl Serialize for Outputs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Outputs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Outputs, D::Error> {
        let mut outputs = Outputs::default();
        for output in Vec::<Output>::deserialize(deserializer)? {
            outputs.push(output);
        }
        Ok(outputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failover::{ChannelAction, RelayUrl};

    fn close(i: usize) -> Output {
        Output::Action(ChannelAction::Close {
            url: RelayUrl::new(format!("u{i}")),
        })
    }

    #[test]
    fn first_in_first_out_across_ring_and_spill() {
        let mut queue = Outputs::default();
        let mut expected = VecDeque::new();
        let mut next = 0;
        // Interleave pushes and pops so the ring wraps and the spill fills and empties.
        for round in 0..40 {
            for _ in 0..(round % 5) {
                queue.push(close(next));
                expected.push_back(close(next));
                next += 1;
            }
            for _ in 0..(round % 3) {
                assert_eq!(queue.pop(), expected.pop_front());
            }
            assert_eq!(queue.len(), expected.len());
            assert!(queue.iter().eq(expected.iter()));
        }
        while let Some(output) = expected.pop_front() {
            assert_eq!(queue.pop(), Some(output));
        }
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn equal_sequences_are_equal_wherever_stored() {
        let mut a = Outputs::default();
        let mut b = Outputs::default();
        for i in 0..3 {
            a.push(close(i));
        }
        a.pop();
        b.push(close(1));
        b.push(close(2));
        assert_eq!(a, b);
        let hash = |q: &Outputs| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            q.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&a), hash(&b));
    }
}
