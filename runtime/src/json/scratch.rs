//! One text buffer per thread that canonical encodings are written into before they are
//! hashed, shared or compared: records and digests are encoded on every commit boundary, and
//! a fresh buffer per encoding cost an allocation regrown to the encoding's size each time.

use std::cell::Cell;

thread_local! {
    /// A cache of capacity only: it is emptied before every use.
    static SCRATCH: Cell<String> = const { Cell::new(String::new()) };
}

/// A buffer grown past this is dropped after use instead of kept (bounds what a thread holds).
const MAX_SCRATCH_BYTES: usize = 4 << 20;

/// Runs `f` over this thread's scratch buffer, empty and with room for `hint` bytes. A use
/// nested inside `f` gets a buffer of its own (the outer one is taken while `f` runs).
pub(crate) fn with_scratch<T>(hint: usize, f: impl FnOnce(&mut String) -> T) -> T {
    SCRATCH.with(|scratch| {
        let mut buf = scratch.take();
        buf.clear();
        buf.reserve(hint);
        let out = f(&mut buf);
        if buf.capacity() <= MAX_SCRATCH_BYTES {
            scratch.set(buf);
        }
        out
    })
}
