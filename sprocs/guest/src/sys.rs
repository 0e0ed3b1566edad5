//! The host functions of `partita_v1`, one safe function per import.
//!
//! On `wasm32` each function passes its slices as `(ptr, len)` to the import
//! of the same name (see `host_api::abi`); a slice always lies inside linear
//! memory, so the host never traps on them. On every other target the same
//! functions are served by the thread's [`testing`](crate::testing) mock
//! host, so the SDK and the procedures written on it can be unit-tested
//! natively against the same protocol.
//!
//! Nothing here interprets a return value: that is [`crate::call`]'s job.

#[cfg(target_arch = "wasm32")]
mod imp {
    /// The raw imports. Every pointer and length is an `i32` on wasm32.
    mod raw {
        #[link(wasm_import_module = "partita_v1")]
        unsafe extern "C" {
            pub(super) fn context(out: *mut u8, cap: usize) -> i32;
            pub(super) fn params(out: *mut u8, cap: usize) -> i32;
            pub(super) fn request_body(out: *mut u8, cap: usize) -> i32;
            pub(super) fn set_request_body(ptr: *const u8, len: usize) -> i32;
            pub(super) fn response_body(out: *mut u8, cap: usize) -> i32;
            pub(super) fn set_response_body(ptr: *const u8, len: usize) -> i32;
            pub(super) fn log(ptr: *const u8, len: usize);
            pub(super) fn read(id: *const u8, id_len: usize, out: *mut u8, cap: usize) -> i32;
            pub(super) fn read_feed(
                opts: *const u8,
                opts_len: usize,
                out: *mut u8,
                cap: usize,
            ) -> i32;
            pub(super) fn create(
                doc: *const u8,
                doc_len: usize,
                opts: *const u8,
                opts_len: usize,
                out: *mut u8,
                cap: usize,
            ) -> i32;
            #[allow(clippy::too_many_arguments)]
            pub(super) fn replace(
                id: *const u8,
                id_len: usize,
                doc: *const u8,
                doc_len: usize,
                opts: *const u8,
                opts_len: usize,
                out: *mut u8,
                cap: usize,
            ) -> i32;
            pub(super) fn upsert(
                doc: *const u8,
                doc_len: usize,
                opts: *const u8,
                opts_len: usize,
                out: *mut u8,
                cap: usize,
            ) -> i32;
            pub(super) fn delete(
                id: *const u8,
                id_len: usize,
                opts: *const u8,
                opts_len: usize,
            ) -> i32;
            pub(super) fn query(req: *const u8, req_len: usize, out: *mut u8, cap: usize) -> i32;
            pub(super) fn take_result(out: *mut u8, cap: usize) -> i32;
            pub(super) fn fail(number: i32, msg: *const u8, msg_len: usize);
            pub(super) fn read_member(
                id: *const u8,
                id_len: usize,
                key: *const u8,
                key_len: usize,
                out: *mut u8,
                cap: usize,
            ) -> i32;
            #[allow(clippy::too_many_arguments)]
            pub(super) fn replace_member(
                id: *const u8,
                id_len: usize,
                key: *const u8,
                key_len: usize,
                value: *const u8,
                value_len: usize,
                opts: *const u8,
                opts_len: usize,
                out: *mut u8,
                cap: usize,
            ) -> i32;
        }
    }

    // SAFETY (every function below): the pointers come from live slices of
    // guest memory with their exact lengths, which is all the ABI asks; the
    // host writes at most `cap` bytes into an output slice.

