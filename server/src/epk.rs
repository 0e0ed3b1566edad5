//! Effective partition keys (EPK): where Cosmos DB hashes a partition-key
//! value on its ring, as hex text.
//!
//! Clients scope some requests by EPK range instead of by key (the Python
//! SDK's per-partition-key change feed sends `x-ms-start-epk` and
//! `x-ms-end-epk`), and a container's physical partitions are EPK ranges
//! ([`range_bounds`]): a document belongs to a request's range if its
//! key's EPK is in it.
//!
//! Hash V2 (the default for new containers): MurmurHash3 x64 128-bit, seed
//! 0, over the key's binary encoding (type byte: undefined 0, null 1, false
//! 2, true 3, number 5 + f64 little endian, string 8 + UTF-8 + 0xFF); the 16
//! hash bytes reversed, the top two bits cleared, upper-case hex. Pinned
//! against the Python SDK's own `_get_epk_range_for_partition_key`.
//!
//! Hash V1 (containers created with `"version": 1`): MurmurHash3 x86 32-bit,
//! seed 0, over the key's hashing encoding (as V2's, but a string ends with
//! 0x00, is cut to 100 characters, and an integer is first wrapped to an
//! unsigned 32-bit value); the EPK is the hex of the binary encoding of the
//! hash (as a number) followed by the key itself (numbers as an
//! order-preserving variable-length integer, strings as their first 101
//! bytes plus one each, ended with 0x00 when 100 bytes or fewer). An
//! integral number is taken for a JSON integer: a key of `-1.0` written as
//! a float hashes as `-1` does (the SDKs tell them apart; JSON text
//! Partita stores does not).
//!
//! A hierarchical (MultiHash) key hashes each component on its own and
//! concatenates the 32-digit EPKs, so the EPK of a prefix is a prefix of the
//! EPK of every key under it, and the range `[EPK(prefix), EPK(prefix)+"FF")`
//! holds exactly those keys.

use engine::PartitionKey;

/// The effective partition key: for a single-path key its Hash V2 EPK, 32
/// upper-case hex digits; for a hierarchical key the concatenation of its
/// components' EPKs.
pub fn effective_partition_key(key: &PartitionKey) -> String {
    key.components().iter().map(component_epk).collect()
}

/// The EPK of `key` in a container whose partition-key definition says
/// `version` (1: Hash V1; anything else, or none: Hash V2).
pub(crate) fn effective_partition_key_in(key: &PartitionKey, version: Option<u64>) -> String {
    match version {
        Some(1) => effective_partition_key_v1(key),
        _ => effective_partition_key(key),
    }
}

/// The Hash V1 EPK of a key (see the module docs).
pub(crate) fn effective_partition_key_v1(key: &PartitionKey) -> String {
    let components: Vec<PartitionKey> = key.components().iter().map(truncate_v1).collect();
    let mut hashed = Vec::new();
    for component in &components {
        match component {
            PartitionKey::Number(n) if n.fract() == 0.0 && n.abs() < 9.2e18 => {
                // An integer: wrapped to u32 first, as the SDKs do.
                let wrapped = f64::from((*n as i64) as u32);
                write_for_hashing(&PartitionKey::Number(wrapped), 0x00, &mut hashed);
            }
            other => write_for_hashing(other, 0x00, &mut hashed),
        }
    }
    let hash = f64::from(murmur3_x86_32(&hashed, 0));
    let mut out = Vec::new();
    encode_number_v1(hash, &mut out);
    for component in &components {
        match component {
            PartitionKey::Number(n) => encode_number_v1(*n, &mut out),
            PartitionKey::String(s) => {
                out.push(0x08);
                let bytes = s.as_bytes();
                for b in bytes.iter().take(MAX_STRING_BYTES + 1) {
                    out.push(b.wrapping_add(1));
                }
                if bytes.len() <= MAX_STRING_BYTES {
                    out.push(0x00);
                }
            }
            // Hashed, but not spelled out (as the SDKs compute it).
            PartitionKey::Null => {}
            // Undefined and the booleans: their type byte, as when hashed.
            other => write_for_hashing(other, 0x00, &mut out),
        }
    }
    out.iter().map(|b| format!("{b:02X}")).collect()
}

