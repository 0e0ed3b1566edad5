//! updateUsernames as a WebAssembly procedure: the Rust port of
//! `sprocs/samples/js/updateUsernames.js`.
//!
//! Parameters `[userId, username]` (and an optional third, a continuation
//! returned by an earlier call). Sets `userUsername` to `username` on every
//! item of the partition whose `userId` is `String(userId)` and upserts it.
//! The script builds its SQL by concatenation; this port binds `@userId`
//! instead (the same items, without the quoting problem), and reads every
//! page of the result where the script stops after its first (100 items).
//!
//! Bounded execution: when an operation is not accepted, the call commits
//! what it did and sets the body `{"continuation": token}`; calling again
//! with `[userId, username, token]` finishes the job (a page is redone from
//! its start, which is harmless: the upserts are idempotent). A call that
//! finishes sets no body, like the script.

use partita_guest::{Error, Query, WriteOptions, collection, js, params, set_body};
use serde_json::{Value, json};

fn update_usernames() -> Result<(), Error> {
    let args: Vec<Value> = params()?;
    let user_id = args
        .first()
        .map_or_else(|| "undefined".to_owned(), js::to_js_string);
    let username = args.get(1).cloned();
    let mut token = args
        .get(2)
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    let c = collection();
    let query = Query::new("SELECT * FROM p WHERE p.userId = @userId").param("@userId", user_id);
    loop {
        let page = match c.query::<Value>(&query.clone().continuation(token.clone())) {
            Err(Error::NotAccepted) => return stop(token),
            page => page?,
        };
        for mut item in page.items {
            if let Value::Object(fields) = &mut item {
                match &username {
                    Some(name) => fields.insert("userUsername".to_owned(), name.clone()),
                    // `item.userUsername = undefined` drops it from the JSON.
                    None => fields.shift_remove("userUsername"),
                };
            }
            match c.upsert(&item, &WriteOptions::default()) {
                Err(Error::NotAccepted) => return stop(token),
                written => written?,
            };
        }
        match page.continuation {
            Some(next) => token = Some(next),
            None => return Ok(()),
        }
    }
}

/// Commits what is done and tells the client where to continue (`""`: from
/// the start).
fn stop(token: Option<String>) -> Result<(), Error> {
    set_body(&json!({ "continuation": token.unwrap_or_default() }))
}

partita_guest::procedure!(update_usernames);

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use partita_guest::testing::{self, Call, Partition, Record, Reply};

    use super::*;

    /// Answers the query from the partition, two items per page, and stops
    /// accepting operations after `budget` calls (params included).
    fn call(p: &Rc<RefCell<Partition>>, args: Value, budget: usize) -> (Result<i32, i32>, Record) {
        let store = Rc::clone(p);
        let mut calls = 0;
        let (result, record) = testing::run_entry(
            move |call| {
                // Setting the body is not an operation: never refused.
                calls += usize::from(!matches!(call, Call::SetResponseBody(_)));
                if calls > budget && !matches!(call, Call::SetResponseBody(_)) {
                    return Reply::NotAccepted;
                }
                match call {
                    Call::Params => Reply::json(&args),
                    Call::SetResponseBody(_) => Reply::Ok(Vec::new()),
                    Call::Query { request } => {
                        let request = Call::json(request);
                        assert_eq!(request["query"], "SELECT * FROM p WHERE p.userId = @userId");
                        let user = &request["parameters"][0]["value"];
                        let start: usize = request["continuation"]
                            .as_str()
                            .map_or(0, |t| t.parse().unwrap());
                        let matching: Vec<Value> = store
                            .borrow()
                            .docs
                            .iter()
                            .filter(|d| &d["userId"] == user)
                            .cloned()
                            .collect();
                        let end = (start + 2).min(matching.len());
                        let next = (end < matching.len()).then(|| end.to_string());
                        Reply::json(&json!({"items": matching[start..end], "continuation": next}))
                    }
                    other => store.borrow_mut().answer(other).unwrap(),
                }
            },
            update_usernames,
        );
        (result.map_err(|f| f.number), record)
    }

    fn users(p: &Rc<RefCell<Partition>>) -> Vec<Value> {
        p.borrow()
            .docs
            .iter()
            .map(|d| d["userUsername"].clone())
            .collect()
    }

    fn partition() -> Rc<RefCell<Partition>> {
        let docs = (0..5).map(|i| {
            let user = if i == 2 { "u2" } else { "u1" };
            json!({"id": format!("d{i}"), "userId": user, "userUsername": "old"})
        });
        Rc::new(RefCell::new(Partition::new(docs)))
    }

    #[test]
    fn renames_every_item_of_the_user_across_pages() {
        let p = partition();
        let (result, record) = call(&p, json!(["u1", "new"]), usize::MAX);
        assert_eq!(result, Ok(0));
        assert_eq!(users(&p), ["new", "new", "old", "new", "new"]);
        assert!(
            !record
                .calls
                .iter()
                .any(|c| matches!(c, Call::SetResponseBody(_))),
            "no body when done"
        );
    }

    #[test]
    fn not_accepted_returns_a_continuation_that_finishes_the_job() {
        let p = partition();
        // params, page 1 (2 upserts), page 2, then its first upsert is refused.
        let (result, record) = call(&p, json!([1, "new"]), 5);
        assert_eq!(
            result,
            Ok(0),
            "numbers name the string id, as in JavaScript"
        );
        assert_eq!(users(&p), ["old"; 5], "no document has userId \"1\"");
        assert!(
            record
                .calls
                .iter()
                .all(|c| !matches!(c, Call::SetResponseBody(_)))
        );

        let (result, record) = call(&p, json!(["u1", "new"]), 5);
        assert_eq!(result, Ok(0));
        assert_eq!(users(&p), ["new", "new", "old", "old", "old"]);
        let body = record.calls.iter().find_map(|c| match c {
            Call::SetResponseBody(b) => Some(Call::json(b)),
            _ => None,
        });
        assert_eq!(body, Some(json!({"continuation": "2"})));

        let (result, _) = call(&p, json!(["u1", "newer", "2"]), usize::MAX);
        assert_eq!(result, Ok(0));
        assert_eq!(users(&p), ["new", "new", "old", "newer", "newer"]);
    }
}
