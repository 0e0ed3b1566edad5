//! Prepared boa contexts: built once, locked down, pooled per thread.
//!
//! A fresh boa `Context` costs ~0.7 ms and locking it down a few more, a
//! warm call ~15 µs, so each thread keeps a small pool of prepared
//! [`Sandbox`]es. A sandbox serves every script (compiled scripts are cached
//! in it by id, version and text, user-defined functions apart from
//! procedures: a new version replaces the old one) until its
//! instruction counter runs low, a call hits a bound, or it fails a health
//! check; then it is dropped and a new one is built.
//!
//! LIFECYCLE
//! =========
//!
//! ```text
//!   build: Context (budget 2L + setup reserve) ─► host objects ─► guards ─► prelude.js ─► lockdown
//!   call:  take from pool ─► run ─► clean (queue, jobs, implicit globals) ─► back to pool
//!                                └─► budget / abort / internal error ─► drop
//! ```
//!
//! Isolation between calls: every object reachable from the global object
//! (and the intrinsics only reachable from instances) is frozen, existing
//! global bindings are read-only, and globals a call adds (sloppy implicit
//! globals) are deleted after it. The script's function is re-created by
//! calling a cached wrapper each call, so properties set on it, or state in
//! an IIFE's closure, do not survive either.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

use boa_engine::context::ContextBuilder;
use boa_engine::error::EngineError;
use boa_engine::job::{Job, JobExecutor, PromiseJob};
use boa_engine::object::ObjectInitializer;
use boa_engine::object::shape::Shape;
use boa_engine::optimizer::OptimizerOptions;
use boa_engine::property::{Attribute, PropertyDescriptor, PropertyKey};
use boa_engine::{Context, JsObject, JsResult, JsValue, NativeFunction, Script, Source, js_string};

use super::host::{self, CallState, Host, Shared};
use super::{guards, nesting};
use crate::Limits;

/// Instructions set aside for building a sandbox (host objects, guards,
/// prelude.js and lockdown), on top of the `2 × instructions` the calls get.
///
/// boa's counter cannot be lowered after the build, so whatever setup leaves
/// of this reserve is extra budget for the first call on the sandbox: keep it
/// just above what setup uses (282,514 instructions with boa 0.22; the test
/// `setup_fits_its_reserve` fails when setup grows past 95% of it). Should
/// setup ever run out anyway, [`Sandbox::build`] retries once with
/// [`SETUP_FALLBACK`] rather than fail every call.
const SETUP_INSTRUCTIONS: usize = 300_000;

/// The reserve of the retry when setup ran out of [`SETUP_INSTRUCTIONS`].
const SETUP_FALLBACK: usize = 20_000_000;

/// Sandboxes kept per thread.
const POOL_SIZE: usize = 2;

/// Compiled scripts kept per sandbox (and as many user-defined functions).
const MAX_SCRIPTS: usize = 256;

/// The promise job queue. Only promise jobs exist in this sandbox (no
/// timers, no native async functions); anything else is dropped.
#[derive(Default)]
pub(crate) struct Jobs {
    queue: RefCell<VecDeque<PromiseJob>>,
}

impl Jobs {
    /// Takes the next job.
    pub(crate) fn pop(&self) -> Option<PromiseJob> {
        self.queue.borrow_mut().pop_front()
    }

    /// Drops every queued job.
    pub(crate) fn clear(&self) {
        self.queue.borrow_mut().clear();
    }
}

impl JobExecutor for Jobs {
    fn enqueue_job(self: Rc<Self>, job: Job, _context: &mut Context) {
        if let Job::PromiseJob(job) = job {
            self.queue.borrow_mut().push_back(job);
        }
    }

    fn run_jobs(self: Rc<Self>, context: &mut Context) -> JsResult<()> {
        while let Some(job) = self.pop() {
            job.call(context)?;
        }
        Ok(())
    }
}

