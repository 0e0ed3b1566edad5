//! The collection: reads, writes and queries on the call's logical
//! partition, as `getContext().getCollection()` offers them in JavaScript.
//!
//! Every method is one host call (plus `take_result` for a large result).
//! Documents go in as anything [`ToJson`] (any [`Serialize`] type, or a
//! [`RawDoc`](crate::RawDoc) that keeps untouched members as text); point
//! reads decode them as anything [`FromJson`], queries and feeds as any
//! [`DeserializeOwned`] type; a write returns [`Written`], from which the
//! stored document can be read before the next operation. Writes take
//! [`WriteOptions`]; queries are built with [`Query`] and return one
//! [`Page`] at a time.

use host_api::ErrorCode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::call::{decode_host, encode, with_result, with_result_waiting, without_result};
use crate::{Error, FromJson, ToJson, Written, sys};

/// The call's logical partition. Get it with [`collection()`](crate::collection).
#[derive(Clone, Copy, Debug, Default)]
pub struct Collection {
    _private: (),
}

impl Collection {
    pub(crate) const fn new() -> Collection {
        Collection { _private: () }
    }
}

/// Options of a write.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteOptions {
    /// If-Match: the write fails with 412 unless the document's current
    /// `_etag` is this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// For create and upsert: refuse (400) a document without an `id`
    /// instead of generating one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disable_automatic_id_generation: bool,
}

impl WriteOptions {
    /// Options with an If-Match etag.
    pub fn if_match(etag: impl Into<String>) -> WriteOptions {
        WriteOptions {
            etag: Some(etag.into()),
            ..WriteOptions::default()
        }
    }

    /// The options' JSON, empty when there are none (the ABI's "no options").
    pub(crate) fn encode(&self) -> Result<Vec<u8>, Error> {
        if *self == WriteOptions::default() {
            Ok(Vec::new())
        } else {
            encode("write options", self)
        }
    }
}

/// Where a read feed starts and how long its page is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedOptions {
    /// The most documents in the page (the host's default otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u32>,
    /// The previous page's [`Page::continuation`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continuation: Option<String>,
}

/// One page of a query or read feed.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Page<T> {
    /// The items: documents, projections or scalars.
    pub items: Vec<T>,
    /// Pass back (in [`Query::continuation`] or [`FeedOptions`]) for the
    /// next page; `None` when this is the last.
    pub continuation: Option<String>,
}

/// A SQL query with its parameters, page size and continuation.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Query {
    query: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    parameters: Vec<Parameter>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    continuation: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct Parameter {
    name: String,
    value: Value,
}

impl Query {
    /// A query with this SQL text, such as
    /// `"SELECT * FROM p WHERE p.userId = @userId"`.
    pub fn new(sql: impl Into<String>) -> Query {
        Query {
            query: sql.into(),
            parameters: Vec::new(),
            page_size: None,
            continuation: None,
        }
    }

    /// Binds the parameter `name` (with its `@`) to `value`.
    pub fn param(mut self, name: impl Into<String>, value: impl Into<Value>) -> Query {
        self.parameters.push(Parameter {
            name: name.into(),
            value: value.into(),
        });
        self
    }

    /// The most items per page (the host's default, 100, otherwise).
    pub fn page_size(mut self, n: u32) -> Query {
        self.page_size = Some(n);
        self
    }

    /// Continues where the page that returned `token` stopped; `None`
    /// starts over.
    pub fn continuation(mut self, token: Option<String>) -> Query {
        self.continuation = token;
        self
    }
}

/// A write: the host keeps the stored document waiting, unserialized, in
/// case the procedure asks for it ([`Written`]).
fn written(op: impl FnOnce(&mut [u8]) -> i32) -> Result<Written, Error> {
    let (len, call) = with_result_waiting(op)?;
    Ok(Written::new(len, call))
}

impl Collection {
    /// Reads the document `id`, seeing this call's own writes.
    ///
    /// # Errors
    /// 404 when there is none; 500 when the document does not decode as `T`.
    pub fn read<T: FromJson>(&self, id: &str) -> Result<T, Error> {
        with_result(|out| sys::read(id.as_bytes(), out), decode_host("document"))
    }

