//! The system properties the engine stamps on every document it writes
//! (`_rid`, `_self`, `_etag`, `_attachments`, `_ts`: see [`crate::document`]),
//! and their text as storage leaves it out of a stored body
//! ([`Stamp::tail`]).
//!
//! All five follow from the container (its database rid and ordinal), the
//! document's rid, the write's sequence number and its time, which storage
//! keeps in columns of their own; a body that ends with them as the engine
//! appends them is stored without them and completed on every read.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::alphabet::Alphabet;
use base64::engine::{GeneralPurpose, general_purpose};
use host_api::json::decimal_digits;
use serde_json::Value;

use crate::storage::ContainerMeta;

/// The database part of every `_rid` and `_self` unless the container's
/// properties name another (Cosmos DB has one database rid per account
/// database; Partita's database is the whole store).
const DATABASE_RID: [u8; 4] = *b"Part";

/// What a container's system properties are made of.
#[derive(Debug)]
pub(crate) struct Stamp {
    /// The container's ordinal, the first half of every etag.
    ordinal: u32,
    /// The database rid and the ordinal: the first half of every `_rid`.
    rid_prefix: [u8; 8],
    /// `dbs/{database rid}/colls/{container rid}/docs/`.
    self_prefix: String,
}

/// A document's `_rid` as text: 16 bytes are 24 base64 characters.
struct RidText {
    buf: [u8; 24],
    len: usize,
}

impl RidText {
    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn as_str(&self) -> &str {
        ascii(self.as_bytes())
    }
}

impl Stamp {
    /// The stamp of the container `meta` describes.
    pub(crate) fn of(meta: &ContainerMeta) -> Stamp {
        let database_rid = meta.database_rid.unwrap_or(DATABASE_RID);
        let mut rid_prefix = [0; 8];
        rid_prefix[..4].copy_from_slice(&database_rid);
        rid_prefix[4..].copy_from_slice(&meta.ordinal.to_be_bytes());
        let self_prefix = format!(
            "dbs/{}/colls/{}/docs/",
            encode_rid(&database_rid),
            encode_rid(&rid_prefix)
        );
        Stamp {
            ordinal: meta.ordinal,
            rid_prefix,
            self_prefix,
        }
    }

    /// The database rid and the container's ordinal, the container's own
    /// resource id.
    pub(crate) fn rid_prefix(&self) -> &[u8; 8] {
        &self.rid_prefix
    }

    /// `dbs/{database rid}/colls/{container rid}/docs/`.
    pub(crate) fn self_prefix(&self) -> &str {
        &self.self_prefix
    }

    /// The `_rid` of the container's document `rid`. Cosmos DB spells rids
    /// with `-` in place of `/`, so they fit in a link segment.
    fn rid_text(&self, rid: u64) -> RidText {
        let mut rid_bytes = [0; 16];
        rid_bytes[..8].copy_from_slice(&self.rid_prefix);
        rid_bytes[8..].copy_from_slice(&rid.to_be_bytes());
        let mut buf = [0u8; 24];
        let len = RID_BASE64.encode_slice(rid_bytes, &mut buf).unwrap_or(0);
        RidText { buf, len }
    }