/// A prepared, locked-down context and its compiled scripts.
pub(crate) struct Sandbox {
    pub(crate) context: Context,
    pub(crate) jobs: Rc<Jobs>,
    pub(crate) host: Rc<RefCell<CallState>>,
    /// `applyStages(items, stages)` from prelude.js.
    pub(crate) apply_stages: JsObject,
    /// Compiled wrappers of procedures and triggers by script id.
    scripts: HashMap<String, Compiled>,
    /// Compiled wrappers of user-defined functions by id (a separate
    /// namespace, as in Cosmos DB).
    udfs: HashMap<String, Compiled>,
    /// The per-call instruction limit the counter was sized for.
    built_for: u64,
    /// The global object's own keys after lockdown.
    baseline: HashSet<PropertyKey>,
    baseline_len: usize,
    /// The global object's shape after lockdown, when it is a shared one
    /// (see `guards::Hooks::create_global_object`); kept here so that its
    /// address cannot be reused while the sandbox lives.
    baseline_shape: Option<Shape>,
    /// Set when the sandbox must not be reused.
    pub(crate) poisoned: bool,
}

/// One cached script: its version, its text (compared too, so that two
/// databases whose scripts share an id and a version never run each
/// other's code) and its compiled wrapper.
struct Compiled {
    version: u64,
    body: Box<str>,
    wrapper: JsObject,
}

fn function(f: boa_engine::native_function::NativeFunctionPointer) -> NativeFunction {
    NativeFunction::from_fn_ptr(f)
}

fn freeze_none() -> Attribute {
    Attribute::WRITABLE | Attribute::CONFIGURABLE
}

impl Sandbox {
    /// Builds and locks down a sandbox whose counter suits `limits`.
    pub(crate) fn build(limits: &Limits) -> Result<Sandbox, String> {
        match Sandbox::build_with(limits, SETUP_INSTRUCTIONS) {
            Err((_, true)) => Sandbox::build_with(limits, SETUP_FALLBACK).map_err(|(e, _)| e),
            other => other.map_err(|(e, _)| e),
        }
    }

    /// Builds a sandbox with `reserve` instructions for setup. The error
    /// says whether setup ran out of instructions.
    fn build_with(limits: &Limits, reserve: usize) -> Result<Sandbox, (String, bool)> {
        let per_call = usize::try_from(limits.instructions).unwrap_or(usize::MAX);
        let jobs = Rc::new(Jobs::default());
        let mut context = ContextBuilder::new()
            .instructions_remaining(per_call.saturating_mul(2).saturating_add(reserve))
            .job_executor(jobs.clone())
            .host_hooks(Rc::new(guards::Hooks))
            .build()
            .map_err(|e| (format!("cannot build a context: {e}"), false))?;
        // No constant folding: it would evaluate a script's constant
        // expressions (`7n ** 100000000n`) while compiling, outside every
        // bound a call has, and at upload in the server's own process.
        context.set_optimizer_options(OptimizerOptions::empty());
        let host = Rc::new(RefCell::new(CallState::new()));
        context.insert_data(Host(host.clone()));
        let (apply_stages, baseline) = setup(&mut context).map_err(|e| {
            let exhausted = matches!(e.as_engine(), Some(EngineError::NoInstructionsRemain));
            (format!("cannot prepare a context: {e}"), exhausted)
        })?;
        let baseline_len = baseline.len();
        let baseline_shape = {
            let global = context.global_object();
            let shape = global.borrow().shape().clone();
            shape.is_shared().then_some(shape)
        };
        Ok(Sandbox {
            context,
            jobs,
            host,
            apply_stages,
            scripts: HashMap::new(),
            udfs: HashMap::new(),
            built_for: limits.instructions,
            baseline,
            baseline_len,
            baseline_shape,
            poisoned: false,
        })
    }

    /// Whether this sandbox can serve a call under `limits`.
    fn suits(&self, limits: &Limits) -> bool {
        !self.poisoned
            && self.built_for == limits.instructions
            && self.context.instructions_remaining() as u64 >= limits.instructions
    }

