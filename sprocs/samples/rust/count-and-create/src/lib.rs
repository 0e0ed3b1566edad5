//! What createComment and createLike share, written once: read the post,
//! increment one counter on it, replace it, and create the child item
//! (comment or like) with `postId` set.
//!
//! A library both modules (`create-comment`, `create-like`) call with
//! their counter's name and their child's; the tests below run it as each
//! of them. Each step is what the JavaScript scripts do
//! (`sprocs/samples/js/createComment.js`, `createLike.js`), so the ports
//! store exactly what the scripts store:
//! - the post is `getAltLink() + '/docs/' + postId`, so the id read is
//!   `String(postId)` ([`js::to_js_string`]);
//! - `post.commentCount++` is [`js::increment`] (a missing count becomes
//!   NaN, stored as `null`);
//! - `comment.postId = postId` sets the member on an object, throws a
//!   TypeError on `null` or `undefined` (substatus 0), and is ignored on
//!   any other primitive, which the create then refuses;
//! - any failed operation fails the call with its status as substatus
//!   (404 for a missing post, 409 for a duplicate child id), and nothing
//!   is written.
//!
//! The post stays with the host: its counter is read with
//! `Collection::read_member` and written with `Collection::replace_member`
//! (the same write as reading the post, changing the counter and replacing
//! the post, without the post crossing the sandbox boundary twice). The
//! child stays JSON text ([`RawDoc`](partita_guest::RawDoc)): only
//! `postId` is written, the rest goes to the host as it came.

use partita_guest::{Error, RawArray, WriteOptions, collection, js, params};
use serde_json::Value;

