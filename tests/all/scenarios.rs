//! Scripted scenarios: a script, its calls and the responses expected, in a
//! text file under `tests/scenarios/`, run once with the JavaScript script
//! and once with its Rust guest module. Both must give exactly the
//! responses the file states, so parity between the languages holds by
//! construction rather than by comparing one run with the other.
//!
//! A file is a sequence of lines (`#` starts a comment); a step that
//! answers is followed by a line `=> EXPECTED`:
//!
//! ```text
//! container posts /postId                          a fresh in-memory database's container
//! procedure createComment create_comment           sprocs/samples/js/createComment.js, or the create_comment module
//! trigger truncateFeed post all truncate_feed      the same for a trigger: its type and operation
//! item p1 {"id": "p1", "postId": "p1"}             a document created before the calls (no response)
//! call createComment p1 ["p1", {"text": "hi"}]     a procedure call with its parameters
//! => ok ""                                         its body; or `=> error 400/404` (status/substatus)
//! upsert p1 {...} post=truncateFeed                a write with a trigger (also create, replace ID, delete ID)
//! => ok                                            the write succeeded; or `=> error ...`
//! read p1 c1                                       a document, compared without its system properties
//! => {"id": "c1", "text": "hi"}                    or `=> missing`
//! query p1 SELECT VALUE c.id FROM c                the items of a query in one partition
//! => ["c1", "p1"]
//! ```

use std::path::{Path, PathBuf};

use partita::{
    Container, Database, ScriptKind, ScriptLanguage, ScriptProperties, TriggerOperation,
    TriggerType, WriteOptions,
};
use serde_json::Value;

use crate::support;

/// The languages every scenario runs in.
#[derive(Clone, Copy, Debug)]
enum Lang {
    JavaScript,
    Wasm,
}

/// One scenario run: the database, its container, and where the file is.
struct Run {
    lang: Lang,
    db: Database,
    container: Option<Container>,
    file: PathBuf,
}

/// What a step answered, as the text a `=>` line states.
fn answer<T>(result: partita::Result<T>, ok: impl FnOnce(T) -> String) -> String {
    match result {
        Ok(value) => ok(value),
        Err(err) => match err.substatus() {
            Some(sub) if sub != 0 => format!("error {}/{sub}", err.status()),
            _ => format!("error {}", err.status()),
        },
    }
}

/// A document without the properties that differ between two runs.
fn without_system_properties(mut doc: Value) -> Value {
    if let Value::Object(fields) = &mut doc {
        fields.retain(|key, _| !key.starts_with('_'));
    }
    doc
}

impl Run {
    fn container(&self) -> &Container {
        self.container
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no `container` line yet", self.file.display()))
    }

    fn script(&self, id: &str, module: &str, kind: ScriptKind) -> ScriptProperties {
        let (language, body) = match self.lang {
            Lang::JavaScript => (ScriptLanguage::JavaScript, support::js(id).into_bytes()),
            Lang::Wasm => (ScriptLanguage::Wasm, support::guest_module(module)),
        };
        ScriptProperties {
            id: id.to_owned(),
            kind,
            language,
            body,
            trigger_type: None,
            trigger_operation: None,
            trigger_names: None,
        }
    }