    pub(crate) fn context(out: &mut [u8]) -> i32 {
        unsafe { raw::context(out.as_mut_ptr(), out.len()) }
    }
    pub(crate) fn params(out: &mut [u8]) -> i32 {
        unsafe { raw::params(out.as_mut_ptr(), out.len()) }
    }
    pub(crate) fn request_body(out: &mut [u8]) -> i32 {
        unsafe { raw::request_body(out.as_mut_ptr(), out.len()) }
    }
    pub(crate) fn set_request_body(body: &[u8]) -> i32 {
        unsafe { raw::set_request_body(body.as_ptr(), body.len()) }
    }
    pub(crate) fn response_body(out: &mut [u8]) -> i32 {
        unsafe { raw::response_body(out.as_mut_ptr(), out.len()) }
    }
    pub(crate) fn set_response_body(body: &[u8]) -> i32 {
        unsafe { raw::set_response_body(body.as_ptr(), body.len()) }
    }
    pub(crate) fn log(line: &[u8]) {
        unsafe { raw::log(line.as_ptr(), line.len()) }
    }
    pub(crate) fn read(id: &[u8], out: &mut [u8]) -> i32 {
        unsafe { raw::read(id.as_ptr(), id.len(), out.as_mut_ptr(), out.len()) }
    }
    pub(crate) fn read_feed(opts: &[u8], out: &mut [u8]) -> i32 {
        unsafe { raw::read_feed(opts.as_ptr(), opts.len(), out.as_mut_ptr(), out.len()) }
    }
    pub(crate) fn create(doc: &[u8], opts: &[u8], out: &mut [u8]) -> i32 {
        unsafe {
            raw::create(
                doc.as_ptr(),
                doc.len(),
                opts.as_ptr(),
                opts.len(),
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }
    pub(crate) fn replace(id: &[u8], doc: &[u8], opts: &[u8], out: &mut [u8]) -> i32 {
        unsafe {
            raw::replace(
                id.as_ptr(),
                id.len(),
                doc.as_ptr(),
                doc.len(),
                opts.as_ptr(),
                opts.len(),
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }
    pub(crate) fn upsert(doc: &[u8], opts: &[u8], out: &mut [u8]) -> i32 {
        unsafe {
            raw::upsert(
                doc.as_ptr(),
                doc.len(),
                opts.as_ptr(),
                opts.len(),
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }
    pub(crate) fn delete(id: &[u8], opts: &[u8]) -> i32 {
        unsafe { raw::delete(id.as_ptr(), id.len(), opts.as_ptr(), opts.len()) }
    }
    pub(crate) fn query(request: &[u8], out: &mut [u8]) -> i32 {
        unsafe { raw::query(request.as_ptr(), request.len(), out.as_mut_ptr(), out.len()) }
    }
    pub(crate) fn take_result(out: &mut [u8]) -> i32 {
        unsafe { raw::take_result(out.as_mut_ptr(), out.len()) }
    }
    pub(crate) fn read_member(id: &[u8], key: &[u8], out: &mut [u8]) -> i32 {
        unsafe {
            raw::read_member(
                id.as_ptr(),
                id.len(),
                key.as_ptr(),
                key.len(),
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }
    pub(crate) fn replace_member(
        id: &[u8],
        key: &[u8],
        value: &[u8],
        opts: &[u8],
        out: &mut [u8],
    ) -> i32 {
        unsafe {
            raw::replace_member(
                id.as_ptr(),
                id.len(),
                key.as_ptr(),
                key.len(),
                value.as_ptr(),
                value.len(),
                opts.as_ptr(),
                opts.len(),
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }
    pub(crate) fn fail(number: i32, message: &[u8]) -> ! {
        unsafe { raw::fail(number, message.as_ptr(), message.len()) };
        // `fail` never returns; should a host return anyway, stop here.
        core::arch::wasm32::unreachable()
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use crate::testing::{Call, dispatch};

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    pub(crate) fn context(out: &mut [u8]) -> i32 {
        dispatch(Call::Context, Some(out))
    }
    pub(crate) fn params(out: &mut [u8]) -> i32 {
        dispatch(Call::Params, Some(out))
    }
    pub(crate) fn request_body(out: &mut [u8]) -> i32 {
        dispatch(Call::RequestBody, Some(out))
    }
    pub(crate) fn set_request_body(body: &[u8]) -> i32 {
        dispatch(Call::SetRequestBody(body.to_vec()), None)
    }
    pub(crate) fn response_body(out: &mut [u8]) -> i32 {
        dispatch(Call::ResponseBody, Some(out))
    }
    pub(crate) fn set_response_body(body: &[u8]) -> i32 {
        dispatch(Call::SetResponseBody(body.to_vec()), None)
    }
    pub(crate) fn log(line: &[u8]) {
        dispatch(Call::Log(text(line)), None);
    }
    pub(crate) fn read(id: &[u8], out: &mut [u8]) -> i32 {
        dispatch(Call::Read { id: text(id) }, Some(out))
    }
    pub(crate) fn read_feed(opts: &[u8], out: &mut [u8]) -> i32 {
        dispatch(
            Call::ReadFeed {
                options: opts.to_vec(),
            },
            Some(out),
        )
    }
    pub(crate) fn create(doc: &[u8], opts: &[u8], out: &mut [u8]) -> i32 {
        let call = Call::Create {
            doc: doc.to_vec(),
            options: opts.to_vec(),
        };
        dispatch(call, Some(out))
    }
    pub(crate) fn replace(id: &[u8], doc: &[u8], opts: &[u8], out: &mut [u8]) -> i32 {
        let call = Call::Replace {
            id: text(id),
            doc: doc.to_vec(),
            options: opts.to_vec(),
        };
        dispatch(call, Some(out))
    }
    pub(crate) fn upsert(doc: &[u8], opts: &[u8], out: &mut [u8]) -> i32 {
        let call = Call::Upsert {
            doc: doc.to_vec(),
            options: opts.to_vec(),
        };
        dispatch(call, Some(out))
    }
    pub(crate) fn delete(id: &[u8], opts: &[u8]) -> i32 {
        let call = Call::Delete {
            id: text(id),
            options: opts.to_vec(),
        };
        dispatch(call, None)
    }
    pub(crate) fn query(request: &[u8], out: &mut [u8]) -> i32 {
        dispatch(
            Call::Query {
                request: request.to_vec(),
            },
            Some(out),
        )
    }
    pub(crate) fn take_result(out: &mut [u8]) -> i32 {
        crate::testing::take_result(out)
    }
    pub(crate) fn read_member(id: &[u8], key: &[u8], out: &mut [u8]) -> i32 {
        let call = Call::ReadMember {
            id: text(id),
            key: text(key),
        };
        dispatch(call, Some(out))
    }
    pub(crate) fn replace_member(
        id: &[u8],
        key: &[u8],
        value: &[u8],
        opts: &[u8],
        out: &mut [u8],
    ) -> i32 {
        let call = Call::ReplaceMember {
            id: text(id),
            key: text(key),
            value: value.to_vec(),
            options: opts.to_vec(),
        };
        dispatch(call, Some(out))
    }
    pub(crate) fn fail(number: i32, message: &[u8]) -> ! {
        crate::testing::fail(number, text(message))
    }
}

pub(crate) use imp::*;
