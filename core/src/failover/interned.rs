//! The candidate list interned once per directory update, and what the machine knows per URL.
//!
//! A tick may look at every candidate, so nothing on a tick compares, hashes or copies a URL: a
//! URL's id is its position in the list (the string is kept once, shared), and the per-URL
//! state of the listed URLs sits in a dense array indexed by that id (see `Supervisor`).

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::machine::MAX_CANDIDATES;
use super::types::{CooldownEntry, CooldownKind, RelayUrl};
use crate::MonoMs;

// Ids are `u16`: a list never holds more than `MAX_CANDIDATES` URLs.
const _: () = assert!(MAX_CANDIDATES <= u16::MAX as usize);

/// What the machine knows about one URL. `Default` is "nothing": such a state is never kept for a
/// URL outside the list, so two machines holding the same facts hold the same data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct UrlState {
    /// FO-D2 / FO-D10: the cooldown table's row for this URL, if any (expired rows stay until
    /// pruned, as in a table keyed by URL).
    pub(super) cooldown: Option<CooldownEntry>,
    /// FO-X2: its open failed since the chain last moved.
    pub(super) passed_over: bool,
    /// FO-X3: probed (and failed) in the round under way.
    pub(super) probed: bool,
    /// FO-X4: set on the first listed URL of a host (its representative) while a listed URL of
    /// that host is passed over: the chain tries other hosts' clean URLs first. A function of
    /// the list and the passed-over flags (kept exact by the machine); never set on an
    /// unlisted URL.
    pub(super) host_failed: bool,
}

impl UrlState {
    pub(super) fn is_cooling(&self, now: MonoMs) -> bool {
        self.cooldown.is_some_and(|entry| entry.is_cooling(now))
    }

    pub(super) fn is_empty(&self) -> bool {
        *self == UrlState::default()
    }

    /// FO-X3a: an open of this URL failed at or after `at` (its open-failed cycle began then).
    pub(super) fn failed_since(&self, at: MonoMs) -> bool {
        self.cooldown
            .is_some_and(|entry| entry.kind == CooldownKind::OpenFailed && entry.since >= at)
    }
}

/// The candidate list with each URL's id (its position). Shared: it changes only on a directory
/// update, while the machine is cloned for every state the model checker explores.
#[derive(Debug, Clone)]
pub(super) struct Candidates {
    urls: Arc<[RelayUrl]>,
    /// Ids in URL order: an input naming a URL finds its id by binary search.
    by_url: Arc<[u16]>,
    /// FO-X4: for each id, the id of the first listed URL on the same host (its failure
    /// domain, [`RelayUrl::host`], ASCII case ignored).
    hosts: Arc<[u16]>,
    /// A digest of `urls` (FNV-1a): a machine hashes one word for its list, not every URL.
    digest: u64,
}

impl Candidates {
    /// Interns `urls`, a duplicate keeping its first position. O(n log n), done once per update.
    pub(super) fn intern(urls: &[RelayUrl]) -> Candidates {
        assert!(
            urls.len() <= MAX_CANDIDATES,
            "the caller rejects longer lists"
        );
        // Positions sorted by URL (then position), so the first of each run of equal URLs is the
        // one that keeps its place.
        let mut order: Vec<u16> = (0..urls.len() as u16).collect();
        order.sort_unstable_by(|a, b| {
            urls[usize::from(*a)]
                .cmp(&urls[usize::from(*b)])
                .then(a.cmp(b))
        });
        let mut keep = vec![false; urls.len()];
        for (rank, &position) in order.iter().enumerate() {
            let first_of_run =
                rank == 0 || urls[usize::from(order[rank - 1])] != urls[usize::from(position)];
            keep[usize::from(position)] = first_of_run;
        }
        // Ids are positions in the deduplicated list.
        let mut id_of_position = vec![u16::MAX; urls.len()];
        let mut list = Vec::with_capacity(urls.len());
        for (position, url) in urls.iter().enumerate() {
            if keep[position] {
                id_of_position[position] = list.len() as u16;
                list.push(url.clone());
            }
        }
        let by_url: Vec<u16> = order
            .iter()
            .filter(|position| keep[usize::from(**position)])
            .map(|position| id_of_position[usize::from(*position)])
            .collect();
        Candidates::from_parts(list.into(), by_url.into())
    }