    /// Sets `_rid`, `_self`, `_etag`, `_attachments` and `_ts` (to `ts`) on
    /// a document being written, appending those it lacks in that order.
    /// Returns how many bytes that adds to the document's
    /// [`checked_unstamped_len`](crate::document::checked_unstamped_len)
    /// (the five values, and the key, colon and comma of each appended),
    /// so the caller has an exact size without measuring the document
    /// again, nor the old values at all.
    pub(crate) fn apply(&self, doc: &mut Value, rid: u64, seq: u64, ts: u64) -> usize {
        let Value::Object(map) = doc else { return 0 };
        let rid_buf = self.rid_text(rid);
        // Compared as bytes: a replace keeps the rid and its link, and
        // never needs the rid as a `str`.
        let rid_bytes = rid_buf.as_bytes();
        let n = rid_bytes.len();
        let prefix = self.self_prefix.as_bytes();
        let self_ok = |s: &str| {
            let s = s.as_bytes();
            s.len() == prefix.len() + n + 1
                && s.starts_with(prefix)
                && s[prefix.len()..].starts_with(rid_bytes)
                && s.ends_with(b"/")
        };
        // A created document needs the rid as text twice (`_rid`, `_self`),
        // a replaced one not at all.
        let rid_str = std::cell::OnceCell::new();
        let rid_str = || *rid_str.get_or_init(|| rid_buf.as_str());
        let etag_buf = etag_bytes(self.ordinal, seq);
        let etag_text = ascii(&etag_buf.0);
        // The new values and their serialized lengths, known without
        // measuring: rids, links and the attachments link are base64 and
        // path characters (nothing to escape), an etag is 27 characters of
        // which two are quotes (escaped as `\"`).
        let new_value = |slot: usize| -> (Value, usize) {
            match slot {
                0 => (Value::String(rid_str().to_owned()), n + 2),
                1 => {
                    let mut link = String::with_capacity(prefix.len() + n + 1);
                    link.push_str(&self.self_prefix);
                    link.push_str(rid_str());
                    link.push('/');
                    let len = link.len() + 2;
                    (Value::String(link), len)
                }
                2 => (Value::String(etag_text.to_owned()), ETAG_LEN + 2 + 2),
                3 => (Value::String(ATTACHMENTS.to_owned()), ATTACHMENTS.len() + 2),
                _ => (Value::from(ts), decimal_digits(ts)),
            }
        };
        let mut added = 0;
        // One pass over the members updates the system properties that are
        // already there without hashing a key (a document that was read,
        // changed and written back has all of them). Values that are already
        // right (`_rid`, `_self`, `_attachments` on a replace) are kept.
        let mut found = [false; 5];
        for (key, value) in map.iter_mut() {
            let slot = match key.as_str() {
                "_rid" => 0,
                "_self" => 1,
                "_etag" => 2,
                "_attachments" => 3,
                "_ts" => 4,
                _ => continue,
            };
            found[slot] = true;
            // The lengths of values already right are known as a new
            // one's is: they equal it.
            added += match (slot, &mut *value) {
                (0, Value::String(s)) if s.as_bytes() == rid_bytes => n + 2,
                (1, Value::String(s)) if self_ok(s) => s.len() + 2,
                (3, Value::String(s)) if s == ATTACHMENTS => ATTACHMENTS.len() + 2,
                // A read document's etag, rewritten in its own buffer
                // (unless that is large: a caller's long `_etag` must not
                // stay behind as capacity no size counts).
                (2, Value::String(etag)) if etag.capacity() <= 2 * ETAG_LEN => {
                    etag.clear();
                    etag.push_str(etag_text);
                    ETAG_LEN + 2 + 2
                }
                // The old value is whatever the caller sent (depth-checked).
                _ => {
                    let (new, new_len) = new_value(slot);
                    *value = new;
                    new_len
                }
            };
        }
        for (slot, key) in SYSTEM_PROPERTIES.into_iter().enumerate() {
            if found[slot] {
                continue;
            }
            let (new, new_len) = new_value(slot);
            // A comma (unless the map was empty), the key, a colon, the value.
            added += usize::from(!map.is_empty()) + key.len() + 2 + 1 + new_len;
            map.insert(key.to_owned(), new);
        }
        added
    }

    /// The end of a document's JSON text when it ends with the five system
    /// properties in the order [`Stamp::apply`] appends them, as of the
    /// write with sequence number `seq` at `ts`: from `"_rid"` to the
    /// object's closing brace. Storage keeps a body that ends with it
    /// without it ([`crate::storage`]).
    pub(crate) fn tail(&self, rid: u64, seq: u64, ts: u64) -> String {
        let mut tail = String::with_capacity(self.tail_len());
        self.push_tail(&mut tail, rid, seq, ts);
        tail
    }

    /// About the length of a [`Stamp::tail`] (exactly, for a `_ts` of
    /// ten digits), for a buffer that gets one.
    pub(crate) fn tail_len(&self) -> usize {
        // The names, quotes and separators, the rid twice, the etag.
        62 + 2 * 24 + self.self_prefix.len() + ATTACHMENTS.len() + (ETAG_LEN - 2) + 10
    }

    /// Appends [`Stamp::tail`] to `out`.
    pub(crate) fn push_tail(&self, out: &mut String, rid: u64, seq: u64, ts: u64) {
        let rid = self.rid_text(rid);
        let rid = rid.as_str();
        let etag = etag(self.ordinal, seq);
        // The etag's own quotes, escaped inside the JSON string.
        let etag = &etag[1..etag.len() - 1];
        out.push_str("\"_rid\":\"");
        out.push_str(rid);
        out.push_str("\",\"_self\":\"");
        out.push_str(&self.self_prefix);
        out.push_str(rid);
        out.push_str("/\",\"_etag\":\"\\\"");
        out.push_str(etag);
        out.push_str("\\\"\",\"_attachments\":\"");
        out.push_str(ATTACHMENTS);
        out.push_str("\",\"_ts\":");
        let _ = write!(out, "{ts}}}");
    }
}

/// `"{ordinal:08x}-{seq:016x}"`, quoted as Cosmos DB etags are (written by
/// hand: `format!` was a measurable part of every write).
pub(crate) fn etag(ordinal: u32, seq: u64) -> String {
    ascii(&etag_bytes(ordinal, seq).0).to_owned()
}