    /// Runs one step; returns what it answered, `None` for a step that
    /// answers nothing.
    fn step(&mut self, line: &str) -> Option<String> {
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        let json = |text: &str| -> Value {
            serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("{}: {text:?} is not JSON: {e}", self.file.display()))
        };
        match verb {
            "container" => {
                let (id, path) = rest.split_once(' ').expect("container ID PATH");
                self.container = Some(self.db.create_container(id, path).expect("container"));
                None
            }
            "procedure" => {
                let (id, module) = rest.split_once(' ').expect("procedure ID MODULE");
                let props = self.script(id, module, ScriptKind::StoredProcedure);
                self.container().create_script(props).expect("procedure");
                None
            }
            "trigger" => {
                let words: Vec<&str> = rest.split(' ').collect();
                let [id, kind, operation, module] = words[..] else {
                    panic!("trigger ID pre|post OPERATION MODULE, not {rest:?}");
                };
                let mut props = self.script(id, module, ScriptKind::Trigger);
                props.trigger_type = Some(kind.parse::<TriggerType>().expect("trigger type"));
                props.trigger_operation =
                    Some(operation.parse::<TriggerOperation>().expect("operation"));
                self.container().create_script(props).expect("trigger");
                None
            }
            "item" => {
                let (pk, doc) = rest.split_once(' ').expect("item PK JSON");
                self.container()
                    .create_item(pk, json(doc), None)
                    .expect("item");
                None
            }
            "call" => {
                let mut parts = rest.splitn(3, ' ');
                let (id, pk) = (parts.next().unwrap(), parts.next().expect("call ID PK"));
                let params = match json(parts.next().unwrap_or("[]")) {
                    Value::Array(params) => params,
                    other => panic!("parameters must be an array, not {other}"),
                };
                let result = self
                    .container()
                    .execute_stored_procedure(id, pk, params, None);
                Some(answer(result, |r| format!("ok {}", r.body)))
            }
            "create" | "upsert" | "replace" | "delete" => Some(self.write(verb, rest, json)),
            "read" => {
                let (pk, id) = rest.split_once(' ').expect("read PK ID");
                Some(match self.container().read_item(pk, id) {
                    Ok(doc) => without_system_properties(doc.into_value()).to_string(),
                    Err(err) if err.status() == 404 => "missing".to_owned(),
                    Err(err) => panic!("read {pk} {id}: {err}"),
                })
            }
            "query" => {
                let (pk, sql) = rest.split_once(' ').expect("query PK SQL");
                let options = partita::QueryOptions::partition(pk);
                let page = self
                    .container()
                    .query_items(sql, &Default::default(), &options)
                    .unwrap_or_else(|e| panic!("query {sql:?}: {e}"));
                Some(Value::Array(page.items).to_string())
            }
            other => panic!("{}: unknown step {other:?}", self.file.display()),
        }
    }

    /// `create PK JSON`, `upsert PK JSON`, `replace PK ID JSON` or `delete PK
    /// ID`, each optionally followed by `pre=ID` and `post=ID`.
    fn write(&self, verb: &str, rest: &str, json: impl Fn(&str) -> Value) -> String {
        let mut options = WriteOptions::default();
        let mut words: Vec<&str> = rest.split(' ').collect();
        while let Some(last) = words.last() {
            if let Some(id) = last.strip_prefix("pre=") {
                options.pre_triggers.push(id.to_owned());
            } else if let Some(id) = last.strip_prefix("post=") {
                options.post_triggers.push(id.to_owned());
            } else {
                break;
            }
            words.pop();
        }
        let pk = words[0];
        let c = self.container();
        let result = match verb {
            "create" => c.create_item(pk, json(&words[1..].join(" ")), Some(&options)),
            "upsert" => c.upsert_item(pk, json(&words[1..].join(" ")), Some(&options)),
            "replace" => c.replace_item(pk, words[1], json(&words[2..].join(" ")), Some(&options)),
            _ => c.delete_item(pk, words[1], Some(&options)),
        };
        answer(result, |_| "ok".to_owned())
    }
}

/// Whether two answers are the same: JSON compared as values (so spacing
/// and key order do not matter), after an `ok` both may start with.
fn same_answer(expected: &str, actual: &str) -> bool {
    let json = |text: &str| serde_json::from_str::<Value>(text).ok();
    let (expected, actual) = match (expected.strip_prefix("ok "), actual.strip_prefix("ok ")) {
        (Some(e), Some(a)) => (e, a),
        _ => (expected, actual),
    };
    match (json(expected), json(actual)) {
        (Some(e), Some(a)) => e == a,
        _ => expected == actual,
    }
}

/// Runs the scenario in `file` in `lang`; panics naming the line whose
/// answer differs from the file's.
fn run(file: &Path, lang: Lang) {
    let text = std::fs::read_to_string(file).expect("read the scenario");
    let mut run = Run {
        lang,
        db: Database::in_memory(),
        container: None,
        file: file.to_owned(),
    };
    let mut answered: Option<(usize, String)> = None;
    let mut checked = 0;
    for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(expected) = line.strip_prefix("=>") {
            let (at, actual) = answered
                .take()
                .unwrap_or_else(|| panic!("{}:{n}: `=>` after no step", file.display()));
            let expected = expected.trim();
            let same = same_answer(expected, &actual);
            assert!(
                same,
                "{}:{at} in {lang:?}: expected {expected}, got {actual}",
                file.display()
            );
            checked += 1;
            continue;
        }
        if let Some((at, actual)) = answered.take() {
            panic!(
                "{}:{at}: the step answered {actual} with no `=>` line after it",
                file.display()
            );
        }
        answered = run.step(line).map(|actual| (n, actual));
    }
    assert!(
        answered.is_none(),
        "{}: the last step has no `=>` line",
        file.display()
    );
    assert!(checked > 0, "{}: no expectation checked", file.display());
}

#[test]
fn every_scenario_holds_in_javascript_and_in_webassembly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/scenarios")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "scenario"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "found only {} scenarios", files.len());
    for file in &files {
        run(file, Lang::JavaScript);
        run(file, Lang::Wasm);
    }
}