    /// The member `key` of the document `id` decoded as `T`, or `None`
    /// when the document has no such member, without the rest of the
    /// document crossing the sandbox boundary (ABI `read_member`). For a
    /// procedure that needs one member of a document it does not otherwise
    /// read, with [`replace_member`](Collection::replace_member) to change
    /// it.
    ///
    /// # Errors
    /// 404 when there is no document `id`; 500 when the member does not
    /// decode as `T`; [`Error::NotAccepted`] near the budget.
    pub fn read_member<T: FromJson>(&self, id: &str, key: &str) -> Result<Option<T>, Error> {
        with_result(
            |out| sys::read_member(id.as_bytes(), key.as_bytes(), out),
            |bytes| {
                if bytes.is_empty() {
                    return Ok(None);
                }
                decode_host("member")(bytes).map(Some)
            },
        )
    }

    /// Sets the member `key` of the document `id` to `value` (in its place,
    /// or last for a new member, as the JavaScript `doc[key] = value`) and
    /// replaces the document, without it crossing the sandbox boundary: the
    /// same write as [`read`](Collection::read), that change and
    /// [`replace`](Collection::replace), in one host call (ABI
    /// `replace_member`).
    ///
    /// # Errors
    /// 400 when `value` cannot be serialized or the document cannot take
    /// it (a new `id`), 404, 412 (`options.etag`), 413;
    /// [`Error::NotAccepted`] near the budget.
    pub fn replace_member<V: ToJson + ?Sized>(
        &self,
        id: &str,
        key: &str,
        value: &V,
        options: &WriteOptions,
    ) -> Result<Written, Error> {
        let value = encode("member value", value)?;
        let opts = options.encode()?;
        written(|out| sys::replace_member(id.as_bytes(), key.as_bytes(), &value, &opts, out))
    }

    /// A page of the partition's documents, seeing this call's own writes.
    ///
    /// # Errors
    /// 400 for a continuation this feed did not issue.
    pub fn read_feed<T: DeserializeOwned>(&self, options: &FeedOptions) -> Result<Page<T>, Error> {
        let opts = if *options == FeedOptions::default() {
            Vec::new()
        } else {
            encode("feed options", options)?
        };
        with_result(|out| sys::read_feed(&opts, out), decode_host("page"))
    }

    /// Creates `doc` (an `id` is generated when it has none). The stored
    /// document, with its system properties, can be read from the returned
    /// [`Written`] before the next operation.
    ///
    /// # Errors
    /// 400 (not an object, bad id, other partition key), 409 (the id
    /// exists), 413 (over 2 MB).
    pub fn create<D: ToJson + ?Sized>(&self, doc: &D) -> Result<Written, Error> {
        self.create_with(doc, &WriteOptions::default())
    }

    /// [`create`](Self::create) with options.
    ///
    /// # Errors
    /// As `create`, and 400 for a document without `id` when automatic ids
    /// are disabled.
    pub fn create_with<D: ToJson + ?Sized>(
        &self,
        doc: &D,
        options: &WriteOptions,
    ) -> Result<Written, Error> {
        let doc = encode("document", doc)?;
        let opts = options.encode()?;
        written(|out| sys::create(&doc, &opts, out))
    }

    /// Replaces the document `id` with `doc`.
    ///
    /// # Errors
    /// 400, 404 (no such document), 412 (etag), 413.
    pub fn replace<D: ToJson + ?Sized>(
        &self,
        id: &str,
        doc: &D,
        options: &WriteOptions,
    ) -> Result<Written, Error> {
        let doc = encode("document", doc)?;
        let opts = options.encode()?;
        written(|out| sys::replace(id.as_bytes(), &doc, &opts, out))
    }

    /// Creates or replaces `doc`.
    ///
    /// # Errors
    /// 400, 412 (etag), 413.
    pub fn upsert<D: ToJson + ?Sized>(
        &self,
        doc: &D,
        options: &WriteOptions,
    ) -> Result<Written, Error> {
        let doc = encode("document", doc)?;
        let opts = options.encode()?;
        written(|out| sys::upsert(&doc, &opts, out))
    }

