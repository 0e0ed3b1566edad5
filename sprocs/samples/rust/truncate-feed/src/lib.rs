//! truncateFeed as a WebAssembly post-trigger: the Rust port of
//! `sprocs/samples/js/truncateFeed.js`.
//!
//! Runs after every write into the `feed` container and keeps the 100 most
//! recent posts of the partition. It counts the documents (`SELECT VALUE
//! COUNT(1) FROM f`: the query sees the partition as it was before the
//! triggering write, hence `+ 1`), and when there are more than 100 it
//! queries the oldest surplus (`SELECT TOP n * FROM f ORDER BY
//! f.creationDate`) and deletes them one after another. Any failure fails
//! the write with 400 and the operation's status as substatus, and the
//! write is rolled back with everything the trigger did.

use partita_guest::{Error, Query, collection, id_of, js};
use serde_json::Value;

/// The most posts the feed keeps.
const MAX_DOCS: f64 = 100.0;

fn truncate_feed() -> Result<(), Error> {
    let c = collection();
    let counts = c.query::<Value>(&Query::new("SELECT VALUE COUNT(1) FROM f"))?;
    // `results[0] + 1 > maxDocs`, with JavaScript's arithmetic.
    let total = js::to_number(counts.items.first()) + 1.0;
    if total > MAX_DOCS {
        let surplus = js::to_js_string(&js::number(total - MAX_DOCS));
        let oldest = Query::new(format!(
            "SELECT TOP {surplus} * FROM f ORDER BY f.creationDate"
        ));
        // All pages first: the query does not see what this call deletes.
        for doc in c.query_all::<Value>(&oldest)? {
            c.delete(id_of(&doc)?)?;
        }
    }
    Ok(())
}

partita_guest::trigger!(truncate_feed);

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use partita_guest::testing::{self, Call, Partition, Reply};
    use serde_json::json;

    use super::*;

    /// A feed of `n` posts (post000 oldest) with the COUNT and TOP queries
    /// answered from it.
    fn run_on(n: usize) -> (Result<i32, i32>, Vec<String>) {
        let docs = (0..n).map(|i| json!({"id": format!("post{i:03}"), "creationDate": i}));
        let store = Rc::new(RefCell::new(Partition::new(docs)));
        let feed = Rc::clone(&store);
        let (result, _) = testing::run_entry(
            move |call| match call {
                Call::Query { request } => {
                    let sql = Call::json(request)["query"].as_str().unwrap().to_owned();
                    let docs = feed.borrow().docs.clone();
                    if sql == "SELECT VALUE COUNT(1) FROM f" {
                        return Reply::json(&json!({"items": [docs.len()], "continuation": null}));
                    }
                    let top: usize = sql
                        .strip_prefix("SELECT TOP ")
                        .and_then(|s| s.strip_suffix(" * FROM f ORDER BY f.creationDate"))
                        .unwrap_or_else(|| panic!("{sql}"))
                        .parse()
                        .unwrap();
                    Reply::json(&json!({"items": docs[..top], "continuation": null}))
                }
                other => feed.borrow_mut().answer(other).unwrap(),
            },
            truncate_feed,
        );
        let ids = store
            .borrow()
            .docs
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect();
        (result.map_err(|f| f.number), ids)
    }

    #[test]
    fn keeps_the_newest_hundred() {
        let (result, ids) = run_on(99);
        assert_eq!((result, ids.len()), (Ok(0), 99), "99 + the new one = 100");
        let (result, ids) = run_on(103);
        assert_eq!(result, Ok(0));
        assert_eq!(ids.len(), 99, "the query does not count the new post");
        assert_eq!(ids[0], "post004", "the four oldest are gone");
    }
}