    /// The wrapper function of `script`, compiling it on first use.
    ///
    /// The wrapper is `(function () { return (BODY\n); })`: each call gets
    /// a fresh function object from it. `udf` selects the namespace of
    /// user-defined functions.
    pub(crate) fn compiled(
        &mut self,
        udf: bool,
        id: &str,
        version: u64,
        body: &str,
    ) -> Result<JsObject, String> {
        let cache = if udf { &self.udfs } else { &self.scripts };
        if let Some(c) = cache.get(id)
            && c.version == version
            && *c.body == *body
        {
            return Ok(c.wrapper.clone());
        }
        let source = wrapped(body);
        let context = &mut self.context;
        let before = context.instructions_remaining();
        let value = on_compile_stack(|| {
            let script = parse(&source, context)?;
            script
                .evaluate(context)
                .map_err(|e| format!("{COMPILE_ERROR} {e}"))
        })?;
        // Evaluating the wrapper is not the call's work: a call that finds
        // its script compiled must count what one that compiles it counts
        // (a fresh script worker compiles again).
        let spent = before.saturating_sub(self.context.instructions_remaining());
        let mut state = self.host.borrow_mut();
        state.start_remaining = state.start_remaining.saturating_sub(spent);
        drop(state);
        let wrapper = value
            .as_callable()
            .ok_or_else(|| "the script is not a function".to_owned())?;
        wrapper
            .set_integrity_level(
                boa_engine::object::IntegrityLevel::Frozen,
                &mut self.context,
            )
            .ok();
        let cache = if udf {
            &mut self.udfs
        } else {
            &mut self.scripts
        };
        if cache.len() >= MAX_SCRIPTS {
            cache.clear();
        }
        cache.insert(
            id.to_owned(),
            Compiled {
                version,
                body: body.into(),
                wrapper: wrapper.clone(),
            },
        );
        Ok(wrapper)
    }

    /// Removes the globals the last call added; poisons the sandbox when
    /// one cannot be removed, or when the call changed the global object
    /// itself: its prototype (whose properties every later call would see
    /// as globals) or its extensibility (later calls could not add
    /// implicit globals).
    pub(crate) fn clean_globals(&mut self) {
        if self.global_as_built() {
            return;
        }
        self.remove_added_globals();
        if self.baseline_shape.is_some() && !self.global_as_built() {
            // Something the keys do not show changed (a prototype, an
            // attribute), or the shape tree was cut short.
            self.poisoned = true;
        }
    }

    /// Whether the global object is as lockdown left it, read in a few
    /// loads instead of by collecting its ~60 keys (about 6,000
    /// instructions and an allocation per call): on the same shared
    /// shape (so with the same names, attributes and prototype; the
    /// values cannot change, every global being read-only), with no
    /// index-like keys (kept apart from the shape) and extensible.
    fn global_as_built(&mut self) -> bool {
        let Some(baseline) = &self.baseline_shape else {
            return false;
        };
        let global = self.context.global_object();
        let same = {
            let o = global.borrow();
            o.shape().to_addr_usize() == baseline.to_addr_usize()
                && o.properties().index_property_keys().next().is_none()
        };
        same && matches!(global.is_extensible(&mut self.context), Ok(true))
    }

    /// Deletes the globals not in the baseline; poisons the sandbox when
    /// one cannot be deleted or the global object's prototype or
    /// extensibility changed.
    fn remove_added_globals(&mut self) {
        let global = self.context.global_object();
        let object_proto = self
            .context
            .intrinsics()
            .constructors()
            .object()
            .prototype();
        if !global
            .prototype()
            .is_some_and(|p| JsObject::equals(&p, &object_proto))
            || !matches!(global.is_extensible(&mut self.context), Ok(true))
        {
            self.poisoned = true;
            return;
        }
        let Ok(keys) = global.own_property_keys(&mut self.context) else {
            self.poisoned = true;
            return;
        };
        // Lockdown made every global it found non-configurable, so no call
        // can delete one: the same number of keys means none was added.
        if keys.len() == self.baseline_len {
            return;
        }
        for key in keys {
            if !self.baseline.contains(&key)
                && !matches!(
                    global.delete_property_or_throw(key, &mut self.context),
                    Ok(true)
                )
            {
                self.poisoned = true;
            }
        }
    }
}