    /// Deletes the document `id`.
    ///
    /// # Errors
    /// 404 (no such document).
    pub fn delete(&self, id: &str) -> Result<(), Error> {
        self.delete_with(id, &WriteOptions::default())
    }

    /// [`delete`](Self::delete) with options (an If-Match etag).
    ///
    /// # Errors
    /// 404, 412 (etag).
    pub fn delete_with(&self, id: &str, options: &WriteOptions) -> Result<(), Error> {
        let opts = options.encode()?;
        without_result(sys::delete(id.as_bytes(), &opts))
    }

    /// Runs `query` over the partition and returns one page. The query sees
    /// the partition as committed when the call began (for a trigger:
    /// before the triggering write), minus what this call deleted.
    ///
    /// # Errors
    /// 400 for a syntax error, a missing parameter or a bad continuation;
    /// 500 when an item does not decode as `T`.
    pub fn query<T: DeserializeOwned>(&self, query: &Query) -> Result<Page<T>, Error> {
        let request = encode("query", query)?;
        with_result(|out| sys::query(&request, out), decode_host("page"))
    }

    /// Every item of `query`, fetching page after page. Stops at the first
    /// error (for example [`Error::NotAccepted`]); use
    /// [`query`](Self::query) to resume from a continuation instead.
    ///
    /// # Errors
    /// As [`query`](Self::query).
    pub fn query_all<T: DeserializeOwned>(&self, query: &Query) -> Result<Vec<T>, Error> {
        let mut query = query.clone();
        let mut items = Vec::new();
        loop {
            let page = self.query::<T>(&query)?;
            items.extend(page.items);
            match page.continuation {
                Some(token) => query = query.continuation(Some(token)),
                None => return Ok(items),
            }
        }
    }
}