/// The procedure with parameters `[postId, child]`: increments the post's
/// member `counter` and creates the child. `child` names the second
/// parameter in error messages (`"comment"`, `"like"`).
///
/// # Errors
/// The failed operation's [`Error`] (the call then fails with 400 and its
/// status as substatus), or one with number 0 when the child is `null` or
/// missing.
//
// `#[inline]` makes each module compile this function, and the generic
// code it instantiates, as its own, as when it was included with `#[path]`:
// the modules keep the same instructions. Compiled once in this crate
// instead, LTO chose differently inside serde_json's serializer (113 bytes
// more per module).
#[inline]
pub fn run(counter: &str, child: &str) -> Result<(), Error> {
    let args: RawArray = params()?;
    let c = collection();
    let link_id = match args.str(0) {
        // A string is its own `String(postId)`.
        Some(post_id) => post_id.into_owned(),
        None => match args.decode::<Value>(0)? {
            Some(post_id) => js::to_js_string(&post_id),
            None => "undefined".to_owned(),
        },
    };
    // The post never crosses the boundary: its counter is read and written
    // in place by the host (a missing post is the read's 404).
    let count = c.read_member::<Value>(&link_id, counter)?;
    c.replace_member(
        &link_id,
        counter,
        &js::increment(count.as_ref()),
        &WriteOptions::default(),
    )?;
    let Some(item) = args.get(1).filter(|text| *text != "null") else {
        return Err(Error::new(
            0,
            format!(
                "TypeError: cannot set property 'postId' of the {child} parameter (null or undefined)"
            ),
        ));
    };
    if item.starts_with('{') {
        let mut doc = args.doc(1)?.unwrap_or_default();
        // An undefined postId is left out of the JSON.
        if let Some(post_id) = args.get(0) {
            doc.set_json("postId", post_id)?;
        }
        c.create(&doc)?;
    } else {
        // A primitive: JavaScript ignores the assignment and the create
        // refuses it.
        c.create(&args.decode::<Value>(1)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use partita_guest::Error;
    use partita_guest::testing::{self, Failed, Partition, Reply};
    use serde_json::{Value, json};

    use super::run;

    /// The two procedures, as `create-comment` and `create-like` declare
    /// them: (counter, child, entry function).
    type Procedure = (&'static str, &'static str, fn() -> Result<(), Error>);
    const PROCEDURES: [Procedure; 2] = [
        ("commentCount", "comment", || run("commentCount", "comment")),
        ("likeCount", "like", || run("likeCount", "like")),
    ];

    fn call(
        partition: &Rc<RefCell<Partition>>,
        entry: fn() -> Result<(), Error>,
        args: Value,
    ) -> Result<i32, Failed> {
        let store = Rc::clone(partition);
        testing::run_entry(
            move |call| match call {
                testing::Call::Params => Reply::json(&args),
                other => store
                    .borrow_mut()
                    .answer(other)
                    .unwrap_or_else(|| panic!("unexpected {other:?}")),
            },
            entry,
        )
        .0
    }

    #[test]
    fn increments_the_count_and_creates_the_child() {
        for (counter, child, entry) in PROCEDURES {
            let p = Rc::new(RefCell::new(Partition::new([
                json!({"id": "p1", "postId": "p1", counter: 0, "title": "t"}),
            ])));
            assert_eq!(
                call(&p, entry, json!(["p1", {"text": "hi"}])),
                Ok(0),
                "{child}"
            );
            assert_eq!(
                call(
                    &p,
                    entry,
                    json!(["p1", {"id": "c2", "postId": "old", "text": "again"}])
                ),
                Ok(0),
                "{child}"
            );
            let p = p.borrow();
            assert_eq!(
                p.docs[0],
                json!({"id": "p1", "postId": "p1", counter: 2, "title": "t"}),
                "the counter changes in place, the rest is as it was"
            );
            assert_eq!(
                p.docs[1],
                json!({"text": "hi", "postId": "p1", "id": "generated-1"})
            );
            assert_eq!(
                p.get("c2").unwrap(),
                &json!({"id": "c2", "postId": "p1", "text": "again"})
            );
        }
    }

    #[test]
    fn post_ids_convert_as_javascript_strings() {
        for (counter, _, entry) in PROCEDURES {
            let p = Rc::new(RefCell::new(Partition::new([
                json!({"id": "7", "postId": 7, counter: "5"}),
            ])));
            assert_eq!(call(&p, entry, json!([7, {"id": "c"}])), Ok(0));
            let p = p.borrow();
            assert_eq!(p.get("7").unwrap()[counter], 6, "\"5\"++ is 6");
            assert_eq!(p.get("c").unwrap()["postId"], 7, "the parameter as given");
        }
    }

    #[test]
    fn failures_carry_the_operation_status() {
        for (counter, child, entry) in PROCEDURES {
            let p = Rc::new(RefCell::new(Partition::new([json!({"id": "p1"})])));
            let err = call(&p, entry, json!(["p9", {}])).unwrap_err();
            assert_eq!(err.number, 404, "{err:?}");
            assert_eq!(call(&p, entry, json!(["p1", {"id": "c1"}])), Ok(0));
            // A post without a count gets NaN, stored as null, as in JavaScript.
            assert_eq!(p.borrow().get("p1").unwrap()[counter], Value::Null);
            // (The mock partition does not roll back; the host does.)
            assert_eq!(
                call(&p, entry, json!(["p1", {"id": "c1"}]))
                    .unwrap_err()
                    .number,
                409
            );
            for missing in [json!(["p1"]), json!(["p1", null])] {
                let err = call(&p, entry, missing).unwrap_err();
                assert_eq!(err.number, 0);
                assert!(err.message.contains(child), "{err:?}");
            }
        }
    }

    #[test]
    fn a_primitive_child_is_passed_on_for_the_host_to_refuse() {
        for (_, child, entry) in PROCEDURES {
            let p = Rc::new(RefCell::new(Partition::new([json!({"id": "p1"})])));
            let err = call(&p, entry, json!(["p1", "text"])).unwrap_err();
            assert_eq!(err.number, 400, "{child}: {err:?}");
        }
    }
}
