//! [`SharedPart`]: a part of a model state that most steps leave alone.
//!
//! The checker clones the state for every successor it generates and hashes every one of them.
//! A part held here is shared between a state and its successors until a step changes it (copy
//! on write), and it is hashed once per change, not once per generated state: the state's
//! fingerprint takes the part's 64-bit digest in place of the part (equal parts, equal digests;
//! two different parts merge only if their digests collide, as whole states already do when
//! their fingerprints collide).

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone)]
pub struct SharedPart<T> {
    value: Arc<T>,
    /// `digest(&value)`, kept in step with it by [`SharedPart::make_mut`].
    digest: u64,
}

/// A fixed-seed hash (foldhash, as stateright's fingerprints): equal values give equal digests
/// in every run and every thread.
fn digest<T: Hash>(value: &T) -> u64 {
    foldhash::fast::FixedState::with_seed(0x5A4E_D9A7_0C3B_2E11).hash_one(value)
}

impl<T: Hash + Clone> SharedPart<T> {
    pub fn new(value: T) -> SharedPart<T> {
        SharedPart {
            digest: digest(&value),
            value: Arc::new(value),
        }
    }

    /// The part, to change: copied first if another state shares it; the digest is taken again
    /// when the guard is dropped.
    pub fn make_mut(&mut self) -> PartMut<'_, T> {
        PartMut { part: self }
    }

    /// The digest is the part's (the type's own invariant, asserted by the tests).
    pub fn digest_is_exact(&self) -> bool {
        self.digest == digest(&*self.value)
    }
}

/// A changing [`SharedPart`]; re-digests it when dropped.
pub struct PartMut<'a, T: Hash + Clone> {
    part: &'a mut SharedPart<T>,
}

impl<T: Hash + Clone + fmt::Debug> fmt::Debug for PartMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.part.value.fmt(f)
    }
}

impl<T: Hash + Clone> Deref for PartMut<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.part.value
    }
}

impl<T: Hash + Clone> DerefMut for PartMut<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.part.value)
    }
}

impl<T: Hash + Clone> Drop for PartMut<'_, T> {
    fn drop(&mut self) {
        self.part.digest = digest(&*self.part.value);
    }
}

impl<T> Deref for SharedPart<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: PartialEq> PartialEq for SharedPart<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.value, &other.value)
            || (self.digest == other.digest && *self.value == *other.value)
    }
}

impl<T: Eq> Eq for SharedPart<T> {}

impl<T> Hash for SharedPart<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.digest);
    }
}

impl<T: fmt::Debug> fmt::Debug for SharedPart<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

impl<T: Serialize> Serialize for SharedPart<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de> + Hash + Clone> Deserialize<'de> for SharedPart<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(SharedPart::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_not_seen_by_the_states_sharing_the_part_and_is_digested_again() {
        let mut parent = SharedPart::new(vec![1u32, 2]);
        let mut child = parent.clone();
        child.make_mut().push(3);
        assert_eq!(*parent, vec![1, 2]);
        assert_eq!(*child, vec![1, 2, 3]);
        assert!(parent.digest_is_exact() && child.digest_is_exact());
        assert_ne!(parent, child);
        assert_ne!(digest(&parent), digest(&child));
        // Equal contents reached apart: equal, and hashed alike.
        parent.make_mut().push(3);
        assert!(!Arc::ptr_eq(&parent.value, &child.value));
        assert_eq!(parent, child);
        assert_eq!(digest(&parent), digest(&child));
    }

    #[test]
    fn serialises_as_the_part_itself() {
        let part = SharedPart::new(vec![7u8]);
        let json = serde_json::to_string(&part).expect("serialises");
        assert_eq!(json, "[7]");
        let back: SharedPart<Vec<u8>> = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, part);
        assert!(back.digest_is_exact());
    }
}