/// The most string bytes a Hash V1 EPK spells out.
const MAX_STRING_BYTES: usize = 100;

/// A Hash V1 component: strings cut to 100 characters.
fn truncate_v1(key: &PartitionKey) -> PartitionKey {
    match key {
        PartitionKey::String(s) if s.chars().count() > MAX_STRING_BYTES => {
            PartitionKey::String(s.chars().take(MAX_STRING_BYTES).collect())
        }
        other => other.clone(),
    }
}

/// A number in the binary encoding: type 0x05, then its order-preserving
/// 64-bit image (sign bit flipped for positives, negated for negatives),
/// first byte whole, then seven bits a byte with the low bit set, the last
/// byte's low bit clear.
fn encode_number_v1(n: f64, out: &mut Vec<u8>) {
    out.push(0x05);
    let bits = n.to_bits();
    const SIGN: u64 = 1 << 63;
    let mut payload = if bits < SIGN {
        bits ^ SIGN
    } else {
        bits.wrapping_neg()
    };
    out.push((payload >> 56) as u8);
    payload <<= 8;
    let mut byte = 0u8;
    let mut first = true;
    while payload != 0 {
        if !first {
            out.push(byte);
        }
        first = false;
        byte = ((payload >> 56) as u8) | 0x01;
        payload <<= 7;
    }
    out.push(byte & 0xFE);
}

/// MurmurHash3 x86 32 (Austin Appleby's reference algorithm).
fn murmur3_x86_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let k = u32::from_le_bytes(block.try_into().expect("4 bytes"));
        h ^= k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &b) in tail.iter().enumerate() {
            k ^= u32::from(b) << (8 * i);
        }
        h ^= k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// One key value as both hash versions hash it: its type byte (undefined
/// 0, null 1, false 2, true 3, number 5, string 8), then a number's f64
/// little endian, or a string's UTF-8 and `string_end` (V1 0x00, V2 0xFF).
fn write_for_hashing(key: &PartitionKey, string_end: u8, out: &mut Vec<u8>) {
    match key {
        PartitionKey::None => out.push(0x00),
        PartitionKey::Null => out.push(0x01),
        PartitionKey::Bool(false) => out.push(0x02),
        PartitionKey::Bool(true) => out.push(0x03),
        PartitionKey::Number(n) => {
            out.push(0x05);
            out.extend_from_slice(&n.to_le_bytes());
        }
        PartitionKey::String(s) => {
            out.push(0x08);
            out.extend_from_slice(s.as_bytes());
            out.push(string_end);
        }
        // `components` never yields a hierarchical key.
        PartitionKey::Multi(_) => {}
    }
}

/// The Hash V2 EPK of one key value.
fn component_epk(key: &PartitionKey) -> String {
    let mut bytes = Vec::new();
    write_for_hashing(key, 0xFF, &mut bytes);
    let (h1, h2) = murmur3_x64_128(&bytes, 0);
    let mut hash = [0u8; 16];
    hash[..8].copy_from_slice(&h1.to_le_bytes());
    hash[8..].copy_from_slice(&h2.to_le_bytes());
    hash.reverse();
    hash[0] &= 0x3F;
    hash.iter().map(|b| format!("{b:02X}")).collect()
}

/// The `[minInclusive, maxExclusive)` bounds of `count` physical
/// partitions that split the ring evenly, for a container of hash
/// `version`: from `""` to `"FF"`, the inner bounds at equal steps of the
/// hash (Hash V2: the 126-bit value, as 32 hex digits; Hash V1: the 32-bit
/// hash in the number encoding its EPKs begin with, so a key's EPK falls
/// in the range of its hash). A hierarchical key's EPK begins with its
/// first component's, so the first level decides.
pub(crate) fn range_bounds(count: u32, version: Option<u64>) -> Vec<(String, String)> {
    let count = count.max(1);
    let inner = (1..count).map(|k| match version {
        Some(1) => {
            let hash = (u64::from(k) << 32) / u64::from(count);
            let mut out = Vec::new();
            encode_number_v1(hash as f64, &mut out);
            out.iter().map(|b| format!("{b:02X}")).collect::<String>()
        }
        _ => format!(
            "{:032X}",
            ((1u128 << 126) / u128::from(count)) * u128::from(k)
        ),
    });
    let mut bounds: Vec<String> = vec![String::new()];
    bounds.extend(inner);
    bounds.push("FF".to_owned());
    bounds
        .windows(2)
        .map(|w| (w[0].clone(), w[1].clone()))
        .collect()
}

