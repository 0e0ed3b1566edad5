//! Room on the native stack for a script call, on any thread.
//!
//! boa's parser, compiler and some built-ins recurse in Rust, and so does
//! wasmtime's host side, so a call needs a few MB of stack. A thread that
//! has them runs the call in place. One that has not (threads spawned with
//! Rust's default 2 MB, as an embedding application's usually are) runs it
//! on its *spare*: one [`SPARE_SIZE`] stack per thread, mapped at the first
//! such call and kept until the thread ends, so later calls find its pages
//! already mapped and warm instead of mapping, faulting in and unmapping a
//! fresh segment each time.
//!
//! A call that needs more than the spare holds (compiling: 64 MB), or that
//! needs room while the spare is already in use further up the same
//! thread, gets a fresh segment from `stacker` as before.
//!
//! [`remaining`] knows about the spare: `stacker::remaining_stack` measures
//! against the thread's own stack, so code running on the spare must ask
//! here.

use std::cell::Cell;

use corosensei::stack::{DefaultStack, Stack};

/// The size of a thread's spare stack: address space, of which only the
/// pages calls touch become memory.
pub(crate) const SPARE_SIZE: usize = 16 << 20;

thread_local! {
    /// The thread's spare, while no call runs on it.
    static SPARE: Cell<Option<DefaultStack>> = const { Cell::new(None) };
    /// The spare's address range (`limit..base`) while a call runs on it.
    static ON_SPARE: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
    /// How many spares this thread has mapped: at most one, as it is kept.
    static MAPPED: Cell<usize> = const { Cell::new(0) };
}

/// The free stack below the current frame, or `None` when unknown.
pub(crate) fn remaining() -> Option<usize> {
    let here = stack_pointer();
    if let Some((limit, base)) = ON_SPARE.get()
        && (limit..base).contains(&here)
    {
        return Some(here - limit);
    }
    stacker::remaining_stack()
}

/// The address of a local: the stack pointer, give or take a frame.
#[inline(never)]
fn stack_pointer() -> usize {
    let marker = 0u8;
    std::hint::black_box(&raw const marker) as usize
}

/// Runs `f` with at least `red_zone` bytes of stack free: in place when
/// there is room, on the thread's spare when `size` fits in it, otherwise
/// on a fresh `size`-byte segment. A panic in `f` reaches the caller.
pub(crate) fn with_room<R>(red_zone: usize, size: usize, f: impl FnOnce() -> R) -> R {
    if remaining().is_some_and(|free| free >= red_zone) {
        return f();
    }
    if size > SPARE_SIZE {
        return stacker::grow(size, f);
    }
    // (Not during the thread's exit, when the spare is already gone.)
    let spare = SPARE.try_with(Cell::take).ok().flatten();
    let Some(spare) = spare.or_else(map_spare) else {
        // In use further up this thread, or could not be mapped.
        return stacker::grow(size, f);
    };
    let outer = ON_SPARE.replace(Some((spare.limit().get(), spare.base().get())));
    let mut lent = Lent {
        spare: Some(spare),
        outer,
    };
    let spare = lent.spare.as_mut().expect("lent above");
    corosensei::on_stack(spare, f)
}

/// The spare while a call runs on it: given back to the thread when the
/// call returns or panics (by then the panic has been carried back off the
/// spare, which nothing uses any more).
struct Lent {
    spare: Option<DefaultStack>,
    outer: Option<(usize, usize)>,
}

impl Drop for Lent {
    fn drop(&mut self) {
        ON_SPARE.set(self.outer);
        // During the thread's exit the spare is simply unmapped here.
        let _ = SPARE.try_with(|spare| spare.set(self.spare.take()));
    }
}

/// Maps a new spare (`None` when the address space cannot be had).
fn map_spare() -> Option<DefaultStack> {
    if ON_SPARE.get().is_some() {
        return None;
    }
    let spare = DefaultStack::new(SPARE_SIZE).ok()?;
    MAPPED.set(MAPPED.get() + 1);
    Some(spare)
}

/// How many spare stacks the current thread has mapped.
#[cfg(test)]
pub(crate) fn spares_mapped() -> usize {
    MAPPED.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a new thread with `stack` bytes of stack.
    fn on_thread<R: Send + 'static>(stack: usize, f: impl FnOnce() -> R + Send + 'static) -> R {
        std::thread::Builder::new()
            .stack_size(stack)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn a_small_thread_maps_one_spare_and_reuses_it() {
        let (mapped, free) = on_thread(256 << 10, || {
            let mut free = Vec::new();
            for _ in 0..100 {
                free.push(with_room(4 << 20, 16 << 20, || remaining().unwrap()));
            }
            (spares_mapped(), free)
        });
        assert_eq!(mapped, 1);
        assert!(
            free.iter()
                .all(|&f| (4 << 20..SPARE_SIZE + (64 << 10)).contains(&f)),
            "{free:?}"
        );
    }

    #[test]
    fn a_thread_with_room_runs_in_place() {
        let mapped = on_thread(32 << 20, || {
            with_room(4 << 20, 16 << 20, || ());
            spares_mapped()
        });
        assert_eq!(mapped, 0);
    }

    #[test]
    fn a_nested_call_short_of_room_on_the_spare_gets_a_fresh_segment() {
        let (mapped, inner) = on_thread(256 << 10, || {
            let inner = with_room(4 << 20, 16 << 20, || {
                // More than the spare has left: not the spare again.
                with_room(SPARE_SIZE, SPARE_SIZE, || remaining().unwrap())
            });
            (spares_mapped(), inner)
        });
        assert_eq!(mapped, 1);
        assert!(inner >= SPARE_SIZE - (64 << 10), "{inner}");
    }

    #[test]
    fn a_panic_on_the_spare_reaches_the_caller_and_the_spare_is_kept() {
        let mapped = on_thread(256 << 10, || {
            let caught = std::panic::catch_unwind(|| {
                with_room(4 << 20, 16 << 20, || panic!("in the call"));
            });
            assert!(caught.is_err());
            assert_eq!(ON_SPARE.get(), None);
            with_room(4 << 20, 16 << 20, || ());
            spares_mapped()
        });
        assert_eq!(mapped, 1);
    }
}