/// The text of an etag on the stack, aligned as a word: checking that it
/// is UTF-8 then goes a word at a time rather than a byte at a time.
#[repr(align(8))]
struct EtagText([u8; ETAG_LEN]);

/// The text of [`etag`], in a buffer on the stack.
fn etag_bytes(ordinal: u32, seq: u64) -> EtagText {
    let mut buf = [0u8; ETAG_LEN];
    buf[0] = b'"';
    for (i, b) in ordinal.to_be_bytes().into_iter().enumerate() {
        buf[1 + 2 * i..3 + 2 * i].copy_from_slice(&HEX_PAIRS[usize::from(b)]);
    }
    buf[9] = b'-';
    for (i, b) in seq.to_be_bytes().into_iter().enumerate() {
        buf[10 + 2 * i..12 + 2 * i].copy_from_slice(&HEX_PAIRS[usize::from(b)]);
    }
    buf[26] = b'"';
    EtagText(buf)
}

/// Bytes this module wrote, all ASCII, as a `str`.
fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

/// Each byte's two lowercase hex digits: an etag's 24 digits in 12
/// look-ups rather than 24.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0; 2]; 256];
    let mut b = 0;
    while b < 256 {
        pairs[b] = [HEX[b >> 4], HEX[b & 0xf]];
        b += 1;
    }
    pairs
};

/// The system properties the engine sets, in the order it appends them
/// (and that storage keeps out of a stored body when they end it).
pub(crate) const SYSTEM_PROPERTIES: [&str; 5] = ["_rid", "_self", "_etag", "_attachments", "_ts"];

/// The length of an etag's text: a quote, 8 + 1 + 16 hex digits, a quote.
const ETAG_LEN: usize = 27;

/// The value of `_attachments` (Cosmos DB's relative attachments link).
const ATTACHMENTS: &str = "attachments/";

/// Cosmos DB encodes resource ids in base64 with `-` in place of `/`, so they
/// fit in a path segment.
pub(crate) fn encode_rid(bytes: &[u8]) -> String {
    RID_BASE64.encode(bytes)
}