    fn from_parts(urls: Arc<[RelayUrl]>, by_url: Arc<[u16]>) -> Candidates {
        const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut digest = FNV_OFFSET;
        let mut eat = |byte: u8| digest = (digest ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
        for url in urls.iter() {
            // Length first, so ["ab", "c"] and ["a", "bc"] differ.
            url.as_str()
                .len()
                .to_le_bytes()
                .into_iter()
                .for_each(&mut eat);
            url.as_str().bytes().for_each(&mut eat);
        }
        crate::invariant_eq!(urls.len(), by_url.len());
        crate::invariant!(by_url
            .windows(2)
            .all(|w| urls[usize::from(w[0])] < urls[usize::from(w[1])]));
        let hosts = host_representatives(&urls);
        Candidates {
            urls,
            by_url,
            hosts,
            digest,
        }
    }

    pub(super) fn empty() -> Candidates {
        Candidates::from_parts(Arc::from(Vec::new()), Arc::from(Vec::new()))
    }

    pub(super) fn urls(&self) -> &[RelayUrl] {
        &self.urls
    }

    pub(super) fn len(&self) -> usize {
        self.urls.len()
    }

    pub(super) fn url(&self, id: usize) -> &RelayUrl {
        &self.urls[id]
    }

    /// FO-X4: the id of the first listed URL on the same host as listed URL `id`.
    #[inline]
    pub(super) fn host(&self, id: usize) -> u16 {
        self.hosts[id]
    }

    /// FO-X4: the representative of `url`'s host among the listed URLs, if one is listed on
    /// it. A linear scan (asked when the current channel's URL is not listed).
    pub(super) fn host_of_url(&self, url: &RelayUrl) -> Option<u16> {
        let host = url.host();
        self.urls
            .iter()
            .position(|listed| listed.host().eq_ignore_ascii_case(host))
            .map(|id| self.hosts[id])
    }

    /// The id of `url`, if listed. O(log n) string comparisons.
    pub(super) fn id_of(&self, url: &RelayUrl) -> Option<u16> {
        self.by_url
            .binary_search_by(|id| self.urls[usize::from(*id)].as_str().cmp(url.as_str()))
            .ok()
            .map(|at| self.by_url[at])
    }
}

/// FO-X4: for each URL, the position of the first URL with the same host. Sorted once per
/// directory update (O(n log n)); ASCII case ignored.
fn host_representatives(urls: &[RelayUrl]) -> Arc<[u16]> {
    let mut by_host: Vec<(String, u16)> = urls
        .iter()
        .enumerate()
        .map(|(id, url)| (url.host().to_ascii_lowercase(), id as u16))
        .collect();
    by_host.sort_unstable();
    let mut hosts = vec![0u16; urls.len()];
    let mut rep = 0u16;
    for (rank, (host, id)) in by_host.iter().enumerate() {
        if rank == 0 || by_host[rank - 1].0 != *host {
            rep = *id; // the smallest id of the run: ids sort within a host
        }
        hosts[usize::from(*id)] = rep;
    }
    hosts.into()
}

impl PartialEq for Candidates {
    fn eq(&self, other: &Candidates) -> bool {
        // `by_url` and `digest` are functions of `urls`.
        Arc::ptr_eq(&self.urls, &other.urls) || self.urls == other.urls
    }
}

impl Eq for Candidates {}

impl Hash for Candidates {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Equal lists have equal digests, so this agrees with `eq`.
        self.digest.hash(state);
    }
}

impl Serialize for Candidates {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.urls.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Candidates {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Candidates, D::Error> {
        let urls = Vec::<RelayUrl>::deserialize(deserializer)?;
        if urls.len() > MAX_CANDIDATES {
            return Err(serde::de::Error::invalid_length(
                urls.len(),
                &"at most MAX_CANDIDATES URLs",
            ));
        }
        Ok(Candidates::intern(&urls))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(names: &[&str]) -> Vec<RelayUrl> {
        names.iter().map(|n| RelayUrl::new(*n)).collect()
    }

    #[test]
    fn a_duplicate_keeps_its_first_position_and_every_url_finds_its_id() {
        let list = Candidates::intern(&urls(&["c", "a", "c", "b", "a"]));
        assert_eq!(list.urls(), &urls(&["c", "a", "b"])[..]);
        for (id, url) in list.urls().iter().enumerate() {
            assert_eq!(list.id_of(url), Some(id as u16));
        }
        assert_eq!(list.id_of(&RelayUrl::new("d")), None);
        assert_eq!(Candidates::empty().id_of(&RelayUrl::new("a")), None);
    }

    #[test]
    fn fo_x4_each_url_names_the_first_listed_url_of_its_host() {
        let list = Candidates::intern(&urls(&[
            "wss://a:1/r",
            "wss://b/r",
            "wss://A:2/r",
            "wss://c/r",
            "wss://b:9/x",
        ]));
        let hosts: Vec<u16> = (0..list.len()).map(|id| list.host(id)).collect();
        assert_eq!(hosts, vec![0, 1, 0, 3, 1]);
        assert_eq!(list.host_of_url(&RelayUrl::new("wss://c:7/other")), Some(3));
        assert_eq!(list.host_of_url(&RelayUrl::new("wss://B/r2")), Some(1));
        assert_eq!(list.host_of_url(&RelayUrl::new("wss://d/r")), None);
    }

    #[test]
    fn equal_lists_are_equal_and_digest_alike_however_built() {
        let a = Candidates::intern(&urls(&["x", "y", "x"]));
        let b = Candidates::intern(&urls(&["x", "y"]));
        assert_eq!(a, b);
        assert_eq!(a.digest, b.digest);
        let c = Candidates::intern(&urls(&["y", "x"]));
        assert_ne!(a, c);
        assert_ne!(a.digest, c.digest);
        let d = Candidates::intern(&urls(&["xy"]));
        let e = Candidates::intern(&urls(&["x", "y"]));
        assert_ne!(d.digest, e.digest);
    }
}