/// The `id` of a document, for writes that address it by id.
///
/// # Errors
/// 400 when `doc` has no string `id`.
pub fn id_of(doc: &Value) -> Result<&str, Error> {
    doc.get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::status(ErrorCode::BAD_REQUEST, "the document has no string \"id\""))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::{self, Call, Reply};

    #[test]
    fn options_are_absent_unless_set() {
        assert_eq!(WriteOptions::default().encode().unwrap(), b"");
        assert_eq!(
            Call::json(&WriteOptions::if_match("\"e1\"").encode().unwrap()),
            json!({"etag": "\"e1\""})
        );
        let strict = WriteOptions {
            disable_automatic_id_generation: true,
            ..Default::default()
        };
        assert_eq!(
            Call::json(&strict.encode().unwrap()),
            json!({"disableAutomaticIdGeneration": true})
        );
    }

    #[test]
    fn a_member_is_read_and_set_without_the_document() {
        let partition = std::rc::Rc::new(std::cell::RefCell::new(testing::Partition::new([
            json!({"id": "p1", "n": 1, "title": "t"}),
        ])));
        let host = std::rc::Rc::clone(&partition);
        let (result, record) = testing::run(
            move |call| host.borrow_mut().answer(call).expect("a point operation"),
            || {
                let c = crate::collection();
                let n = c.read_member::<u64>("p1", "n")?;
                let absent = c.read_member::<Value>("p1", "absent")?;
                c.replace_member("p1", "n", &json!({"v": [n]}), &WriteOptions::default())?;
                c.replace_member("p1", "new", &true, &WriteOptions::if_match("\"e\""))?;
                let missing = c.read_member::<Value>("p9", "n").unwrap_err();
                Ok::<_, Error>((n, absent, missing))
            },
        );
        let (n, absent, missing) = result.unwrap().unwrap();
        assert_eq!((n, absent), (Some(1), None), "an absent member is None");
        assert!(missing.is(ErrorCode::NOT_FOUND), "{missing}");
        assert_eq!(
            partition.borrow().docs[0].to_string(),
            r#"{"id":"p1","n":{"v":[1]},"title":"t","new":true}"#,
            "in its place, or last"
        );
        assert_eq!(
            record.calls[3],
            Call::ReplaceMember {
                id: "p1".into(),
                key: "new".into(),
                value: b"true".to_vec(),
                options: br#"{"etag":"\"e\""}"#.to_vec(),
            },
            "the value and the options as JSON"
        );
    }

    #[test]
    fn query_requests_have_the_abi_shape() {
        let q = Query::new("SELECT * FROM p WHERE p.userId = @userId")
            .param("@userId", "u1")
            .page_size(10)
            .continuation(Some("t1".into()));
        assert_eq!(
            serde_json::to_value(&q).unwrap(),
            json!({
                "query": "SELECT * FROM p WHERE p.userId = @userId",
                "parameters": [{"name": "@userId", "value": "u1"}],
                "pageSize": 10,
                "continuation": "t1",
            })
        );
        assert_eq!(
            serde_json::to_value(Query::new("SELECT 1")).unwrap(),
            json!({"query": "SELECT 1"})
        );
    }

    #[test]
    fn query_all_follows_continuations() {
        let (result, record) = testing::run(
            |call| {
                let Call::Query { request } = call else {
                    panic!("{call:?}")
                };
                match Call::json(request).get("continuation") {
                    None => Reply::json(&json!({"items": [1, 2], "continuation": "next"})),
                    Some(t) if t == "next" => {
                        Reply::json(&json!({"items": [3], "continuation": null}))
                    }
                    Some(other) => panic!("{other}"),
                }
            },
            || crate::collection().query_all::<u32>(&Query::new("SELECT VALUE c.n FROM c")),
        );
        assert_eq!(result.unwrap().unwrap(), [1, 2, 3]);
        assert_eq!(record.calls.len(), 2);
    }

    #[test]
    fn writes_send_document_id_and_options() {
        let (result, record) = testing::run(
            |call| match call {
                Call::Delete { .. } => Reply::Ok(Vec::new()),
                Call::Replace { doc, .. } | Call::Create { doc, .. } | Call::Upsert { doc, .. } => {
                    Reply::Ok(doc.clone())
                }
                Call::ReadFeed { .. } => Reply::json(&json!({"items": [], "continuation": null})),
                other => panic!("{other:?}"),
            },
            || {
                let c = crate::collection();
                let created = c.create(&json!({"text": "hi"}))?.value()?;
                let replaced = c.replace("a", &json!({"id": "a"}), &WriteOptions::if_match("e"))?;
                c.upsert(&json!({"id": "b"}), &WriteOptions::default())?;
                // Another operation ran: the replaced document is gone.
                assert!(replaced.value().unwrap_err().is(ErrorCode::BAD_REQUEST));
                c.delete_with("a", &WriteOptions::if_match("e"))?;
                let page = c.read_feed::<Value>(&FeedOptions {
                    page_size: Some(5),
                    continuation: None,
                })?;
                Ok::<_, Error>((created, page))
            },
        );
        let (created, page) = result.unwrap().unwrap();
        assert_eq!(created, json!({"text": "hi"}));
        assert!(page.items.is_empty() && page.continuation.is_none());
        let etag = br#"{"etag":"e"}"#.to_vec();
        assert_eq!(
            record.calls,
            [
                Call::Create {
                    doc: br#"{"text":"hi"}"#.to_vec(),
                    options: vec![]
                },
                Call::Replace {
                    id: "a".into(),
                    doc: br#"{"id":"a"}"#.to_vec(),
                    options: etag.clone()
                },
                Call::Upsert {
                    doc: br#"{"id":"b"}"#.to_vec(),
                    options: vec![]
                },
                Call::Delete {
                    id: "a".into(),
                    options: etag
                },
                Call::ReadFeed {
                    options: br#"{"pageSize":5}"#.to_vec()
                },
            ]
        );
    }

    #[test]
    fn id_of_requires_a_string_id() {
        assert_eq!(id_of(&json!({"id": "p1"})).unwrap(), "p1");
        assert!(
            id_of(&json!({"id": 1}))
                .unwrap_err()
                .is(ErrorCode::BAD_REQUEST)
        );
    }
}