/// The prefix of every compile error, as Cosmos DB words it.
const COMPILE_ERROR: &str = "Encountered exception while compiling Javascript.";

/// The source compiled for a script body: `(function () { return (BODY\n); })`.
pub(crate) fn wrapped(body: &str) -> String {
    format!("(function () {{ return (\n{}\n); }})", strip(body))
}

/// Runs `f` (a parse, a compilation or an evaluation that compiles) on a
/// stack with at least [`nesting::COMPILE_STACK`] free: the bound that
/// [`nesting::check`] puts on a script's depth was measured against it.
/// Compiling is rare (once per script and sandbox, and at upload), so a
/// fresh stack segment there costs little.
pub(crate) fn on_compile_stack<T>(f: impl FnOnce() -> T) -> T {
    crate::stack::with_room(nesting::COMPILE_STACK, nesting::COMPILE_STACK, f)
}

/// Checks the nesting bound and the `__proto__` rule, then parses `source`
/// (from [`wrapped`]). Call on the compile stack ([`on_compile_stack`]):
/// the returned script holds the syntax tree, whose drop recurses too.
pub(crate) fn parse(source: &str, context: &mut Context) -> Result<Script, String> {
    nesting::check(source).map_err(|e| format!("{COMPILE_ERROR} {e}"))?;
    if has_proto_literal(source, context) {
        return Err(format!("{COMPILE_ERROR} {PROTO_LITERAL}"));
    }
    Script::parse(Source::from_bytes(source.as_bytes()), None, context)
        .map_err(|e| format!("{COMPILE_ERROR} {e}"))
}

/// Parses and compiles `body` as [`Sandbox::compiled`] does, in a fresh
/// context dropped afterwards (for checks at upload: nothing is cached).
pub(crate) fn check(body: &str) -> Result<(), String> {
    let source = wrapped(body);
    on_compile_stack(|| {
        let mut context = ContextBuilder::new()
            .build()
            .map_err(|e| format!("cannot build a context: {e}"))?;
        context.set_optimizer_options(OptimizerOptions::empty());
        let script = parse(&source, &mut context)?;
        script
            .codeblock(&mut context)
            .map(drop)
            .map_err(|e| format!("{COMPILE_ERROR} {e}"))
    })
}

/// Why a script with a `{ __proto__: value }` literal is refused.
const PROTO_LITERAL: &str = "Object literals with a `__proto__: value` entry are not supported (only `__proto__: null`): use Object.create(value), which bounds the depth of prototype chains.";

/// Whether `source` has an object literal entry `__proto__: value` with a
/// value other than `null`. Such entries set the new object's prototype
/// inside boa's bytecode, where no guard can see them, so a loop could build
/// a prototype chain deep enough for boa's recursive property lookup to
/// overflow the native stack (and its cycle check makes building it
/// quadratic in time). Parses the text once more, only when it could hold
/// such an entry (`proto` or an escape in the text); a text that does not
/// parse is left to the compiler's error.
fn has_proto_literal(source: &str, context: &mut Context) -> bool {
    use std::ops::ControlFlow;

    use boa_engine::ast::expression::Expression;
    use boa_engine::ast::expression::literal::{LiteralKind, PropertyDefinition};
    use boa_engine::ast::property::PropertyName;
    use boa_engine::ast::scope::Scope;
    use boa_engine::ast::visitor::{VisitWith, Visitor};
    use boa_engine::interner::Sym;

    struct Finder;
    impl<'ast> Visitor<'ast> for Finder {
        type BreakTy = ();
        fn visit_property_definition(&mut self, node: &'ast PropertyDefinition) -> ControlFlow<()> {
            if let PropertyDefinition::Property(PropertyName::Literal(name), value) = node
                && name.sym() == Sym::__PROTO__
                && !matches!(value, Expression::Literal(l) if matches!(l.kind(), LiteralKind::Null))
            {
                return ControlFlow::Break(());
            }
            node.visit_with(self)
        }
    }

    if !source.contains("proto") && !source.contains('\\') {
        return false;
    }
    let mut parser = boa_engine::parser::Parser::new(Source::from_bytes(source.as_bytes()));
    let Ok(script) = parser.parse_script(&Scope::new_global(), context.interner_mut()) else {
        return false;
    };
    Finder.visit_script(&script).is_break()
}

