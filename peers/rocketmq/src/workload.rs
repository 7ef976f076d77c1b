//! The workload both stores run: what each message is, where it goes, and which keys are
//! queried. Both sides build their messages from these functions, so they store the same bytes.

/// The one topic.
pub const TOPIC: &str = "bench-topic";
/// Messages go round-robin over this many queues.
pub const QUEUES: u32 = 4;
/// Every message's body length.
pub const BODY_LEN: usize = 100;
/// Every message's tag.
pub const TAG: &str = "bench-tag";
/// The most messages one consume call or one key query returns (RocketMQ's pull batch and
/// default query maximum).
pub const BATCH: usize = 32;

/// How much of everything one round does (the command's flags).
#[derive(Debug, Clone)]
pub struct Workload {
    /// Messages of the async-flush put (then consumed, queried and measured).
    pub messages: u64,
    /// Messages of each sync-flush put (one producer, then several).
    pub sync_messages: u64,
    /// Producer threads of the second sync-flush put.
    pub producers: u64,
    /// Key queries.
    pub queries: usize,
    /// Seed of the keys queried.
    pub seed: u64,
}

/// The queue message `i` goes to.
pub fn queue_of(i: u64) -> u32 {
    (i % u64::from(QUEUES)) as u32
}

/// Message `i`'s key.
pub fn key_of(i: u64) -> String {
    format!("key-{i}")
}

/// Message `i`'s body: `i` (8 bytes, little-endian) then filler, so a read can say which message
/// it got.
pub fn body_of(i: u64) -> Vec<u8> {
    let mut body = vec![b'x'; BODY_LEN];
    body[..8].copy_from_slice(&i.to_le_bytes());
    body
}

/// The message number a body of [`body_of`] carries, if it is one.
pub fn index_in(body: &[u8]) -> Option<u64> {
    if body.len() != BODY_LEN {
        return None;
    }
    let prefix: [u8; 8] = body[..8].try_into().ok()?;
    Some(u64::from_le_bytes(prefix))
}

/// The messages of queue `queue` in queue order: message `j` of the queue is message
/// `queue + j * QUEUES` of the put.
pub fn expected_index(queue: u32, queue_offset: u64) -> u64 {
    u64::from(queue) + queue_offset * u64::from(QUEUES)
}

/// Which messages producer `producer` of `producers` puts: every `producers`-th from its number.
pub fn share(producer: u64, producers: u64, messages: u64) -> impl Iterator<Item = u64> {
    (producer..messages).step_by(producers as usize)
}

/// The message numbers queried: `queries` drawn uniformly from `0..messages` by a SplitMix64
/// stream from `seed` (the same for both stores and every round).
pub fn query_indexes(seed: u64, queries: usize, messages: u64) -> Vec<u64> {
    let mut state = seed;
    (0..queries)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) % messages
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_says_which_message_it_is() {
        assert_eq!(index_in(&body_of(123_456)), Some(123_456));
        assert_eq!(index_in(b"short"), None);
    }

    #[test]
    fn queues_and_shares_cover_every_message_once() {
        let mut seen: Vec<u64> = (0..3).flat_map(|p| share(p, 3, 10)).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(expected_index(queue_of(7), 7 / u64::from(QUEUES)), 7);
    }

    #[test]
    fn query_keys_are_seeded_and_in_range() {
        let a = query_indexes(7, 100, 50);
        assert_eq!(a, query_indexes(7, 100, 50));
        assert_ne!(a, query_indexes(8, 100, 50));
        assert!(a.iter().all(|&i| i < 50));
    }
}
