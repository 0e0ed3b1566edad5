//! createComment as a WebAssembly procedure: the Rust port of
//! `sprocs/js/createComment.js`, storing exactly what the script stores.
//!
//! Parameters `[postId, comment]`. Reads the post `postId`, increments its
//! `commentCount` (JavaScript's `++`, so a missing count becomes `null`),
//! replaces it, then creates the comment with `postId` set and, when it has
//! no `id`, a generated one. All of it in the post's logical partition, in
//! one transaction: any failure (404 for a missing post, 409 for a
//! duplicate comment id) fails the call with 400 and that status as
//! substatus, and nothing is written. Sets no response body.

use partita_guest::{Error, WriteOptions, collection, id_of, js, params};
use serde_json::Value;

fn create_comment() -> Result<(), Error> {
    let mut args = params::<Vec<Value>>()?.into_iter();
    let (post_id, comment) = (args.next(), args.next());
    let post_id = post_id.as_ref();
    let c = collection();
    // `getAltLink() + '/docs/' + postId` names the document `String(postId)`.
    let link_id = post_id.map_or_else(|| "undefined".to_owned(), js::to_js_string);
    let mut post: Value = c.read(&link_id)?;
    post["commentCount"] = js::increment(post.get("commentCount"));
    let id = id_of(&post)?.to_owned();
    c.replace(&id, &post, &WriteOptions::default())?;
    let mut comment = match comment {
        None | Some(Value::Null) => {
            return Err(Error::new(
                0,
                "TypeError: cannot set property 'postId' of the comment parameter (null or undefined)",
            ));
        }
        Some(comment) => comment,
    };
    // Setting a property of a primitive is ignored in JavaScript, and an
    // undefined postId is left out of the JSON.
    if let (Value::Object(fields), Some(post_id)) = (&mut comment, post_id) {
        fields.insert("postId".to_owned(), post_id.clone());
    }
    c.create(&comment)?;
    Ok(())
}

partita_guest::procedure!(create_comment);

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use partita_guest::testing::{self, Failed, Partition, Reply};
    use serde_json::json;

    use super::*;

    fn call(partition: &Rc<RefCell<Partition>>, args: Value) -> Result<i32, Failed> {
        let store = Rc::clone(partition);
        testing::run_entry(
            move |call| match call {
                testing::Call::Params => Reply::json(&args),
                other => store
                    .borrow_mut()
                    .answer(other)
                    .unwrap_or_else(|| panic!("unexpected {other:?}")),
            },
            create_comment,
        )
        .0
    }

    #[test]
    fn increments_the_count_and_creates_the_comment() {
        let p = Rc::new(RefCell::new(Partition::new([
            json!({"id": "p1", "postId": "p1", "commentCount": 0}),
        ])));
        assert_eq!(call(&p, json!(["p1", {"text": "hi"}])), Ok(0));
        assert_eq!(
            call(&p, json!(["p1", {"id": "c2", "text": "again"}])),
            Ok(0)
        );
        let p = p.borrow();
        assert_eq!(p.get("p1").unwrap()["commentCount"], 2);
        assert_eq!(
            p.docs[1],
            json!({"text": "hi", "postId": "p1", "id": "generated-1"})
        );
        assert_eq!(p.get("c2").unwrap()["postId"], "p1");
    }

    #[test]
    fn failures_carry_the_operation_status() {
        let p = Rc::new(RefCell::new(Partition::new([json!({"id": "p1"})])));
        let err = call(&p, json!(["p9", {}])).unwrap_err();
        assert_eq!(err.number, 404, "{err:?}");
        assert_eq!(call(&p, json!(["p1", {"id": "c1"}])), Ok(0));
        // A post without a count gets NaN, stored as null, as in JavaScript.
        assert_eq!(p.borrow().get("p1").unwrap()["commentCount"], Value::Null);
        // (The mock partition does not roll back; the host does.)
        assert_eq!(
            call(&p, json!(["p1", {"id": "c1"}])).unwrap_err().number,
            409
        );
        assert_eq!(call(&p, json!(["p1"])).unwrap_err().number, 0);
    }
}
