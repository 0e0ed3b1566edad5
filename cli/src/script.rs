//! `partita sproc`, `partita trigger` and `partita udf`: one set of
//! commands for the three kinds of script (create, replace, delete, read,
//! list), and `sproc exec`, which runs a stored procedure in one logical
//! partition.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use partita::{
    Database, EngineError, Error, Limits, ProcedureOptions, Script, ScriptKind, ScriptLanguage,
    ScriptProperties, TriggerOperation, TriggerType,
};
use serde_json::{Value, json};

use crate::caps::CapArgs;
use crate::json::{METADATA_CHARGE, charged, parse_json, stats_json};
use crate::pk::Pk;

/// The `--help` examples of `partita sproc`, `trigger` and `udf`.
pub(crate) const EXAMPLES: &str = "Examples:
  partita sproc create posts createComment sprocs/samples/js/createComment.js
  partita sproc exec posts createComment --pk p1 --params '[\"p1\", {\"text\": \"hi\"}]'
  partita trigger create feed truncateFeed sprocs/samples/js/truncateFeed.js --type post --operation all
  partita udf create posts tax tax.js
  partita udf list posts";

#[derive(Subcommand)]
pub(crate) enum ScriptCommand {
    /// Store a new script from a file (`.js`, `.wasm` or `.wat`).
    #[command(
        after_help = "Example: partita sproc create posts createComment sprocs/samples/js/createComment.js\n         partita sproc create posts createCommentWasm sprocs/samples/wat/createComment.wat"
    )]
    Create(ScriptArgs),
    /// Replace a script; the next call uses the new version.
    #[command(
        after_help = "Example: partita sproc replace posts createComment sprocs/samples/js/createComment.js"
    )]
    Replace(ScriptArgs),
    /// Delete a script.
    #[command(after_help = "Example: partita trigger delete feed truncateFeed")]
    Delete {
        /// The container.
        container: String,
        /// The script id.
        id: String,
    },
    /// Show a script.
    #[command(after_help = "Example: partita sproc read posts createComment")]
    Read {
        /// The container.
        container: String,
        /// The script id.
        id: String,
    },
    /// List a container's scripts of this kind.
    #[command(after_help = "Example: partita udf list posts")]
    List {
        /// The container.
        container: String,
    },
    /// Execute a stored procedure in one logical partition (sproc only).
    #[command(
        after_help = "Example: partita sproc exec posts createComment --pk p1 --params '[\"p1\", {\"text\": \"hi\"}]'"
    )]
    Exec {
        /// The container.
        container: String,
        /// The procedure id.
        id: String,
        #[command(flatten)]
        pk: Pk,
        /// The parameters, as a JSON array.
        #[arg(long)]
        params: Option<String>,
        #[command(flatten)]
        caps: CapArgs,
    },
}

#[derive(Args)]
pub(crate) struct ScriptArgs {
    /// The container.
    container: String,
    /// The script id.
    id: String,
    /// The script file: `.js` (JavaScript), `.wasm` or `.wat` (a
    /// WebAssembly module of the `partita_v1` ABI, checked and compiled at
    /// upload).
    file: PathBuf,
    /// Triggers only: `pre` or `post`.
    #[arg(long = "type")]
    trigger_type: Option<TriggerType>,
    /// Triggers only: `all`, `create`, `replace`, `delete` or `upsert`.
    #[arg(long)]
    operation: Option<TriggerOperation>,
}

/// Runs one command on the scripts of `kind`: `exec` when they are stored
/// procedures, and otherwise their management, charged as a metadata
/// request.
pub(crate) fn run(
    db: &Database,
    kind: ScriptKind,
    command: ScriptCommand,
    limits: &Limits,
) -> anyhow::Result<Value> {
    match command {
        ScriptCommand::Exec {
            container,
            id,
            pk,
            params,
            caps,
        } if kind == ScriptKind::StoredProcedure => {
            execute(db, &container, &id, pk, params, &caps.apply(limits))
        }
        command => script_response(db, kind, command).map(|value| charged(value, METADATA_CHARGE)),
    }
}