/// Strips surrounding whitespace and trailing semicolons from a script.
fn strip(body: &str) -> &str {
    let mut text = body.trim();
    while let Some(rest) = text.strip_suffix(';') {
        text = rest.trim_end();
    }
    text
}

/// Installs the host objects, the guards and prelude.js, then locks the
/// context down. Returns `applyStages` and the global keys.
fn setup(context: &mut Context) -> JsResult<(JsObject, HashSet<PropertyKey>)> {
    context
        .runtime_limits_mut()
        .set_loop_iteration_limit(u64::MAX);
    let collection = ObjectInitializer::new(context)
        .function(
            function(host::create_document),
            js_string!("createDocument"),
            2,
        )
        .function(
            function(host::upsert_document),
            js_string!("upsertDocument"),
            2,
        )
        .function(
            function(host::replace_document),
            js_string!("replaceDocument"),
            2,
        )
        .function(function(host::read_document), js_string!("readDocument"), 1)
        .function(
            function(host::delete_document),
            js_string!("deleteDocument"),
            1,
        )
        .function(
            function(host::read_documents),
            js_string!("readDocuments"),
            1,
        )
        .function(
            function(host::query_documents),
            js_string!("queryDocuments"),
            2,
        )
        .function(function(host::get_self_link), js_string!("getSelfLink"), 0)
        .function(function(host::get_alt_link), js_string!("getAltLink"), 0)
        .build();
    let request = ObjectInitializer::new(context)
        .function(function(host::request_get_body), js_string!("getBody"), 0)
        .function(function(host::request_set_body), js_string!("setBody"), 1)
        .function(
            function(host::request_append_body),
            js_string!("appendBody"),
            1,
        )
        .function(function(host::request_get_value), js_string!("getValue"), 1)
        .function(function(host::request_set_value), js_string!("setValue"), 2)
        .function(
            function(host::request_append_value),
            js_string!("appendValue"),
            2,
        )
        .function(
            function(host::request_operation_type),
            js_string!("getOperationType"),
            0,
        )
        .build();
    let response = ObjectInitializer::new(context)
        .function(function(host::response_get_body), js_string!("getBody"), 0)
        .function(function(host::response_set_body), js_string!("setBody"), 1)
        .function(
            function(host::response_append_body),
            js_string!("appendBody"),
            1,
        )
        .function(
            function(host::response_get_value),
            js_string!("getValue"),
            1,
        )
        .function(
            function(host::response_set_value),
            js_string!("setValue"),
            2,
        )
        .function(
            function(host::response_append_value),
            js_string!("appendValue"),
            2,
        )
        .build();
    let returning = |value: JsObject| {
        NativeFunction::from_copy_closure_with_captures(
            |_, _, v: &JsObject, _| Ok(v.clone().into()),
            value,
        )
    };
    let abort = function(host::context_abort);
    let make_context = |context: &mut Context, with_response: bool| {
        let mut init = ObjectInitializer::new(context);
        init.function(
            returning(collection.clone()),
            js_string!("getCollection"),
            0,
        )
        .function(returning(request.clone()), js_string!("getRequest"), 0)
        .function(abort.clone(), js_string!("abort"), 1);
        if with_response {
            init.function(returning(response.clone()), js_string!("getResponse"), 0);
        }
        init.build()
    };
    let contexts = [
        make_context(context, true),
        make_context(context, false),
        make_context(context, true),
    ];
    let make_under = |context: &mut Context, with_response: bool| -> JsResult<JsObject> {
        let under = JsObject::with_object_proto(context.intrinsics());
        under.set_prototype(Some(collection.clone()));
        under.set(js_string!("request"), request.clone(), true, context)?;
        if with_response {
            under.set(js_string!("response"), response.clone(), true, context)?;
        }
        Ok(under)
    };
    let unders = [
        make_under(context, true)?,
        make_under(context, false)?,
        make_under(context, true)?,
    ];

    let error_codes = ObjectInitializer::new(context)
        .property(js_string!("BadRequest"), 400, Attribute::all())
        .property(js_string!("Forbidden"), 403, Attribute::all())
        .property(js_string!("NotFound"), 404, Attribute::all())
        .property(js_string!("Conflict"), 409, Attribute::all())
        .property(js_string!("PreconditionFailed"), 412, Attribute::all())
        .property(js_string!("RequestEntityTooLarge"), 413, Attribute::all())
        .property(js_string!("RetryWith"), 449, Attribute::all())
        .property(js_string!("InternalServerError"), 500, Attribute::all())
        .build();
    let console = ObjectInitializer::new(context)
        .function(function(host::console_log), js_string!("log"), 0)
        .build();
    context.register_global_property(js_string!("ErrorCodes"), error_codes, freeze_none())?;
    context.register_global_property(js_string!("console"), console, freeze_none())?;
    context.register_global_callable(js_string!("getContext"), 0, function(host::get_context))?;
    let realm = context.realm().clone();
    let under_getter = function(host::get_under).to_js_function(&realm);
    context.global_object().define_property_or_throw(
        js_string!("__"),
        PropertyDescriptor::builder()
            .get(under_getter)
            .enumerable(false)
            .configurable(true),
        context,
    )?;

    guards::install(context)?;

    let host_obj = ObjectInitializer::new(context)
        .property(
            js_string!("collection"),
            collection.clone(),
            Attribute::all(),
        )
        .function(function(host::fluent), js_string!("fluent"), 3)
        .function(function(host::has_response), js_string!("hasResponse"), 0)
        .build();
    let prelude = Script::parse(
        Source::from_bytes(include_str!("prelude.js").as_bytes()),
        None,
        context,
    )?;
    let prelude = prelude.evaluate(context)?;
    let prelude = prelude
        .as_callable()
        .expect("prelude.js evaluates to a function");
    let helpers = prelude.call(&JsValue::undefined(), &[host_obj.into()], context)?;
    let helpers = helpers.as_object().expect("prelude.js returns an object");
    let apply_stages = helpers.get(js_string!("applyStages"), context)?;
    let apply_stages = apply_stages
        .as_callable()
        .expect("prelude.js defines applyStages");
    let error_ctor = context.global_object().get(js_string!("Error"), context)?;
    let error_ctor = error_ctor.as_object().expect("prelude.js defines Error");
    let lockdown = helpers.get(js_string!("lockdown"), context)?;
    lockdown
        .as_callable()
        .expect("prelude.js defines lockdown")
        .call(&JsValue::undefined(), &[], context)?;

    // Taken before any script runs: what a script does to
    // `Function.prototype` cannot change what the host reads.
    let function_to_string = context
        .intrinsics()
        .constructors()
        .function()
        .prototype()
        .get(js_string!("toString"), context)?;
    let function_to_string = function_to_string
        .as_object()
        .expect("Function.prototype.toString is a function");

    let state = host::state(context);
    state.borrow_mut().shared = Some(Shared {
        function_to_string,
        error_ctor,
        contexts,
        unders,
    });
    let keys = context.global_object().own_property_keys(context)?;
    Ok((apply_stages, keys.into_iter().collect()))
}

