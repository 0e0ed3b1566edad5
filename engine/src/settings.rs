//! Container settings beyond the partition key: time to live, unique keys
//! and computed properties.
//!
//! TIME TO LIVE
//! ============
//!
//! A container's `defaultTtl` (Cosmos DB's semantics):
//!
//! | `defaultTtl` | item without `ttl` | item with `ttl: n > 0` | item with `ttl: -1` |
//! |---|---|---|---|
//! | absent | never expires | never expires (`ttl` ignored) | never expires |
//! | `-1` | never expires | expires `n` s after `_ts` | never expires |
//! | `n > 0` | expires `n` s after `_ts` | expires `n` s after `_ts` | never expires |
//!
//! `defaultTtl` 0 or below -1 is a 400; so is an item `ttl` of 0, `null`,
//! below -1 or not an integer, while time to live is on. An item expires
//! when the clock ([`crate::Clock`]) reaches `_ts + ttl`: from then on every
//! read, query, feed and transaction treats it as absent, and the
//! background purge (`Container::purge_expired`) deletes it, a delete in the
//! change log.
//!
//! UNIQUE KEYS
//! ===========
//!
//! A unique key is a list of paths (`["/name", "/address/zip"]`); no two
//! live documents of one logical partition may have the same values at all
//! of a key's paths. A missing path counts as `null`, as on Cosmos DB.
//! Checked by the transaction on every write (point writes, scripts,
//! native transactions) with a scan of the partition: O(documents in the
//! partition) per write to a container that has unique keys, and nothing
//! for one that has none.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The most unique keys a container may have (Cosmos DB's limit).
pub const MAX_UNIQUE_KEYS: usize = 10;

/// The most paths one unique key may have (Cosmos DB's limit).
pub const MAX_UNIQUE_KEY_PATHS: usize = 16;

/// One unique key of a container's `uniqueKeyPolicy`: the combination of
/// values at `paths` is unique within each logical partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UniqueKey {
    /// JSON paths such as `/name` or `/address/zip`.
    pub paths: Vec<String>,
}

impl UniqueKey {
    /// A unique key over `paths`.
    pub fn new<S: Into<String>>(paths: impl IntoIterator<Item = S>) -> UniqueKey {
        UniqueKey {
            paths: paths.into_iter().map(Into::into).collect(),
        }
    }
}

/// One computed property of a container: `name` is the top-level property
/// queries see, `query` (`SELECT VALUE <expr> FROM c`) derives its value
/// from each document (see [`crate::query::ComputedProperties`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComputedProperty {
    /// The property name queries use (`c.cp_lower`).
    pub name: String,
    /// `SELECT VALUE <expression> FROM c`.
    pub query: String,
}

impl ComputedProperty {
    /// A computed property `name` with its `query`.
    pub fn new(name: impl Into<String>, query: impl Into<String>) -> ComputedProperty {
        ComputedProperty {
            name: name.into(),
            query: query.into(),
        }
    }
}

/// Checks and compiles a container's computed properties.
///
/// # Errors
/// [`Error::BadRequest`] naming the container, the property and the rule
/// it breaks.
pub(crate) fn compile_computed_properties(
    container: &str,
    props: &[ComputedProperty],
) -> Result<crate::query::ComputedProperties> {
    crate::query::ComputedProperties::compile(
        props.iter().map(|p| (p.name.as_str(), p.query.as_str())),
    )
    .map_err(|e| Error::BadRequest(format!("container {container:?}: {e}")))
}

/// Parses a `computedProperties` array (`[{"name": "cp", "query": "SELECT
/// VALUE ... FROM c"}, ...]`); the rules of the definitions are checked when
/// a container takes them.
///
/// # Errors
/// A message naming what is not of that shape.
pub fn parse_computed_properties(props: &Value) -> Result<Vec<ComputedProperty>, String> {
    let shape = || {
        format!(
            "computedProperties must be an array of {{\"name\": \"...\", \"query\": \"SELECT VALUE ... FROM c\"}}, not {}",
            host_api::type_name(props)
        )
    };
    props
        .as_array()
        .ok_or_else(shape)?
        .iter()
        .map(|p| {
            let field = |key: &str| p.get(key).and_then(Value::as_str).map(str::to_owned);
            match (field("name"), field("query")) {
                (Some(name), Some(query)) => Ok(ComputedProperty { name, query }),
                _ => Err(format!(
                    "each computed property needs a string name and a string query, not {p}"
                )),
            }
        })
        .collect()
}

/// Checks a container's `defaultTtl`: absent, -1 or positive.
///
/// # Errors
/// [`Error::BadRequest`] naming the container for 0 or a value below -1.
pub(crate) fn validate_default_ttl(container: &str, ttl: Option<i32>) -> Result<()> {
    match ttl {
        None | Some(-1) => Ok(()),
        Some(n) if n > 0 => Ok(()),
        Some(n) => Err(Error::BadRequest(format!(
            "container {container:?}: defaultTtl must be -1 (on, items never expire unless they say so) \
             or a number of seconds from 1 to {}, not {n}",
            i32::MAX
        ))),
    }
}

/// Checks a document's `ttl` when time to live is on: absent, -1 or a
/// positive number of seconds.
///
/// # Errors
/// [`Error::BadRequest`] naming the document.
pub(crate) fn validate_item_ttl(container: &str, id: &str, doc: &Value) -> Result<()> {
    let Some(ttl) = host_api::member(doc, "ttl") else {
        return Ok(());
    };
    match ttl.as_i64() {
        Some(-1) => Ok(()),
        Some(n) if n > 0 && n <= i64::from(i32::MAX) => Ok(()),
        _ => Err(Error::BadRequest(format!(
            "document {id:?} in container {container:?}: ttl must be -1 (never expires) or a number \
             of seconds from 1 to {}, not {ttl}; leave it out to use the container's defaultTtl",
            i32::MAX
        ))),
    }
}