/// `sproc exec`: the procedure's body and logs, its charge and statistics.
fn execute(
    db: &Database,
    container: &str,
    id: &str,
    pk: Pk,
    params: Option<String>,
    limits: &Limits,
) -> anyhow::Result<Value> {
    let params = match params {
        None => Vec::new(),
        Some(text) => match parse_json("--params", &text)? {
            Value::Array(items) => items,
            other => {
                return Err(EngineError::BadRequest(format!(
                    "--params must be a JSON array of the procedure's parameters, not {other}"
                ))
                .into());
            }
        },
    };
    let response = db.container(container)?.execute_stored_procedure(
        id,
        pk.key()?,
        params,
        Some(&ProcedureOptions {
            limits: Some(limits.clone()),
            ..Default::default()
        }),
    )?;
    Ok(json!({
        "body": response.body,
        "logs": response.logs,
        "requestCharge": response.request_charge(),
        "stats": stats_json(&response.stats),
    }))
}

fn script_response(
    db: &Database,
    kind: ScriptKind,
    command: ScriptCommand,
) -> anyhow::Result<Value> {
    Ok(match command {
        ScriptCommand::Create(args) => script_json(
            &db.container(&args.container)?
                .create_script(script_props(kind, args)?)?,
        ),
        ScriptCommand::Replace(args) => script_json(
            &db.container(&args.container)?
                .replace_script(script_props(kind, args)?)?,
        ),
        ScriptCommand::Delete { container, id } => {
            db.container(&container)?.delete_script(kind, &id)?;
            json!({"deleted": id})
        }
        ScriptCommand::Read { container, id } => {
            script_json(&db.container(&container)?.read_script(kind, &id)?)
        }
        ScriptCommand::Exec { .. } => {
            return Err(EngineError::BadRequest(
                "only stored procedures can be executed; triggers run with writes (--pre-trigger, --post-trigger)"
                    .to_owned(),
            )
            .into());
        }
        ScriptCommand::List { container } => {
            let scripts: Vec<Value> = db
                .container(&container)?
                .list_scripts(kind)
                .iter()
                .map(script_json)
                .collect();
            json!({"scripts": scripts, "count": scripts.len()})
        }
    })
}

fn script_props(kind: ScriptKind, args: ScriptArgs) -> Result<ScriptProperties, Error> {
    let extension = args
        .file
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let language = match extension.as_str() {
        "js" => ScriptLanguage::JavaScript,
        "wasm" | "wat" => ScriptLanguage::Wasm,
        _ => {
            return Err(EngineError::BadRequest(format!(
                "{}: a script file is JavaScript (.js) or WebAssembly (.wasm, .wat)",
                args.file.display()
            ))
            .into());
        }
    };
    let body = std::fs::read(&args.file).map_err(|e| {
        EngineError::BadRequest(format!("cannot read {}: {e}", args.file.display()))
    })?;
    if kind != ScriptKind::Trigger && (args.trigger_type.is_some() || args.operation.is_some()) {
        return Err(EngineError::BadRequest(
            "--type and --operation apply to triggers only".to_owned(),
        )
        .into());
    }
    Ok(ScriptProperties {
        id: args.id,
        kind,
        language,
        body,
        trigger_type: args.trigger_type,
        trigger_operation: args.operation,
        trigger_names: None,
    })
}

fn script_json(script: &Script) -> Value {
    let mut res = json!({
        "id": script.id,
        "language": match script.language {
            ScriptLanguage::JavaScript => "javascript",
            ScriptLanguage::Wasm => "wasm",
        },
        "_version": script.version,
        "_ts": script.ts,
    });
    // A module is binary: its size stands in for the body.
    match script.language {
        ScriptLanguage::JavaScript => res["body"] = json!(String::from_utf8_lossy(&script.body)),
        ScriptLanguage::Wasm => res["bodySize"] = json!(script.body.len()),
    }
    if let (Some(t), Some(o)) = (script.trigger_type, script.trigger_operation) {
        res["triggerType"] = json!(t.to_string());
        res["triggerOperation"] = json!(o.to_string());
    }
    res
}