/// Thread-local pool. Dropping a boa context after the thread's GC has been
/// torn down is unsound, and thread-local destructors run in no guaranteed
/// order, so at thread exit the pool forgets its sandboxes instead (boa's
/// collector frees their heap when it is torn down).
///
/// Sandboxes are boxed: a `Sandbox` holds its boa `Context` inline (744
/// bytes with boa 0.22), and a call moved it out of the pool and back in, copying it
/// twice.
#[allow(clippy::vec_box)] // Boxed to be moved by pointer; see above.
struct Pool(Vec<Box<Sandbox>>);

impl Drop for Pool {
    fn drop(&mut self) {
        for sandbox in self.0.drain(..) {
            std::mem::forget(sandbox);
        }
    }
}

thread_local! {
    static POOL: RefCell<Pool> = const { RefCell::new(Pool(Vec::new())) };
}

/// Takes a sandbox suited to `limits` from this thread's pool, or builds one.
pub(crate) fn take(limits: &Limits) -> Result<Box<Sandbox>, String> {
    let found = POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let i = pool.0.iter().position(|s| s.suits(limits))?;
        Some(pool.0.swap_remove(i))
    });
    match found {
        Some(sandbox) => Ok(sandbox),
        None => Sandbox::build(limits).map(Box::new),
    }
}

