//! Histograms read from bytes that anyone may pass (`histogram_merge/1`, `histogram_figures/1`,
//! the cluster's merges, the interval log): everything a header claims is checked against the
//! bytes at hand and against fixed bounds *before* anything is allocated.
//!
//! HdrHistogram's V2 encoding starts with a header that states the payload's length and the
//! histogram's range; the hdrhistogram crate trusts both, so 40 crafted bytes claiming a
//! 4 GiB payload made it allocate 4 GiB (found by fuzzing). Here the claimed lengths must fit
//! in what was passed, the range's counts array must fit [`MAX_COUNTS`], and a compressed
//! payload is inflated through a reader that stops at what such a histogram can take.

use std::io::{Cursor, Read};

use flate2::read::ZlibDecoder;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

/// HdrHistogram's V2 cookies (uncompressed, and deflated), as the crate writes them.
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

/// The V2 header: cookie, payload length, normalising offset, digits (4 bytes each), lowest,
/// highest (8 each), and the integer-to-double ratio (8).
const V2_HEADER_BYTES: usize = 40;

/// The most counts one histogram may have: 8 MiB of `u64`s. ferrotrace's own histograms (2
/// significant digits, to one hour) have at most 4,608; this admits 4 digits over the whole
/// `u64` range, and 5 over most of it.
pub const MAX_COUNTS: u64 = 1 << 20;

/// A payload holds at most one varint (9 bytes at most) per count.
const MAX_PAYLOAD_BYTES: u64 = MAX_COUNTS * 9;

/// Why bytes are not a histogram that may be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadHistogram {
    /// Not a V2 histogram (another cookie, or shorter than its header).
    NotV2,
    /// A length the header states runs past the bytes given.
    Truncated,
    /// A range or precision whose counts would pass [`MAX_COUNTS`], or that HdrHistogram
    /// cannot represent.
    TooLarge,
    /// The payload does not decode.
    Corrupt,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// The length of the counts array `Histogram::new_with_bounds(low, high, digits)` would
/// allocate (as the crate computes it), or `None` where it would refuse the bounds.
pub fn counts_len(low: u64, high: u64, digits: u32) -> Option<u64> {
    if digits > 5 || low < 1 || high < low.checked_mul(2)? {
        return None;
    }
    let largest_single_unit = 2 * 10u64.pow(digits);
    let unit_magnitude = 63 - low.leading_zeros();
    let sub_bucket_count_magnitude = 64 - (largest_single_unit - 1).leading_zeros();
    let half_magnitude = sub_bucket_count_magnitude.max(1) - 1;
    if unit_magnitude + half_magnitude + 1 > 63 {
        return None;
    }
    let sub_bucket_count = 1u64 << (half_magnitude + 1);
    let mut smallest_untrackable = sub_bucket_count << unit_magnitude;
    let mut buckets = 1u64;
    while smallest_untrackable <= high {
        if smallest_untrackable > u64::MAX / 2 {
            buckets += 1;
            break;
        }
        smallest_untrackable <<= 1;
        buckets += 1;
    }
    Some((buckets + 1) * (sub_bucket_count / 2))
}

/// Checks an uncompressed V2 histogram's header against `bytes` and the bounds.
fn check_v2(bytes: &[u8]) -> Result<(), BadHistogram> {
    if bytes.len() < V2_HEADER_BYTES || u32_at(bytes, 0) != Some(V2_COOKIE) {
        return Err(BadHistogram::NotV2);
    }
    let payload = u32_at(bytes, 4).ok_or(BadHistogram::NotV2)? as usize;
    if payload > bytes.len() - V2_HEADER_BYTES {
        return Err(BadHistogram::Truncated);
    }
    let digits = u32_at(bytes, 12).ok_or(BadHistogram::NotV2)?;
    let (low, high) = (u64_at(bytes, 16).ok_or(BadHistogram::NotV2)?, u64_at(bytes, 24).ok_or(BadHistogram::NotV2)?);
    match counts_len(low, high, digits) {
        Some(len) if len <= MAX_COUNTS => Ok(()),
        _ => Err(BadHistogram::TooLarge),
    }
}