/// Whether `epk` lies in `[start, end)` (a point range when start = end).
/// EPKs compare as their hex text; `""` is the ring's start, `"FF"` its end.
pub(crate) fn in_range(epk: &str, start: &str, end: &str) -> bool {
    if start == end {
        return epk.eq_ignore_ascii_case(start);
    }
    let epk = epk.to_ascii_uppercase();
    epk.as_str() >= start.to_ascii_uppercase().as_str()
        && epk.as_str() < end.to_ascii_uppercase().as_str()
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// MurmurHash3 x64 128 (Austin Appleby's reference algorithm).
fn murmur3_x64_128(data: &[u8], seed: u64) -> (u64, u64) {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let (mut h1, mut h2) = (seed, seed);
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let mut k1 = u64::from_le_bytes(block[..8].try_into().expect("8 bytes"));
        let mut k2 = u64::from_le_bytes(block[8..].try_into().expect("8 bytes"));
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    let (mut k1, mut k2) = (0u64, 0u64);
    for (i, &b) in tail.iter().enumerate() {
        if i < 8 {
            k1 ^= u64::from(b) << (8 * i);
        } else {
            k2 ^= u64::from(b) << (8 * (i - 8));
        }
    }
    if tail.len() > 8 {
        h2 ^= k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
    }
    if !tail.is_empty() {
        h1 ^= k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epks_match_the_python_sdk() {
        // From azure-cosmos 4.17.1:
        // PartitionKey(path='/pk', kind='Hash', version=2)._get_epk_range_for_partition_key(v).min
        let cases = [
            (PartitionKey::from("p1"), "062B23DEC15212F01B9A85F4E93A940C"),
            (PartitionKey::from(""), "32E9366E637A71B4E710384B2F4970A0"),
            (PartitionKey::from(5i64), "19C08621B135968252FB34B4CF66F811"),
            (PartitionKey::from(5.5), "0E2EE47829D1AF775EEFB6540FD1D0ED"),
            (PartitionKey::from(true), "0E711127C5B5A8E4726AC6DD306A3E59"),
            (
                PartitionKey::from(false),
                "2FE1BE91E90A3439635E0E9E37361EF2",
            ),
            (PartitionKey::Null, "378867E4430E67857ACE5C908374FE16"),
            (
                PartitionKey::from("héllo"),
                "029ACA93BF00D120BC875CAD8F9A5F01",
            ),
            (
                PartitionKey::from("x".repeat(120)),
                "0F00B5EB061FA944A362B8945ACB258D",
            ),
            (PartitionKey::None, "11622DAA78F835834610ABE56EFF5CB5"),
        ];
        for (key, epk) in cases {
            assert_eq!(effective_partition_key(&key), epk, "{key}");
        }
    }

    #[test]
    fn hash_v1_epks_match_the_python_sdk() {
        // From azure-cosmos 4.17.1:
        // PartitionKey(path='/pk', kind='Hash', version=1)._get_epk_range_for_partition_key(v).min
        let cases = [
            (PartitionKey::from("p1"), "05C1CFEDCF076008713200"),
            (PartitionKey::from(""), "05C1CF33970FF80800"),
            (PartitionKey::from(5i64), "05C1D9C1C5517C05C014"),
            (PartitionKey::from(5.5), "05C1D7A771716C05C016"),
            (PartitionKey::from(-1i64), "05C1D7039DA9C4054010"),
            (PartitionKey::from(true), "05C1D7C5A903D803"),
            (PartitionKey::from(false), "05C1DB857D857C02"),
            (PartitionKey::Null, "05C1ED45D74756"),
            (
                PartitionKey::from("héllo"),
                "05C1CF2F2395980869C4AA6D6D7000",
            ),
            (PartitionKey::None, "05C1D529E345DC00"),
            (PartitionKey::from(4_294_967_296i64), "05C1BF6DA1156005C1F0"),
            (PartitionKey::from(0i64), "05C1BF6DA11560058000"),
        ];
        for (key, epk) in cases {
            assert_eq!(effective_partition_key_v1(&key), epk, "{key}");
        }
        let long = effective_partition_key_v1(&PartitionKey::from("x".repeat(120)));
        assert_eq!(long, format!("05C1DD45A3938C08{}00", "79".repeat(100)));
    }

    #[test]
    fn hierarchical_epks_match_the_python_sdk() {
        // From azure-cosmos 4.17.1 (cosmos-wire-2.md, section 3.3):
        // PartitionKey(path=["/a","/b","/c"], kind="MultiHash")._get_epk_range_for_partition_key(v).min
        let t1 = "3D48BB14DA9D090D22112C96695028B6";
        let u1 = "2A947C94F6E254B945CEBC3196C9897C";
        let s1 = "2924A879AFFF52A411F93F1A83532751";
        assert_eq!(effective_partition_key(&PartitionKey::multi(["t1"])), t1);
        assert_eq!(effective_partition_key(&PartitionKey::from("t1")), t1);
        assert_eq!(
            effective_partition_key(&PartitionKey::multi(["t1", "u1"])),
            format!("{t1}{u1}")
        );
        assert_eq!(
            effective_partition_key(&PartitionKey::multi(["t1", "u1", "s1"])),
            format!("{t1}{u1}{s1}")
        );
        // A prefix's range holds every key under it, and nothing else.
        let full = effective_partition_key(&PartitionKey::multi(["t1", "u1", "s1"]));
        assert!(in_range(&full, t1, &format!("{t1}FF")));
        assert!(in_range(
            &full,
            &format!("{t1}{u1}"),
            &format!("{t1}{u1}FF")
        ));
        let other = effective_partition_key(&PartitionKey::multi(["t2", "u1", "s1"]));
        assert!(!in_range(&other, t1, &format!("{t1}FF")));
    }

    #[test]
    fn ranges_are_half_open_and_points_match_exactly() {
        let epk = "062B23DEC15212F01B9A85F4E93A940C";
        assert!(in_range(epk, epk, "062B23DEC15212F01B9A85F4E93A940D"));
        assert!(!in_range(epk, "062B23DEC15212F01B9A85F4E93A940D", "FF"));
        assert!(in_range(epk, "", "FF"));
        assert!(in_range(epk, epk, epk));
        assert!(!in_range(epk, "", "062B23DEC15212F01B9A85F4E93A940C"));
    }

    #[test]
    fn physical_ranges_tile_the_ring_and_spread_the_keys() {
        for version in [None, Some(1)] {
            let ranges = range_bounds(5, version);
            assert_eq!(ranges.len(), 5);
            assert_eq!((ranges[0].0.as_str(), ranges[4].1.as_str()), ("", "FF"));
            for pair in ranges.windows(2) {
                assert_eq!(pair[0].1, pair[1].0);
                assert!(pair[0].0 < pair[0].1, "{pair:?}");
            }
            let mut used = [0usize; 5];
            for i in 0..200 {
                let key = PartitionKey::from(format!("pk_{i:04}"));
                let epk = effective_partition_key_in(&key, version);
                let hits: Vec<usize> = (0..5)
                    .filter(|&r| in_range(&epk, &ranges[r].0, &ranges[r].1))
                    .collect();
                assert_eq!(hits.len(), 1, "{epk} in {hits:?}");
                used[hits[0]] += 1;
            }
            assert!(used.iter().all(|&n| n > 10), "{version:?}: {used:?}");
        }
        assert_eq!(
            range_bounds(1, None),
            vec![(String::new(), "FF".to_owned())]
        );
    }
}