/// Returns a healthy sandbox to this thread's pool.
pub(crate) fn give_back(sandbox: Box<Sandbox>) {
    if sandbox.poisoned {
        return;
    }
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.0.len() >= POOL_SIZE {
            pool.0.remove(0);
        }
        pool.0.push(sandbox);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Setup must fit its reserve with some headroom, or fresh sandboxes
    /// fall back to the large reserve (and a loose first-call bound).
    #[test]
    fn setup_fits_its_reserve() {
        let limits = Limits {
            instructions: 1_000,
            ..Limits::default()
        };
        let sandbox = Sandbox::build_with(&limits, SETUP_FALLBACK)
            .map_err(|(e, _)| e)
            .expect("build");
        let used = 2_000 + SETUP_FALLBACK - sandbox.context.instructions_remaining();
        eprintln!("setup used {used} instructions");
        assert!(
            used * 100 <= SETUP_INSTRUCTIONS * 95,
            "setup used {used} instructions: raise SETUP_INSTRUCTIONS"
        );
        let sandbox = Sandbox::build_with(&limits, SETUP_INSTRUCTIONS)
            .map_err(|(e, _)| e)
            .expect("build");
        assert!(sandbox.context.instructions_remaining() <= 2_000 + SETUP_INSTRUCTIONS - used);
    }

    /// The global object stays on a shared shape through setup, so
    /// `clean_globals` checks it without collecting its keys; a global
    /// added (even deleted again, or many: past boa's limit of shape
    /// transitions the shape becomes unique) is seen and cleaned, or the
    /// sandbox retired.
    #[test]
    fn clean_globals_sees_the_global_object_change() {
        let mut sandbox = Sandbox::build(&Limits::default()).expect("build");
        assert!(sandbox.baseline_shape.is_some());
        assert!(sandbox.global_as_built());
        let run = |sandbox: &mut Sandbox, script: &str| {
            sandbox
                .context
                .eval(Source::from_bytes(script.as_bytes()))
                .expect(script);
            assert!(!sandbox.global_as_built(), "{script}");
            sandbox.clean_globals();
        };
        for script in [
            "leak = 1",
            "globalThis.a = 1; globalThis.b = 2; delete globalThis.a",
            "globalThis[7] = 1",
        ] {
            run(&mut sandbox, script);
            assert!(!sandbox.poisoned, "{script}");
            assert!(sandbox.global_as_built(), "{script}");
        }
        run(
            &mut sandbox,
            "for (var i = 0; i < 1100; i++) globalThis['g' + i] = i",
        );
        assert!(sandbox.poisoned);
    }
}