/// The histogram `bytes` encode (V2, deflated or not), read within the bounds above.
pub fn decode(bytes: &[u8]) -> Result<Histogram<u64>, BadHistogram> {
    let inflated;
    let v2: &[u8] = match u32_at(bytes, 0) {
        Some(V2_COOKIE) => bytes,
        Some(V2_COMPRESSED_COOKIE) => {
            let compressed = u32_at(bytes, 4).ok_or(BadHistogram::NotV2)? as usize;
            let body = bytes.get(8..).ok_or(BadHistogram::NotV2)?;
            if compressed > body.len() {
                return Err(BadHistogram::Truncated);
            }
            // One byte past the largest acceptable histogram tells a bomb from a fit.
            let limit = V2_HEADER_BYTES as u64 + MAX_PAYLOAD_BYTES + 1;
            let mut out = Vec::new();
            ZlibDecoder::new(&body[..compressed]).take(limit).read_to_end(&mut out).map_err(|_| BadHistogram::Corrupt)?;
            if out.len() as u64 == limit {
                return Err(BadHistogram::TooLarge);
            }
            inflated = out;
            &inflated
        }
        _ => return Err(BadHistogram::NotV2),
    };
    check_v2(v2)?;
    Deserializer::new().deserialize(&mut Cursor::new(v2)).map_err(|_| BadHistogram::Corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
    use proptest::prelude::*;

    fn sample() -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 2, 3).unwrap();
        h.auto(true);
        for v in [1u64, 10, 1_000, 1_000_000, 60_000_000_000] {
            h.record(v).unwrap();
        }
        h
    }

    fn deflated(h: &Histogram<u64>) -> Vec<u8> {
        let mut out = Vec::new();
        V2DeflateSerializer::new().serialize(h, &mut out).unwrap();
        out
    }

    fn plain(h: &Histogram<u64>) -> Vec<u8> {
        let mut out = Vec::new();
        V2Serializer::new().serialize(h, &mut out).unwrap();
        out
    }

    #[test]
    fn real_histograms_read_back_equal() {
        let h = sample();
        assert_eq!(decode(&deflated(&h)).unwrap(), h);
        assert_eq!(decode(&plain(&h)).unwrap(), h);
    }

    #[test]
    fn counts_len_is_what_the_crate_allocates() {
        for (low, high, digits) in [(1, 2, 3), (1, u64::MAX, 3), (1, 3_600_000_000_000, 3), (1000, 1 << 40, 2), (1, 1 << 30, 5), (7, 1 << 50, 4)] {
            let h = Histogram::<u64>::new_with_bounds(low, high, digits as u8).unwrap();
            assert_eq!(counts_len(low, high, digits), Some(h.distinct_values() as u64), "{low} {high} {digits}");
        }
        assert_eq!(counts_len(0, 10, 3), None);
        assert_eq!(counts_len(1, 1, 3), None);
        assert_eq!(counts_len(1, 100, 6), None);
    }

    #[test]
    fn a_header_claiming_4_gib_is_refused_before_reading() {
        let mut claim = V2_COOKIE.to_be_bytes().to_vec();
        claim.extend(u32::MAX.to_be_bytes());
        claim.extend([0u8; 32]);
        assert_eq!(decode(&claim), Err(BadHistogram::Truncated));
        let mut compressed = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        compressed.extend(u32::MAX.to_be_bytes());
        compressed.extend([0u8; 32]);
        assert_eq!(decode(&compressed), Err(BadHistogram::Truncated));
    }

    #[test]
    fn a_range_too_wide_for_the_bound_is_refused() {
        let h = Histogram::<u64>::new_with_bounds(1, u64::MAX, 5).unwrap();
        assert_eq!(decode(&plain(&h)), Err(BadHistogram::TooLarge));
        assert_eq!(decode(&deflated(&h)), Err(BadHistogram::TooLarge));
    }

    #[test]
    fn a_deflate_bomb_is_refused() {
        use flate2::write::ZlibEncoder;
        use std::io::Write;
        // A valid header followed by zeros far past any bounded payload: inflating stops at
        // the limit.
        let mut inner = plain(&sample());
        inner.resize((MAX_PAYLOAD_BYTES as usize) * 2, 0);
        let mut encoder = ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&inner).unwrap();
        let body = encoder.finish().unwrap();
        let mut bytes = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        bytes.extend((body.len() as u32).to_be_bytes());
        bytes.extend(body);
        assert_eq!(decode(&bytes), Err(BadHistogram::TooLarge));
    }

    proptest! {
        /// Any bytes, and any corruption of a real histogram, decode or are refused: never
        /// a panic, never past the bounds.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn corrupted_histograms_never_panic(at in 0usize..200, value in any::<u8>(), deflate in any::<bool>()) {
            let mut bytes = if deflate { deflated(&sample()) } else { plain(&sample()) };
            let at = at % bytes.len();
            bytes[at] = value;
            if let Ok(h) = decode(&bytes) {
                prop_assert!(h.distinct_values() as u64 <= MAX_COUNTS);
            }
        }
    }
}
