//! Effective partition keys (EPK): where Cosmos DB hashes a partition-key
//! value on its ring, as hex text.
//!
//! Clients scope some requests by EPK range instead of by key (the Python
//! SDK's per-partition-key change feed sends `x-ms-start-epk` and
//! `x-ms-end-epk`). Partita has one range, so the only use is filtering: a
//! change belongs to the request if its key's EPK is in the range.
//!
//! Hash V2 (the default for new containers): MurmurHash3 x64 128-bit, seed
//! 0, over the key's binary encoding (type byte: undefined 0, null 1, false
//! 2, true 3, number 5 + f64 little endian, string 8 + UTF-8 + 0xFF); the 16
//! hash bytes reversed, the top two bits cleared, upper-case hex. Pinned
//! against the Python SDK's own `_get_epk_range_for_partition_key`.
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

/// The Hash V2 EPK of one key value.
fn component_epk(key: &PartitionKey) -> String {
    let mut bytes = Vec::new();
    match key {
        PartitionKey::None => bytes.push(0x00),
        PartitionKey::Null => bytes.push(0x01),
        PartitionKey::Bool(false) => bytes.push(0x02),
        PartitionKey::Bool(true) => bytes.push(0x03),
        PartitionKey::Number(n) => {
            bytes.push(0x05);
            bytes.extend_from_slice(&n.to_le_bytes());
        }
        PartitionKey::String(s) => {
            bytes.push(0x08);
            bytes.extend_from_slice(s.as_bytes());
            bytes.push(0xFF);
        }
        // `components` never yields a hierarchical key.
        PartitionKey::Multi(_) => {}
    }
    let (h1, h2) = murmur3_x64_128(&bytes, 0);
    let mut hash = [0u8; 16];
    hash[..8].copy_from_slice(&h1.to_le_bytes());
    hash[8..].copy_from_slice(&h2.to_le_bytes());
    hash.reverse();
    hash[0] &= 0x3F;
    hash.iter().map(|b| format!("{b:02X}")).collect()
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
}