/// Standard padded base64 with `-` in place of `/`: resource ids
/// ([`encode_rid`]) encoded in one pass, without a second over the text.
const RID_BASE64: GeneralPurpose = GeneralPurpose::new(
    &match Alphabet::new("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-") {
        Ok(alphabet) => alphabet,
        Err(_) => panic!("a valid base64 alphabet"),
    },
    general_purpose::PAD,
);

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::STANDARD;
    use host_api::json::{serialized_len, to_text};
    use serde_json::json;

    use super::*;

    fn meta(ordinal: u32, database_rid: Option<[u8; 4]>) -> ContainerMeta {
        ContainerMeta {
            id: "c".to_owned(),
            ordinal,
            partition_key_path: "/pk".to_owned(),
            physical_partitions: 1,
            default_ttl: None,
            unique_keys: Vec::new(),
            database_rid,
            computed_properties: Vec::new(),
            indexing_policy: crate::IndexingPolicy::default(),
        }
    }

    #[test]
    fn etags_are_quoted_hex() {
        for (ordinal, seq) in [
            (1, 0x2a),
            (u32::MAX, u64::MAX),
            (0, 0),
            (0x89ab_cdef, 0x0123_4567_89ab_cdef),
            (0x0123_4567, 0xfedc_ba98_7654_3210),
        ] {
            assert_eq!(etag(ordinal, seq), format!("\"{ordinal:08x}-{seq:016x}\""));
        }
    }

    /// An etag is rewritten in place only in a buffer of about its size:
    /// a caller's long `_etag` is not kept as hidden capacity.
    #[test]
    fn a_long_etag_is_not_kept_as_capacity() {
        let stamp = Stamp::of(&meta(1, None));
        for (old, reused) in [(etag(1, 7), true), ("x".repeat(1 << 20), false)] {
            let mut doc = json!({"id": "a", "_etag": old});
            let before = doc["_etag"].as_str().unwrap().as_ptr();
            stamp.apply(&mut doc, 1, 8, 9);
            let Value::String(new) = &doc["_etag"] else {
                panic!("an etag")
            };
            assert_eq!(*new, etag(1, 8));
            assert!(new.capacity() <= 2 * ETAG_LEN, "{}", new.capacity());
            assert_eq!(new.as_ptr() == before, reused);
        }
    }

    #[test]
    fn rids_are_base64_with_dashes() {
        let stamps = [meta(1, None), meta(u32::MAX, Some([0xff; 4]))].map(|m| Stamp::of(&m));
        for stamp in &stamps {
            for rid in [0, 1, 62, 63, 0xfbff, 0xffff_ffff, u64::MAX] {
                let mut bytes = stamp.rid_prefix().to_vec();
                bytes.extend_from_slice(&rid.to_be_bytes());
                let reference = STANDARD.encode(&bytes).replace('/', "-");
                assert_eq!(stamp.rid_text(rid).as_str(), reference);
                assert_eq!(encode_rid(&bytes), reference);
            }
        }
    }

    #[test]
    fn a_stamped_document_ends_with_its_tail() {
        let stamps = [meta(1, None), meta(u32::MAX, Some([0xff; 4]))].map(|m| Stamp::of(&m));
        // The third document has two of the five already: they keep their
        // place, so the text does not end with the five in order.
        let documents = [
            (json!({}), true),
            (json!({"id": "x", "pk": "a/b", "n": [1, {"m": null}]}), true),
            (json!({"id": "y", "_ts": 3, "_etag": "old"}), false),
        ];
        for stamp in &stamps {
            for rid in [0, 1, 62, 63, 0xfbff, u64::MAX] {
                for (seq, ts) in [(0, 0), (7, 1_764_400_000), (u64::MAX, u64::MAX)] {
                    for (doc, ends_with_tail) in &documents {
                        let mut doc = doc.clone();
                        stamp.apply(&mut doc, rid, seq, ts);
                        let text = to_text(&doc, serialized_len(&doc));
                        let tail = stamp.tail(rid, seq, ts);
                        assert_eq!(text.ends_with(&tail), *ends_with_tail, "{text} / {tail}");
                        if ts == 1_764_400_000 {
                            assert_eq!(tail.len(), stamp.tail_len(), "{tail}");
                        }
                    }
                }
            }
        }
    }

    /// What [`Stamp::apply`] must do, written plainly: each of the five
    /// takes its value where it is, or is appended in order.
    fn plain_stamp(stamp: &Stamp, doc: &mut Value, rid: u64, seq: u64, ts: u64) {
        let rid_text = stamp.rid_text(rid).as_str().to_owned();
        let self_link = format!("{}{rid_text}/", stamp.self_prefix());
        let values = [
            json!(rid_text),
            json!(self_link),
            json!(etag(stamp.ordinal, seq)),
            json!(ATTACHMENTS),
            json!(ts),
        ];
        let map = doc.as_object_mut().expect("an object");
        for (key, value) in SYSTEM_PROPERTIES.into_iter().zip(values) {
            match map.get_mut(key) {
                Some(old) => *old = value,
                None => {
                    map.insert(key.to_owned(), value);
                }
            }
        }
    }

    /// A member's value: `None` stands for the value the stamp would set
    /// (a document read and written back), filled in by the test.
    fn arb_member() -> impl proptest::strategy::Strategy<Value = (String, Option<Value>)> {
        use proptest::prelude::*;
        let key = prop_oneof![
            proptest::sample::select(vec![
                "_rid",
                "_self",
                "_etag",
                "_attachments",
                "_ts",
                "id",
                "_other",
                "",
            ])
            .prop_map(str::to_owned),
            any::<String>(),
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            Just(json!("\"quoted\\")),
        ];
        let value = leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((any::<String>(), inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        });
        (key, proptest::option::weighted(0.7, value))
    }

    proptest::proptest! {
        /// The stamp sets what the plain version sets, in the same order,
        /// and the unstamped length plus what it returns is the length of
        /// the stamped document's text.
        #[test]
        fn apply_matches_the_plain_stamp_and_its_length(
            members in proptest::collection::vec(arb_member(), 0..10),
            ordinal in proptest::sample::select(vec![0u32, 1, u32::MAX]),
            rid in proptest::sample::select(vec![0u64, 63, 0xfbff, u64::MAX]),
            seq in proptest::prelude::any::<u64>(),
            ts in proptest::sample::select(vec![0u64, 9, 10, 1_764_400_000, u64::MAX]),
        ) {
            let stamp = Stamp::of(&meta(ordinal, None));
            let mut expected = Value::Object(Default::default());
            plain_stamp(&stamp, &mut expected, rid, seq, ts);
            let mut doc = serde_json::Map::new();
            for (key, value) in members {
                // A value the stamp would set, or another: an old etag.
                let value = value.unwrap_or_else(|| match key.as_str() {
                    "_etag" => json!(etag(ordinal, seq.wrapping_add(1))),
                    "_ts" => json!(ts.wrapping_sub(1)),
                    other => expected.get(other).cloned().unwrap_or(Value::Null),
                });
                doc.insert(key, value);
            }
            let mut doc = Value::Object(doc);
            let mut plain = doc.clone();
            plain_stamp(&stamp, &mut plain, rid, seq, ts);
            let unstamped = crate::document::checked_unstamped_len(&doc).expect("shallow");
            let added = stamp.apply(&mut doc, rid, seq, ts);
            let text = doc.to_string();
            proptest::prop_assert_eq!(&text, &plain.to_string());
            proptest::prop_assert_eq!(unstamped + added, text.len());
        }
    }
}