/// Checks a unique key policy.
///
/// # Errors
/// [`Error::BadRequest`] for too many keys or paths, an empty key, a path
/// that is not `/a/b`, or a path named twice in one key.
pub(crate) fn validate_unique_keys(container: &str, keys: &[UniqueKey]) -> Result<()> {
    let bad = |what: String| {
        Err(Error::BadRequest(format!(
            "container {container:?}: {what}"
        )))
    };
    if keys.len() > MAX_UNIQUE_KEYS {
        return bad(format!(
            "the unique key policy has {} unique keys, over the limit of {MAX_UNIQUE_KEYS}",
            keys.len()
        ));
    }
    for key in keys {
        if key.paths.is_empty() || key.paths.len() > MAX_UNIQUE_KEY_PATHS {
            return bad(format!(
                "a unique key needs 1 to {MAX_UNIQUE_KEY_PATHS} paths, not {}",
                key.paths.len()
            ));
        }
        for (i, path) in key.paths.iter().enumerate() {
            if segments(path).is_none() {
                return bad(format!(
                    "unique key path {path:?} must be a path such as /name or /address/zip"
                ));
            }
            if key.paths[..i].contains(path) {
                return bad(format!(
                    "unique key path {path:?} is named twice in one key"
                ));
            }
        }
    }
    Ok(())
}

/// The segments of `/a/b`, or `None` for anything else (no wildcards).
fn segments(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix('/')?;
    let parts: Vec<String> = rest
        .split('/')
        .map(|s| {
            s.strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .unwrap_or(s)
                .to_owned()
        })
        .collect();
    if parts
        .iter()
        .any(|s| s.is_empty() || s.contains(['*', '?', '[', ']']))
    {
        return None;
    }
    Some(parts)
}

/// The unique keys of a container, parsed once.
#[derive(Debug, Default)]
pub(crate) struct UniqueKeys {
    keys: Vec<(UniqueKey, Vec<Vec<String>>)>,
}

impl UniqueKeys {
    /// Parses validated keys.
    pub(crate) fn new(keys: &[UniqueKey]) -> UniqueKeys {
        UniqueKeys {
            keys: keys
                .iter()
                .map(|k| {
                    let parsed = k.paths.iter().filter_map(|p| segments(p)).collect();
                    (k.clone(), parsed)
                })
                .collect(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The first key on which `a` and `b` have the same values, with those
    /// values.
    pub(crate) fn clash<'k>(&'k self, a: &Value, b: &Value) -> Option<(&'k UniqueKey, Value)> {
        self.keys.iter().find_map(|(key, paths)| {
            let mut values = Vec::with_capacity(paths.len());
            for path in paths {
                let (x, y) = (at(a, path), at(b, path));
                if !same(x, y) {
                    return None;
                }
                values.push(x.clone());
            }
            Some((key, Value::Array(values)))
        })
    }
}

static NULL: Value = Value::Null;

/// The value at `path`, `null` when it is missing.
fn at<'v>(doc: &'v Value, path: &[String]) -> &'v Value {
    let mut v = doc;
    for segment in path {
        match host_api::member(v, segment) {
            Some(next) => v = next,
            None => return &NULL,
        }
    }
    v
}

/// JSON equality, with numbers compared by value (`1` and `1.0` are one value).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// When items of a container expire, as of one reading of the clock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expiry {
    /// The container's `defaultTtl`: -1 or positive.
    pub(crate) default_ttl: i64,
    /// Now, in seconds since the Unix epoch.
    pub(crate) now: u64,
}

impl Expiry {
    /// Whether `doc` has expired: its effective ttl (its own `ttl` when
    /// valid, else the container's) is positive and `_ts + ttl <= now`.
    pub(crate) fn expired(&self, doc: &Value) -> bool {
        let ttl = match host_api::member(doc, "ttl").and_then(Value::as_i64) {
            Some(n) if n == -1 || n > 0 => n,
            _ => self.default_ttl,
        };
        if ttl <= 0 {
            return false;
        }
        let ts = host_api::member(doc, "_ts")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        ts.saturating_add(ttl as u64) <= self.now
    }
}

/// The `settings` column of a container: `{"defaultTtl": n,
/// "uniqueKeyPolicy": {"uniqueKeys": [{"paths": [...]}]}, "databaseRid":
/// "AAAAAQ==", "computedProperties": [{"name": ..., "query": ...}]}`,
/// members left out when unset.
pub(crate) fn settings_json(meta: &crate::storage::ContainerMeta) -> String {
    let mut settings = serde_json::Map::new();
    if let Some(ttl) = meta.default_ttl {
        settings.insert("defaultTtl".into(), json!(ttl));
    }
    if !meta.unique_keys.is_empty() {
        settings.insert(
            "uniqueKeyPolicy".into(),
            json!({ "uniqueKeys": meta.unique_keys.iter().map(|k| json!({"paths": k.paths})).collect::<Vec<_>>() }),
        );
    }
    if let Some(rid) = meta.database_rid {
        settings.insert("databaseRid".into(), json!(STANDARD.encode(rid)));
    }
    if !meta.computed_properties.is_empty() {
        settings.insert(
            "computedProperties".into(),
            meta.computed_properties
                .iter()
                .map(|p| json!({"name": p.name, "query": p.query}))
                .collect(),
        );
    }
    if meta.indexing_policy != crate::IndexingPolicy::default() {
        settings.insert("indexingPolicy".into(), meta.indexing_policy.to_json());
    }
    Value::Object(settings).to_string()
}

/// Sets the settings of `meta` (time to live, unique keys, database rid,
/// computed properties, indexing policy) to those [`settings_json`] wrote
/// in `text`; a setting it left out (or a store older than the setting)
/// is the default.
///
/// # Errors
/// A message naming what is wrong.
pub(crate) fn apply_settings(
    meta: &mut crate::storage::ContainerMeta,
    text: &str,
) -> Result<(), String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let default_ttl = match value.get("defaultTtl") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| format!("defaultTtl {v} is not a 32-bit integer"))?,
        ),
    };
    let unique_keys = match value.get("uniqueKeyPolicy").map(|p| &p["uniqueKeys"]) {
        None | Some(Value::Null) => Vec::new(),
        Some(keys) => parse_unique_keys(keys)?,
    };
    let database_rid = match value.get("databaseRid") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_str()
                .and_then(|text| STANDARD.decode(text).ok())
                .and_then(|bytes| <[u8; 4]>::try_from(bytes).ok())
                .ok_or_else(|| format!("databaseRid {v} is not 4 bytes in base64"))?,
        ),
    };
    let computed_properties = match value.get("computedProperties") {
        None | Some(Value::Null) => Vec::new(),
        Some(props) => parse_computed_properties(props)?,
    };
    let indexing_policy = match value.get("indexingPolicy") {
        None | Some(Value::Null) => crate::IndexingPolicy::default(),
        Some(policy) => crate::IndexingPolicy::from_json(policy).map_err(|e| e.to_string())?,
    };
    meta.default_ttl = default_ttl;
    meta.unique_keys = unique_keys;
    meta.database_rid = database_rid;
    meta.computed_properties = computed_properties;
    meta.indexing_policy = indexing_policy;
    Ok(())
}

