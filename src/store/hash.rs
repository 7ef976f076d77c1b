//! FNV-1a 64 (Fowler–Noll–Vo, the "1a" variant, 64 bits): the hash of a consume-queue entry's tag
//! (docs/DESIGN.md §11, docs/FORMAT.md) and, in its low 32 bits, of an index file's key. Chosen
//! because it is tiny, has published test vectors, and is stable forever: the hashes are stored on
//! disk.

use crate::format::{CQ_TAG_HASH_NONE, CQ_TAG_HASH_OF_ZERO};

/// The FNV-1a 64 offset basis (the hash of no bytes).
const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// The FNV 64-bit prime, 2⁴⁰ + 2⁸ + 0xb3.
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of `bytes`: for each byte, xor it in, then multiply by the prime (wrapping).
pub(crate) fn fnv1a_64(bytes: &[u8]) -> u64 {
    fnv1a_64_of(&[bytes])
}

/// FNV-1a 64 of `parts` one after the other, as of their concatenation (nothing is copied: a
/// put hashes `topic#key` for every key it indexes).
pub(crate) fn fnv1a_64_of(parts: &[&[u8]]) -> u64 {
    let bytes = parts.iter().flat_map(|part| part.iter());
    bytes.fold(OFFSET_BASIS, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME))
}

/// The `tag_hash` stored in a consume-queue entry for a message with tag `tag`, or
/// [`CQ_TAG_HASH_NONE`] (0) for one without. A tag whose FNV-1a 64 is 0 (such byte strings exist)
/// is stored as [`CQ_TAG_HASH_OF_ZERO`] (1), so 0 always means "no tag"; a filter compares hashes
/// first and then re-checks the tag string on the message, so the tags that share hash 1 are told
/// apart as any other collision is.
pub(crate) fn tag_hash(tag: Option<&str>) -> u64 {
    tag.map_or(CQ_TAG_HASH_NONE, |tag| nonzero(fnv1a_64(tag.as_bytes())))
}

/// `hash`, with 0 (reserved for "no tag") replaced by 1.
fn nonzero(hash: u64) -> u64 {
    if hash == CQ_TAG_HASH_NONE { CQ_TAG_HASH_OF_ZERO } else { hash }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_test_vectors() {
        // From the FNV reference test suite (Landon Curt Noll's fnv test vectors).
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64_of(&[b"fo", b"", b"obar"]), fnv1a_64(b"foobar"), "parts hash as one");
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn no_tag_is_zero_and_no_tag_hashes_to_zero() {
        assert_eq!(tag_hash(None), 0);
        assert_eq!(tag_hash(Some("")), 0xcbf2_9ce4_8422_2325, "an empty tag is a tag");
        assert_eq!(tag_hash(Some("TagA")), fnv1a_64(b"TagA"));
        // A known 8-byte input whose FNV-1a 64 is 0 (not UTF-8, so no tag has it, but the rule
        // must hold for any that does).
        let zero = [0xd5, 0x6b, 0xb9, 0x53, 0x42, 0x87, 0x08, 0x36];
        assert_eq!(fnv1a_64(&zero), 0);
        assert_eq!(nonzero(fnv1a_64(&zero)), 1);
        assert_eq!(nonzero(7), 7);
    }
}
