//! Zig-zag varints as in Kafka's v2 record format: the value is zig-zag mapped so small negative
//! numbers stay short, then written 7 bits at a time, least significant group first.

use crate::format::MAX_VARINT_LEN;

/// Bytes `value` takes as a zig-zag varint.
pub(crate) const fn encoded_len(value: i64) -> usize {
    let mut v = zigzag(value);
    let mut len = 1;
    while v >= 0x80 {
        v >>= 7;
        len += 1;
    }
    len
}

/// Appends `value` as a zig-zag varint.
pub(crate) fn encode_into(value: i64, out: &mut Vec<u8>) {
    let mut v = zigzag(value);
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decodes a zig-zag varint from the front of `bytes`: the value and the bytes it took. `None` if it
/// is truncated or longer than any 64-bit value needs.
#[inline]
pub(crate) fn decode_from(bytes: &[u8]) -> Option<(i64, usize)> {
    // Most lengths, deltas and counts take one or two bytes.
    match bytes {
        [b0, ..] if *b0 < 0x80 => Some((unzigzag(u64::from(*b0)), 1)),
        [b0, b1, ..] if *b1 < 0x80 => Some((unzigzag(u64::from(b0 & 0x7f) | u64::from(*b1) << 7), 2)),
        _ => decode_multi_byte(bytes),
    }
}

fn decode_multi_byte(bytes: &[u8]) -> Option<(i64, usize)> {
    let mut v: u64 = 0;
    for (i, &b) in bytes.iter().take(MAX_VARINT_LEN).enumerate() {
        // The tenth byte may only contribute the top bit of the value.
        if i == MAX_VARINT_LEN - 1 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((unzigzag(v), i + 1));
        }
    }
    None
}

const fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

pub(crate) const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        for (value, bytes) in [(0i64, vec![0u8]), (-1, vec![1]), (1, vec![2]), (63, vec![0x7e]), (64, vec![0x80, 1])] {
            let mut out = Vec::new();
            encode_into(value, &mut out);
            assert_eq!(out, bytes, "encoding {value}");
            assert_eq!(encoded_len(value), bytes.len());
        }
    }

    #[test]
    fn truncated_and_overlong_input_is_rejected() {
        assert_eq!(decode_from(&[0x80]), None, "continuation with nothing after it");
        assert_eq!(decode_from(&[0xff; 11]), None, "longer than ten bytes");
        assert_eq!(decode_from(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]), None);
    }

    proptest! {
        #[test]
        fn round_trip(value in any::<i64>(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut out = Vec::new();
            encode_into(value, &mut out);
            prop_assert_eq!(out.len(), encoded_len(value));
            out.extend_from_slice(&tail);
            prop_assert_eq!(decode_from(&out), Some((value, encoded_len(value))));
        }
    }
}