/// Parses the `uniqueKeys` array of a `uniqueKeyPolicy`
/// (`[{"paths": ["/name"]}, ...]`).
///
/// # Errors
/// A message naming what is not of that shape.
pub fn parse_unique_keys(keys: &Value) -> Result<Vec<UniqueKey>, String> {
    let shape =
        || format!("uniqueKeys must be an array of {{\"paths\": [\"/path\", ...]}}, not {keys}");
    keys.as_array()
        .ok_or_else(shape)?
        .iter()
        .map(|key| {
            let paths = key
                .get("paths")
                .and_then(Value::as_array)
                .ok_or_else(shape)?;
            paths
                .iter()
                .map(|p| p.as_str().map(str::to_owned).ok_or_else(shape))
                .collect::<Result<Vec<_>, _>>()
                .map(|paths| UniqueKey { paths })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ttl_values() {
        for ok in [None, Some(-1), Some(1), Some(i32::MAX)] {
            assert!(validate_default_ttl("c", ok).is_ok(), "{ok:?}");
        }
        for bad in [0, -2, -10, i32::MIN] {
            let err = validate_default_ttl("c", Some(bad)).unwrap_err();
            assert_eq!(err.status(), 400);
            assert!(err.to_string().contains("defaultTtl"), "{err}");
        }
    }

    #[test]
    fn item_ttl_values() {
        for ok in [json!({}), json!({"ttl": -1}), json!({"ttl": 5})] {
            assert!(validate_item_ttl("c", "d", &ok).is_ok(), "{ok}");
        }
        for bad in [
            json!({"ttl": 0}),
            json!({"ttl": null}),
            json!({"ttl": -10}),
            json!({"ttl": "5"}),
            json!({"ttl": 1.5}),
            json!({"ttl": 3_000_000_000u64}),
        ] {
            let err = validate_item_ttl("c", "d", &bad).unwrap_err();
            assert_eq!(err.status(), 400, "{bad}");
            assert!(err.to_string().contains("\"d\""), "{err}");
        }
    }

    #[test]
    fn expiry_follows_the_item_then_the_container() {
        let at = |default_ttl, now| Expiry { default_ttl, now };
        let doc = json!({"_ts": 100});
        assert!(!at(-1, 1_000_000).expired(&doc));
        assert!(!at(10, 109).expired(&doc));
        assert!(at(10, 110).expired(&doc));
        let own = json!({"_ts": 100, "ttl": 5});
        assert!(at(-1, 105).expired(&own));
        assert!(!at(-1, 104).expired(&own));
        let never = json!({"_ts": 100, "ttl": -1});
        assert!(!at(10, 1_000_000).expired(&never));
        let invalid = json!({"_ts": 100, "ttl": 0});
        assert!(at(10, 110).expired(&invalid), "an invalid ttl inherits");
    }

    #[test]
    fn unique_keys_compare_values_at_their_paths() {
        let keys = UniqueKeys::new(&[UniqueKey::new(["/name", "/address/zip"])]);
        let a = json!({"name": "a", "address": {"zip": 1}});
        let b = json!({"name": "a", "address": {"zip": 1.0}});
        let c = json!({"name": "a", "address": {"zip": 2}});
        let (key, values) = keys.clash(&a, &b).unwrap();
        assert_eq!(key.paths, ["/name", "/address/zip"]);
        assert_eq!(values, json!(["a", 1]));
        assert!(keys.clash(&a, &c).is_none());
        // Missing paths are null, and nulls clash.
        assert!(keys.clash(&json!({}), &json!({"name": null})).is_some());
    }

    #[test]
    fn unique_key_policies_are_checked() {
        assert!(validate_unique_keys("c", &[UniqueKey::new(["/a", "/b/c"])]).is_ok());
        for bad in [
            vec![UniqueKey::new(Vec::<String>::new())],
            vec![UniqueKey::new(["a"])],
            vec![UniqueKey::new(["/a/"])],
            vec![UniqueKey::new(["/a/*"])],
            vec![UniqueKey::new(["/a", "/a"])],
            vec![UniqueKey::new(["/a"]); 11],
        ] {
            let err = validate_unique_keys("c", &bad).unwrap_err();
            assert_eq!(err.status(), 400, "{bad:?}");
        }
    }

    #[test]
    fn settings_round_trip() {
        let meta = crate::storage::ContainerMeta {
            id: "c".into(),
            ordinal: 1,
            partition_key_path: "/pk".into(),
            physical_partitions: 1,
            default_ttl: Some(10),
            unique_keys: vec![UniqueKey::new(["/name"])],
            database_rid: Some([0, 0, 0, 1]),
            computed_properties: vec![ComputedProperty::new("cp", "SELECT VALUE 1 FROM c")],
            indexing_policy: crate::IndexingPolicy::from_json(&json!({
                "excludedPaths": [{"path": "/body/*"}],
                "compositeIndexes": [[{"path": "/a"}, {"path": "/b", "order": "descending"}]]
            }))
            .unwrap(),
        };
        let plain = crate::storage::ContainerMeta {
            default_ttl: None,
            unique_keys: Vec::new(),
            database_rid: None,
            computed_properties: Vec::new(),
            indexing_policy: crate::IndexingPolicy::default(),
            ..meta.clone()
        };
        let read = |text: &str| {
            let mut read = plain.clone();
            apply_settings(&mut read, text).map(|()| read)
        };
        assert_eq!(read(&settings_json(&meta)).unwrap(), meta);
        // A default policy is not written, and a store without one (older
        // than policies) reads back the default.
        assert_eq!(settings_json(&plain), "{}");
        assert_eq!(read("{}").unwrap(), plain);
        assert!(read("{\"computedProperties\": {}}").is_err());
        assert!(read("{\"defaultTtl\": \"x\"}").is_err());
        assert!(read("{\"databaseRid\": \"AAAA\"}").is_err());
        assert!(read("{\"indexingPolicy\": {\"compositeIndexes\": [[]]}}").is_err());
    }
}

/// Time to live, unique keys and partition deletes through the database.
#[cfg(test)]
mod database_tests {
    use std::time::{Duration, UNIX_EPOCH};

    use host_api::{Collection, QueryRequest};
    use serde_json::json;

    use crate::{
        ChangeKind, ContainerProperties, Database, Error, FeedOptions, IndexingPolicy, Lsn,
        ManualClock, Options, QueryItemsOptions, UniqueKey, storage::MemoryStorage,
    };

    fn db() -> (Database, ManualClock) {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_000_000));
        let options = Options {
            clock: clock.clock(),
            purge_interval: None,
            ..Options::default()
        };
        let db = Database::with_storage(Box::new(MemoryStorage::new()), options).unwrap();
        (db, clock)
    }

    fn ids(docs: impl IntoIterator<Item = serde_json::Value>) -> Vec<String> {
        docs.into_iter()
            .map(|d| d["id"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    #[test]
    fn ts_comes_from_the_clock() {
        let (db, clock) = db();
        let c = db.create_container("c", "/pk").unwrap();
        let doc = c
            .create_item("p", json!({"id": "a", "pk": "p"}), None)
            .unwrap();
        assert_eq!(doc.ts(), 1_000_000);
        clock.advance(Duration::from_secs(7));
        let doc = c
            .upsert_item("p", json!({"id": "a", "pk": "p"}), None)
            .unwrap();
        assert_eq!(doc.ts(), 1_000_007);
    }

    #[test]
    fn an_expired_item_is_invisible_everywhere_then_purged() {
        let (db, clock) = db();
        let c = db
            .create_container_with(ContainerProperties::new("c", "/pk").with_default_ttl(10))
            .unwrap();
        c.create_item("p", json!({"id": "short", "pk": "p"}), None)
            .unwrap();
        c.create_item("p", json!({"id": "long", "pk": "p", "ttl": 100}), None)
            .unwrap();
        c.create_item("p", json!({"id": "forever", "pk": "p", "ttl": -1}), None)
            .unwrap();
        clock.advance(Duration::from_secs(9));
        assert!(c.read_item("p", "short").is_ok(), "not yet: 9 s of 10");
        clock.advance(Duration::from_secs(1));

        assert_eq!(c.read_item("p", "short").unwrap_err().status(), 404);
        let feed = c.read_feed("p", &FeedOptions::default()).unwrap();
        assert_eq!(
            ids(feed.items.into_iter().map(|d| d.into_value())),
            ["long", "forever"]
        );
        let page = c
            .query_items(
                "SELECT * FROM c",
                &Default::default(),
                &QueryItemsOptions::default(),
            )
            .unwrap();
        assert_eq!(ids(page.items), ["long", "forever"]);
        let changes = c.read_changes(Lsn::ZERO, 100).unwrap();
        assert_eq!(changes[0].id, "short");
        assert_eq!(
            changes[0].kind,
            ChangeKind::Delete,
            "the feed drops it at once"
        );
        assert!(changes[0].document.is_none());

        // A transaction (what a script sees) treats it as absent.
        c.transaction("p", |txn| {
            assert!(txn.get_item("short").is_none());
            assert_eq!(txn.view().len(), 2);
            let page = Collection::query(
                txn,
                QueryRequest {
                    sql: "SELECT VALUE c.id FROM c",
                    parameters: &Default::default(),
                    page_size: None,
                    continuation: None,
                },
            )
            .unwrap();
            assert_eq!(page.items, [json!("long"), json!("forever")]);
            let feed = Collection::read_feed(txn, None, None).unwrap();
            assert_eq!(feed.items.len(), 2);
            assert_eq!(
                Collection::read(txn, "short").unwrap_err().code.as_u16(),
                404
            );
            Ok::<_, Error>(())
        })
        .unwrap();

        // Its id is free again.
        c.transaction("p", |txn| {
            txn.create_item(json!({"id": "short", "pk": "p", "ttl": 5}))?;
            Ok::<_, Error>(())
        })
        .unwrap();
        clock.advance(Duration::from_secs(5));

        let before = c.read_changes(Lsn::ZERO, 100).unwrap().last().unwrap().lsn;
        assert_eq!(db.purge_expired().unwrap(), 1);
        let purge = c.read_changes(before, 100).unwrap();
        assert_eq!(purge.len(), 1);
        assert_eq!(
            (purge[0].id.as_str(), purge[0].kind),
            ("short", ChangeKind::Delete)
        );
        assert_eq!(
            c.snapshot(&"p".into()).unwrap().len(),
            2,
            "gone from storage"
        );
        assert_eq!(db.purge_expired().unwrap(), 0);

        clock.advance(Duration::from_secs(90));
        assert_eq!(c.purge_expired().unwrap(), 1);
        assert_eq!(c.read_item("p", "forever").unwrap().id(), "forever");
    }

    #[test]
    fn ttl_off_ignores_item_ttl_and_minus_one_needs_an_item_ttl() {
        let (db, clock) = db();
        let off = db.create_container("off", "/pk").unwrap();
        off.create_item("p", json!({"id": "a", "pk": "p", "ttl": 1}), None)
            .unwrap();
        off.create_item("p", json!({"id": "b", "pk": "p", "ttl": 0}), None)
            .unwrap();
        let on = db
            .create_container_with(ContainerProperties::new("on", "/pk").with_default_ttl(-1))
            .unwrap();
        on.create_item("p", json!({"id": "a", "pk": "p", "ttl": 1}), None)
            .unwrap();
        on.create_item("p", json!({"id": "b", "pk": "p"}), None)
            .unwrap();
        clock.advance(Duration::from_secs(3600));
        assert!(off.read_item("p", "a").is_ok());
        assert!(on.read_item("p", "a").is_err());
        assert!(on.read_item("p", "b").is_ok());
    }

    #[test]
    fn ttl_values_are_validated() {
        let (db, _) = db();
        for bad in [0, -2, -10] {
            let err = db
                .create_container_with(ContainerProperties::new("c", "/pk").with_default_ttl(bad))
                .unwrap_err();
            assert_eq!(err.status(), 400, "{bad}");
        }
        assert!(db.containers().is_empty());
        let c = db
            .create_container_with(ContainerProperties::new("c", "/pk").with_default_ttl(10))
            .unwrap();
        for bad in [json!(0), json!(null), json!(-10), json!("5")] {
            let err = c
                .create_item("p", json!({"id": "a", "pk": "p", "ttl": bad}), None)
                .unwrap_err();
            assert_eq!(err.status(), 400, "{bad}");
        }
        assert_eq!(c.set_default_ttl(Some(0)).unwrap_err().status(), 400);
        assert_eq!(c.properties().default_ttl, Some(10));
    }

    #[test]
    fn changing_the_default_ttl_applies_to_existing_items() {
        let (db, clock) = db();
        let c = db.create_container("c", "/pk").unwrap();
        c.create_item("p", json!({"id": "a", "pk": "p"}), None)
            .unwrap();
        clock.advance(Duration::from_secs(60));
        c.set_default_ttl(Some(30)).unwrap();
        assert_eq!(c.properties().default_ttl, Some(30));
        assert_eq!(c.read_item("p", "a").unwrap_err().status(), 404);
        c.set_default_ttl(None).unwrap();
        assert!(
            c.read_item("p", "a").is_ok(),
            "expired but not purged: back"
        );
    }

    fn unique(db: &Database) -> crate::Container {
        db.create_container_with(
            ContainerProperties::new("u", "/pk").with_unique_key(["/name", "/address/zip"]),
        )
        .unwrap()
    }

    #[test]
    fn unique_keys_refuse_duplicates_in_a_partition_on_every_write() {
        let (db, _) = db();
        let c = unique(&db);
        assert_eq!(
            c.properties().unique_keys,
            [UniqueKey::new(["/name", "/address/zip"])]
        );
        let doc = |id: &str, pk: &str, name: &str, zip: i64| json!({"id": id, "pk": pk, "name": name, "address": {"zip": zip}});
        c.create_item("p", doc("a", "p", "x", 1), None).unwrap();
        c.create_item("p", doc("b", "p", "x", 2), None).unwrap();
        c.create_item("q", doc("a", "q", "x", 1), None).unwrap();

        let err = c.create_item("p", doc("c", "p", "x", 1), None).unwrap_err();
        assert_eq!(err.status(), 409);
        let text = err.to_string();
        assert!(text.contains("/name") && text.contains("\"a\""), "{text}");
        let err = c
            .replace_item("p", "b", doc("b", "p", "x", 1), None)
            .unwrap_err();
        assert!(matches!(err, Error::UniqueKeyConflict { .. }), "{err}");
        let err = c.upsert_item("p", doc("d", "p", "x", 1), None).unwrap_err();
        assert_eq!(err.status(), 409);
        // Writing a document over itself, or renaming it, is no clash.
        c.upsert_item("p", doc("a", "p", "x", 1), None).unwrap();
        c.replace_item("p", "a", doc("a2", "p", "x", 1), None)
            .unwrap();
        // Missing paths are null: only one document may lack them.
        c.create_item("p", json!({"id": "e", "pk": "p"}), None)
            .unwrap();
        assert_eq!(
            c.create_item("p", json!({"id": "f", "pk": "p"}), None)
                .unwrap_err()
                .status(),
            409
        );
        // Within one transaction, against its own writes; nothing applied.
        let err = c
            .transaction("p", |txn| {
                txn.create_item(doc("g", "p", "y", 1))?;
                txn.create_item(doc("h", "p", "y", 1))
            })
            .unwrap_err();
        assert_eq!(err.status(), 409);
        assert!(c.read_item("p", "g").is_err());
        // Freed by a delete in the same transaction.
        c.transaction("p", |txn| {
            txn.delete_item("b", None)?;
            txn.create_item(doc("b2", "p", "x", 2))
        })
        .unwrap();
        // A script's write goes through the same check.
        let err = c
            .transaction("p", |txn| {
                Collection::create(txn, doc("i", "p", "x", 2))
                    .map_err(|e| Error::BadRequest(e.message))
            })
            .unwrap_err();
        assert!(err.to_string().contains("unique key"), "{err}");
    }

    #[test]
    fn an_expired_item_frees_its_unique_key() {
        let (db, clock) = db();
        let c = db
            .create_container_with(
                ContainerProperties::new("u", "/pk")
                    .with_default_ttl(5)
                    .with_unique_key(["/name"]),
            )
            .unwrap();
        c.create_item("p", json!({"id": "a", "pk": "p", "name": "n"}), None)
            .unwrap();
        clock.advance(Duration::from_secs(5));
        c.create_item("p", json!({"id": "b", "pk": "p", "name": "n"}), None)
            .unwrap();
    }

    #[test]
    fn bad_unique_key_policies_are_refused() {
        let (db, _) = db();
        let err = db
            .create_container_with(ContainerProperties::new("u", "/pk").with_unique_key(["name"]))
            .unwrap_err();
        assert_eq!(err.status(), 400);
    }

    #[test]
    fn delete_all_items_by_partition_key_is_one_transaction() {
        let (db, _) = db();
        let c = db.create_container("c", "/pk").unwrap();
        for id in ["a", "b", "c"] {
            c.create_item("p", json!({"id": id, "pk": "p"}), None)
                .unwrap();
        }
        c.create_item("q", json!({"id": "a", "pk": "q"}), None)
            .unwrap();
        let before = c.read_changes(Lsn::ZERO, 100).unwrap().last().unwrap().lsn;
        assert_eq!(c.delete_all_items_by_partition_key("p").unwrap(), 3);
        let changes = c.read_changes(before, 100).unwrap();
        assert_eq!(changes.len(), 3);
        assert!(
            changes
                .iter()
                .all(|ch| ch.kind == ChangeKind::Delete && ch.lsn == changes[0].lsn)
        );
        assert!(c.snapshot(&"p".into()).unwrap().is_empty());
        assert!(c.read_item("q", "a").is_ok());
        assert_eq!(c.delete_all_items_by_partition_key("nobody").unwrap(), 0);
        assert_eq!(c.delete_all_items_by_partition_key("p").unwrap(), 0);
    }

    #[test]
    fn the_background_purge_deletes_expired_items() {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_000_000));
        let options = Options {
            clock: clock.clock(),
            purge_interval: Some(Duration::from_millis(10)),
            ..Options::default()
        };
        let db = Database::with_storage(Box::new(MemoryStorage::new()), options).unwrap();
        let c = db
            .create_container_with(ContainerProperties::new("c", "/pk").with_default_ttl(1))
            .unwrap();
        c.create_item("p", json!({"id": "a", "pk": "p"}), None)
            .unwrap();
        clock.advance(Duration::from_secs(1));
        // Polls with a ceiling, never a timing assertion.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !c.snapshot(&"p".into()).unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "never purged");
            std::thread::sleep(Duration::from_millis(10));
        }
        let changes = c.read_changes(Lsn(1), 10).unwrap();
        assert_eq!(
            (changes[0].id.as_str(), changes[0].kind),
            ("a", ChangeKind::Delete)
        );
    }

    #[test]
    fn the_purge_goes_through_a_container_a_slice_at_a_time() {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_000_000));
        let options = Options {
            clock: clock.clock(),
            purge_interval: None,
            ..Options::default()
        };
        let db = Database::with_storage(Box::new(MemoryStorage::new()), options).unwrap();
        let c = db
            .create_container_with(ContainerProperties::new("c", "/pk").with_default_ttl(1))
            .unwrap();
        for p in 0..10 {
            for id in ["a", "b"] {
                c.create_item(
                    format!("p{p}"),
                    json!({"id": id, "pk": format!("p{p}")}),
                    None,
                )
                .unwrap();
            }
        }
        clock.advance(Duration::from_secs(1));
        let (mut cursor, mut slices, mut purged) = (None, 0, 0);
        loop {
            let (n, last) = c.purge_expired_after(cursor.as_ref(), 4).unwrap();
            purged += n;
            slices += 1;
            match last {
                Some(key) => cursor = Some(key),
                None => break,
            }
        }
        assert_eq!((slices, purged), (3, 20));
        assert!(c.partition_keys().unwrap().is_empty());
    }

    #[test]
    fn settings_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Database::open(dir.path()).unwrap();
            let c = db
                .create_container_with(
                    ContainerProperties::new("c", "/pk")
                        .with_default_ttl(60)
                        .with_unique_key(["/name"]),
                )
                .unwrap();
            c.set_default_ttl(Some(-1)).unwrap();
        }
        let db = Database::open(dir.path()).unwrap();
        let props = db.container("c").unwrap().properties();
        assert_eq!(props.default_ttl, Some(-1));
        assert_eq!(props.unique_keys, [UniqueKey::new(["/name"])]);
    }

    fn query(c: &crate::Container, sql: &str) -> Vec<serde_json::Value> {
        c.query_items(sql, &Default::default(), &QueryItemsOptions::default())
            .unwrap()
            .items
    }

    fn computed(db: &Database) -> crate::Container {
        let c = db
            .create_container_with(
                ContainerProperties::new("cp", "/pk")
                    .with_computed_property("cp_lower", "SELECT VALUE LOWER(c.name) FROM c")
                    .with_computed_property("cp_sq", "SELECT VALUE POWER(c.n, 2) FROM c"),
            )
            .unwrap();
        for (id, name, n) in [("a", "Ann", 1), ("b", "BOB", 3), ("c", "ann", 2)] {
            c.create_item(
                "p",
                json!({"id": id, "pk": "p", "name": name, "n": n}),
                None,
            )
            .unwrap();
        }
        c
    }

    #[test]
    fn computed_properties_are_queryable_but_not_stored() {
        let (db, _) = db();
        let c = computed(&db);
        assert_eq!(
            ids(query(&c, "SELECT * FROM c WHERE c.cp_lower = 'ann'")),
            ["a", "c"]
        );
        // `SELECT *` and the stored document leave them out.
        let star = query(&c, "SELECT * FROM c WHERE c.id = 'a'");
        assert!(star[0].get("cp_lower").is_none(), "{star:?}");
        assert!(
            c.read_item("p", "a")
                .unwrap()
                .value()
                .get("cp_sq")
                .is_none()
        );
        // Named explicitly, they are projected, ordered by, aggregated, grouped.
        assert_eq!(
            query(&c, "SELECT c.id, c.cp_sq FROM c ORDER BY c.cp_sq DESC"),
            [
                json!({"id": "b", "cp_sq": 9}),
                json!({"id": "c", "cp_sq": 4}),
                json!({"id": "a", "cp_sq": 1})
            ]
        );
        assert_eq!(query(&c, "SELECT VALUE SUM(c.cp_sq) FROM c"), [json!(14)]);
        assert_eq!(
            query(
                &c,
                "SELECT c.cp_lower, COUNT(1) AS n FROM c GROUP BY c.cp_lower"
            ),
            [
                json!({"cp_lower": "ann", "n": 2}),
                json!({"cp_lower": "bob", "n": 1})
            ]
        );
        assert_eq!(
            query(
                &c,
                "SELECT VALUE EXISTS(SELECT VALUE 1 FROM t IN c.tags WHERE c.cp_sq > 5) FROM c WHERE c.cp_sq > 5"
            ),
            [json!(false)]
        );
        // Only on the document itself: not on a path bound in FROM.
        assert!(query(&c, "SELECT VALUE x.cp_lower FROM x IN c.kids").is_empty());
        // A transaction's queries (what a script runs) see them too.
        c.transaction("p", |txn| {
            let page = Collection::query(
                txn,
                QueryRequest {
                    sql: "SELECT VALUE c.id FROM c WHERE c.cp_lower = 'bob'",
                    parameters: &Default::default(),
                    page_size: None,
                    continuation: None,
                },
            )
            .unwrap();
            assert_eq!(page.items, [json!("b")]);
            Ok::<_, Error>(())
        })
        .unwrap();
    }

    #[test]
    fn computed_properties_are_replaced_whole() {
        let (db, _) = db();
        let c = computed(&db);
        c.set_computed_properties(vec![crate::ComputedProperty::new(
            "cp_upper",
            "SELECT VALUE UPPER(c.name) FROM c",
        )])
        .unwrap();
        assert_eq!(
            ids(query(&c, "SELECT * FROM c WHERE c.cp_upper = 'ANN'")),
            ["a", "c"]
        );
        assert!(query(&c, "SELECT * FROM c WHERE c.cp_lower = 'ann'").is_empty());
        assert_eq!(c.properties().computed_properties.len(), 1);
        c.set_computed_properties(Vec::new()).unwrap();
        assert!(c.properties().computed_properties.is_empty());
        assert!(query(&c, "SELECT * FROM c WHERE c.cp_upper = 'ANN'").is_empty());
        // A later time-to-live change keeps them, and the other way round.
        c.set_computed_properties(vec![crate::ComputedProperty::new(
            "x",
            "SELECT VALUE 1 FROM c",
        )])
        .unwrap();
        c.set_default_ttl(Some(-1)).unwrap();
        assert_eq!(c.properties().computed_properties.len(), 1);
    }

    #[test]
    fn bad_computed_properties_are_refused() {
        let (db, _) = db();
        let c = db.create_container("c", "/pk").unwrap();
        let cases = [
            ("cp", "SELECT c.name FROM c", "SELECT VALUE"),
            ("cp", "SELECT VALUE c.name FROM c WHERE c.n > 1", "WHERE"),
            ("cp", "SELECT VALUE c.name FROM c ORDER BY c.n", "ORDER BY"),
            ("cp", "SELECT VALUE COUNT(1) FROM c", "aggregate"),
            ("cp", "SELECT TOP 1 VALUE c.name FROM c", "TOP"),
            ("cp", "SELECT VALUE t FROM c JOIN t IN c.tags", "JOIN"),
            ("cp", "SELECT VALUE k.name FROM c.kids k", "path"),
            ("cp", "SELECT VALUE @x FROM c", "parameters"),
            ("cp", "SELECT VALUE GetCurrentDateTime() FROM c", "clock"),
            (
                "cp",
                "SELECT VALUE ARRAY(SELECT VALUE t FROM t IN c.tags) FROM c",
                "subqueries",
            ),
            ("cp", "SELECT VALUE udf.f(c) FROM c", "user-defined"),
            ("cp", "SELECT VALUE FROM c", "syntax error"),
            ("id", "SELECT VALUE 1 FROM c", "system property"),
            ("a/b", "SELECT VALUE 1 FROM c", "not a path"),
            ("", "SELECT VALUE 1 FROM c", "empty"),
        ];
        for (name, sql, want) in cases {
            let err = c
                .set_computed_properties(vec![crate::ComputedProperty::new(name, sql)])
                .unwrap_err();
            assert_eq!(err.status(), 400, "{sql}");
            assert!(err.to_string().contains(want), "{sql}: {err}");
        }
        let twice = vec![
            crate::ComputedProperty::new("x", "SELECT VALUE 1 FROM c"),
            crate::ComputedProperty::new("x", "SELECT VALUE 2 FROM c"),
        ];
        assert!(
            c.set_computed_properties(twice)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        let many = (0..21)
            .map(|i| crate::ComputedProperty::new(format!("p{i}"), "SELECT VALUE 1 FROM c"))
            .collect();
        assert!(
            c.set_computed_properties(many)
                .unwrap_err()
                .to_string()
                .contains("at most 20")
        );
        let deep = format!("SELECT VALUE {}true FROM c", "NOT ".repeat(40));
        let err = c
            .set_computed_properties(vec![crate::ComputedProperty::new("d", deep)])
            .unwrap_err();
        assert!(err.to_string().contains("nests"), "{err}");
        let err = db
            .create_container_with(
                ContainerProperties::new("bad", "/pk").with_computed_property("cp", "SELECT 1"),
            )
            .unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(db.container("bad").is_err(), "nothing was created");
        assert!(c.properties().computed_properties.is_empty());
    }

    #[test]
    fn computed_properties_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Database::open(dir.path()).unwrap();
            computed(&db);
        }
        let db = Database::open(dir.path()).unwrap();
        let c = db.container("cp").unwrap();
        assert_eq!(c.properties().computed_properties.len(), 2);
        assert_eq!(ids(query(&c, "SELECT * FROM c WHERE c.cp_sq = 9")), ["b"]);
    }

    fn policy(v: serde_json::Value) -> IndexingPolicy {
        IndexingPolicy::from_json(&v).unwrap()
    }

    #[test]
    fn indexing_policies_are_kept_replaced_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let first = policy(json!({
            "excludedPaths": [{"path": "/body/*"}],
            "compositeIndexes": [[{"path": "/a"}, {"path": "/b", "order": "descending"}]],
            "spatialIndexes": [{"path": "/where/*", "types": ["Point"]}]
        }));
        let second = policy(json!({"indexingMode": "none"}));
        {
            let db = Database::open(dir.path()).unwrap();
            let c = db
                .create_container_with(
                    ContainerProperties::new("c", "/pk")
                        .with_indexing_policy(first.clone())
                        .with_computed_property("cp", "SELECT VALUE 1 FROM c"),
                )
                .unwrap();
            assert_eq!(*c.indexing_policy(), first);
            assert_eq!(c.properties().indexing_policy, first);
            let plain = db.create_container("plain", "/pk").unwrap();
            assert_eq!(*plain.indexing_policy(), IndexingPolicy::default());
        }
        {
            let db = Database::open(dir.path()).unwrap();
            let c = db.container("c").unwrap();
            assert_eq!(*c.indexing_policy(), first);
            c.set_indexing_policy(second.clone()).unwrap();
            assert_eq!(*c.indexing_policy(), second);
            // Replacing the policy keeps the other settings, and they it.
            c.set_computed_properties(Vec::new()).unwrap();
            assert_eq!(*c.indexing_policy(), second);
        }
        let db = Database::open(dir.path()).unwrap();
        let c = db.container("c").unwrap();
        assert_eq!(*c.indexing_policy(), second);
        assert!(c.properties().computed_properties.is_empty());
        let plain = db.container("plain").unwrap();
        assert_eq!(*plain.indexing_policy(), IndexingPolicy::default());
    }

    #[test]
    fn bad_indexing_policies_are_refused_and_partial_ones_completed() {
        let (db, _) = db();
        let one_path = IndexingPolicy {
            composite_indexes: vec![vec![crate::CompositePath::new(
                "/a",
                crate::SortOrder::Ascending,
            )]],
            ..IndexingPolicy::default()
        };
        let err = db
            .create_container_with(
                ContainerProperties::new("bad", "/pk").with_indexing_policy(one_path.clone()),
            )
            .unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(err.to_string().contains("composite index"), "{err}");
        assert!(db.container("bad").is_err(), "nothing was created");
        let c = db.create_container("c", "/pk").unwrap();
        let err = c.set_indexing_policy(one_path).unwrap_err();
        assert_eq!(err.status(), 400);
        let no_root = IndexingPolicy {
            included_paths: vec![crate::IndexPath::new("/a/?")],
            ..IndexingPolicy::default()
        };
        let err = c.set_indexing_policy(no_root).unwrap_err();
        assert!(err.to_string().contains("mandatory indexing path"), "{err}");
        assert_eq!(*c.indexing_policy(), IndexingPolicy::default());
        // Built in Rust without the _etag path: completed as the service
        // completes a client's policy.
        let partial = IndexingPolicy {
            excluded_paths: vec![crate::IndexPath::new("/body/*")],
            ..IndexingPolicy::default()
        };
        c.set_indexing_policy(partial).unwrap();
        assert_eq!(
            c.indexing_policy().excluded_paths,
            [
                crate::IndexPath::new("/body/*"),
                crate::IndexPath::new(crate::indexing::ETAG_PATH)
            ]
        );
    }

    fn query_error(c: &crate::Container, sql: &str) -> String {
        let err = c
            .query_items(sql, &Default::default(), &QueryItemsOptions::default())
            .unwrap_err();
        assert_eq!(err.status(), 400, "{sql}: {err}");
        err.to_string()
    }

    #[test]
    fn order_by_is_served_by_the_policy_or_refused_as_the_service_refuses_it() {
        let (db, _) = db();
        let no_composite = "The order by query does not have a corresponding composite index \
                            that it can be served from.";
        let excluded = "The index path corresponding to the specified order-by item is excluded.";
        let c = db.create_container("c", "/pk").unwrap();
        for (id, a, b) in [("x", 1, "q"), ("y", 1, "p"), ("z", 0, "r")] {
            c.create_item(
                "p",
                json!({"id": id, "pk": "p", "a": a, "b": b, "body": {"n": a}}),
                None,
            )
            .unwrap();
        }
        // The default policy: every single path but _etag, no composite index.
        assert_eq!(
            query(&c, "SELECT VALUE c.a FROM c ORDER BY c.a DESC"),
            [json!(1), json!(1), json!(0)]
        );
        assert_eq!(ids(query(&c, "SELECT * FROM c ORDER BY c.body.n")).len(), 3);
        assert!(query_error(&c, "SELECT * FROM c ORDER BY c._etag").ends_with(excluded));
        assert!(query_error(&c, "SELECT * FROM c ORDER BY c.a, c.b").ends_with(no_composite));
        assert!(
            query_error(&c, "SELECT * FROM c ORDER BY c['a'] DESC, c.id").ends_with(no_composite)
        );
        // What is not a path of the document is not checked (the service
        // refuses some of it for reasons of its own).
        assert_eq!(
            query(
                &c,
                "SELECT VALUE [t, c.id] FROM c JOIN t IN [1] ORDER BY t, c.id"
            )
            .len(),
            3
        );
        // A transaction's queries (a script's) follow the same policy.
        let err = c
            .transaction("p", |txn| {
                Collection::query(
                    txn,
                    QueryRequest {
                        sql: "SELECT * FROM c ORDER BY c.a, c.b",
                        parameters: &Default::default(),
                        page_size: None,
                        continuation: None,
                    },
                )
            })
            .unwrap_err();
        assert!(err.to_string().contains(no_composite), "{err}");

        c.set_indexing_policy(policy(json!({
            "excludedPaths": [{"path": "/body/*"}],
            "compositeIndexes": [[{"path": "/a", "order": "ascending"}, {"path": "/b", "order": "descending"}]]
        })))
        .unwrap();
        assert_eq!(
            ids(query(&c, "SELECT * FROM c ORDER BY c.a, c.b DESC")),
            ["z", "x", "y"]
        );
        assert_eq!(
            ids(query(&c, "SELECT * FROM c ORDER BY c.a DESC, c.b ASC")),
            ["y", "x", "z"],
            "the exact reverse"
        );
        assert!(query_error(&c, "SELECT * FROM c ORDER BY c.a, c.b").ends_with(no_composite));
        assert!(query_error(&c, "SELECT * FROM c ORDER BY c.b DESC, c.a").ends_with(no_composite));
        assert!(query_error(&c, "SELECT * FROM c ORDER BY c.body.n").ends_with(excluded));
        assert_eq!(
            ids(query(&c, "SELECT * FROM c ORDER BY c.id DESC")),
            ["z", "y", "x"]
        );
        // Mode none: no index to ask.
        c.set_indexing_policy(policy(json!({"indexingMode": "none"})))
            .unwrap();
        assert_eq!(query(&c, "SELECT * FROM c ORDER BY c.a, c.b").len(), 3);
    }

    #[test]
    fn time_to_live_needs_an_index() {
        let (db, _) = db();
        let none = policy(json!({"indexingMode": "none"}));
        let err = db
            .create_container_with(
                ContainerProperties::new("both", "/pk")
                    .with_default_ttl(60)
                    .with_indexing_policy(none.clone()),
            )
            .unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(err.to_string().contains("time to live"), "{err}");
        let unindexed = db
            .create_container_with(
                ContainerProperties::new("unindexed", "/pk").with_indexing_policy(none.clone()),
            )
            .unwrap();
        assert_eq!(
            unindexed.set_default_ttl(Some(60)).unwrap_err().status(),
            400
        );
        assert_eq!(unindexed.properties().default_ttl, None);
        let expiring = db
            .create_container_with(ContainerProperties::new("expiring", "/pk").with_default_ttl(60))
            .unwrap();
        assert_eq!(
            expiring
                .set_indexing_policy(none.clone())
                .unwrap_err()
                .status(),
            400
        );
        // Off first, then none: allowed.
        expiring.set_default_ttl(None).unwrap();
        expiring.set_indexing_policy(none).unwrap();
    }
}
