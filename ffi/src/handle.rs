//! Typed conversions between opaque C pointers and Rust values, and checked views of the
//! caller's buffers.
//!
//! Each opaque C type declares how it is owned: [`ArcHandle`] types are `Arc<Inner>` turned
//! into a raw pointer (shared, reference-counted: registry, profile, encoder, hasher);
//! [`BoxHandle`] types are `Box<Inner>` (one owner: error objects, event decoders). Every
//! helper turns NULL into a [`Failure`] naming the argument instead of dereferencing it.

use std::ffi::{c_char, CStr};
use std::sync::Arc;

use crate::failure::Failure;

/// An opaque C type handed out as `Arc::into_raw(Arc<Inner>)`.
pub trait ArcHandle {
    /// The Rust value behind the pointer; shared between threads.
    type Inner: Send + Sync;
}

/// An opaque C type handed out as `Box::into_raw(Box<Inner>)`.
pub trait BoxHandle {
    /// The Rust value behind the pointer.
    type Inner;
}

/// Gives up one strong reference as a C pointer (freed by [`arc_free`]).
pub fn arc_into_raw<H: ArcHandle>(value: Arc<H::Inner>) -> *mut H {
    Arc::into_raw(value).cast_mut().cast()
}

/// Borrows the value behind an Arc handle.
///
/// # Safety
/// `ptr` is NULL or was made by [`arc_into_raw`] for `H` and is still alive.
pub unsafe fn arc_ref<'a, H: ArcHandle>(
    ptr: *const H,
    name: &str,
) -> Result<&'a H::Inner, Failure> {
    // SAFETY: per the contract, non-NULL means a live `Arc<H::Inner>` payload.
    unsafe { ptr.cast::<H::Inner>().as_ref() }.ok_or_else(|| Failure::null(name))
}

/// Takes one more strong reference to the value behind an Arc handle.
///
/// # Safety
/// As [`arc_ref`].
pub unsafe fn arc_clone<H: ArcHandle>(ptr: *const H, name: &str) -> Result<Arc<H::Inner>, Failure> {
    if ptr.is_null() {
        return Err(Failure::null(name));
    }
    let raw = ptr.cast::<H::Inner>();
    // SAFETY: `raw` came from `Arc::into_raw` and is alive; we add a reference, then borrow.
    unsafe {
        Arc::increment_strong_count(raw);
        Ok(Arc::from_raw(raw))
    }
}

/// Drops the strong reference a C pointer holds. NULL is ignored.
///
/// # Safety
/// `ptr` is NULL or was made by [`arc_into_raw`] (or retained) for `H`, and this reference was
/// not released before.
pub unsafe fn arc_free<H: ArcHandle>(ptr: *const H) {
    if !ptr.is_null() {
        // SAFETY: per the contract, this gives back exactly one strong reference.
        drop(unsafe { Arc::from_raw(ptr.cast::<H::Inner>()) });
    }
}

/// Hands a value to C as a uniquely owned pointer (freed by [`box_free`]).
pub fn box_into_raw<H: BoxHandle>(value: H::Inner) -> *mut H {
    Box::into_raw(Box::new(value)).cast()
}

/// Borrows the value behind a Box handle.
///
/// # Safety
/// `ptr` is NULL or was made by [`box_into_raw`] for `H` and is still alive.
pub unsafe fn box_ref<'a, H: BoxHandle>(
    ptr: *const H,
    name: &str,
) -> Result<&'a H::Inner, Failure> {
    // SAFETY: per the contract.
    unsafe { ptr.cast::<H::Inner>().as_ref() }.ok_or_else(|| Failure::null(name))
}

/// Mutably borrows the value behind a Box handle.
///
/// # Safety
/// As [`box_ref`], and no other reference to the value is in use.
pub unsafe fn box_mut<'a, H: BoxHandle>(
    ptr: *mut H,
    name: &str,
) -> Result<&'a mut H::Inner, Failure> {
    // SAFETY: per the contract.
    unsafe { ptr.cast::<H::Inner>().as_mut() }.ok_or_else(|| Failure::null(name))
}

/// Drops the value behind a Box handle. NULL is ignored.
///
/// # Safety
/// `ptr` is NULL or was made by [`box_into_raw`] for `H` and not freed before.
pub unsafe fn box_free<H: BoxHandle>(ptr: *mut H) {
    if !ptr.is_null() {
        // SAFETY: per the contract.
        drop(unsafe { Box::from_raw(ptr.cast::<H::Inner>()) });
    }
}

/// Checks that `len` elements of `T` starting at `ptr` form a valid slice shape.
fn check_shape<T>(ptr: *const T, len: usize, name: &str) -> Result<(), Failure> {
    if ptr.is_null() {
        return Err(Failure::null(name));
    }
    if !ptr.is_aligned() {
        return Err(Failure::invalid(
            name,
            "pointer is not aligned for its element type",
        ));
    }
    if len
        .checked_mul(std::mem::size_of::<T>())
        .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(Failure::invalid(name, "length is too large"));
    }
    Ok(())
}

/// Borrows `len` elements the caller passed as `(ptr, len)`. `(NULL, 0)` is the empty slice.
///
/// # Safety
/// When `ptr` is not NULL it is valid for reads of `len` elements for `'a`.
pub unsafe fn in_slice<'a, T>(ptr: *const T, len: usize, name: &str) -> Result<&'a [T], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    check_shape(ptr, len, name)?;
    // SAFETY: non-NULL, aligned, size checked; validity is the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows the caller's output buffer of `len` elements. `(NULL, 0)` is the empty buffer.
///
/// # Safety
/// When `ptr` is not NULL it is valid for writes of `len` elements for `'a`, and not aliased.
pub unsafe fn out_slice<'a, T>(
    ptr: *mut T,
    len: usize,
    name: &str,
) -> Result<&'a mut [T], Failure> {
    if len == 0 {
        return Ok(&mut []);
    }
    check_shape(ptr.cast_const(), len, name)?;
    // SAFETY: as in_slice, for writes.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// A checked, non-NULL output parameter, written at most once and only on success.
pub struct Out<T>(*mut T);

impl<T> Out<T> {
    /// Writes the value.
    pub fn write(self, value: T) {
        // SAFETY: `out_param` checked non-NULL; validity is the caller's contract.
        unsafe { self.0.write(value) }
    }
}

/// Checks a required output parameter.
///
/// # Safety
/// When `ptr` is not NULL it is valid for one write of `T`.
pub unsafe fn out_param<T>(ptr: *mut T, name: &str) -> Result<Out<T>, Failure> {
    if ptr.is_null() {
        Err(Failure::null(name))
    } else {
        Ok(Out(ptr))
    }
}

/// Borrows a NUL-terminated UTF-8 string argument.
///
/// # Safety
/// When `ptr` is not NULL it points to a NUL-terminated string alive for `'a`.
pub unsafe fn in_c_str<'a>(ptr: *const c_char, name: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::null(name));
    }
    // SAFETY: per the contract.
    let c = unsafe { CStr::from_ptr(ptr) };
    c.to_str()
        .map_err(|e| Failure::invalid(name, format_args!("not UTF-8: {e}")))
}

/// Borrows a `(ptr, len)` byte string that must be UTF-8.
///
/// # Safety
/// As [`in_slice`].
pub unsafe fn in_str<'a>(ptr: *const u8, len: usize, name: &str) -> Result<&'a str, Failure> {
    let bytes = unsafe { in_slice(ptr, len, name) }?;
    std::str::from_utf8(bytes).map_err(|e| Failure::invalid(name, format_args!("not UTF-8: {e}")))
}

/// Copies `bytes` into the caller's buffer, after writing the needed length to `len` (the
/// size-query convention: a too small buffer is `KVEXACT_ERR_BUFFER_TOO_SMALL` with nothing
/// else written; `(NULL, 0)` asks for the size). `what` names the bytes in the error.
pub fn copy_out(
    bytes: &[u8],
    buf: &mut [u8],
    len: Out<usize>,
    what: &str,
) -> Result<crate::status::kvexact_status, Failure> {
    len.write(bytes.len());
    let dst = buf.get_mut(..bytes.len()).ok_or_else(|| {
        Failure::new(
            crate::status::KVEXACT_ERR_BUFFER_TOO_SMALL,
            format!("buffer too small for the {what} ({} bytes)", bytes.len()),
        )
    })?;
    dst.copy_from_slice(bytes);
    Ok(crate::status::KVEXACT_OK)
}

/// Largest `struct_size` a versioned options struct may announce (a guard against garbage).
const MAX_STRUCT_SIZE: usize = 4096;

/// Reads a versioned struct whose first field is `uint32_t struct_size` (the size the caller
/// compiled it with). NULL gives `None` (the caller's defaults). A size smaller than this
/// version's is `KVEXACT_ERR_INVALID_ARGUMENT` (this is the first version of every such
/// struct); a larger one (a caller built against a newer header) is accepted when every byte
/// past this version's fields is zero, i.e. the newer fields are left at their defaults, and
/// refused otherwise, naming the first offset libkvexact does not know.
///
/// # Safety
/// `ptr` is NULL or valid for reads of its `struct_size` bytes.
pub unsafe fn versioned_in<T: Copy>(ptr: *const T, name: &str) -> Result<Option<T>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    if !ptr.is_aligned() {
        return Err(Failure::invalid(name, "pointer is not aligned"));
    }
    // SAFETY: non-NULL and aligned; the first field is a u32 by the contract.
    let size = unsafe { ptr.cast::<u32>().read() } as usize;
    let ours = std::mem::size_of::<T>();
    if size < ours {
        return Err(Failure::invalid(
            name,
            format_args!("struct_size is {size}, this struct has {ours} bytes: set struct_size = sizeof the struct"),
        ));
    }
    if size > MAX_STRUCT_SIZE {
        return Err(Failure::invalid(
            name,
            format_args!("struct_size {size} is implausible (set struct_size = sizeof the struct)"),
        ));
    }
    if size > ours {
        // SAFETY: the caller guarantees `size` readable bytes.
        let all = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), size) };
        if let Some(i) = all.iter().skip(ours).position(|&b| b != 0) {
            return Err(Failure::invalid(
                name,
                format_args!(
                    "sets a field at byte {} that this libkvexact ({}) does not know",
                    ours + i,
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
    }
    // SAFETY: valid for `ours` bytes, aligned, plain old data.
    Ok(Some(unsafe { ptr.read() }))
}

/// Writes a versioned output struct (first field `uint32_t struct_size`, set by the caller):
/// `value`'s bytes, with the caller's `struct_size` kept, up to this version's size; the
/// caller's bytes beyond it are left alone. A `struct_size` smaller than this version's is
/// `KVEXACT_ERR_INVALID_ARGUMENT`, with nothing written.
///
/// # Safety
/// `ptr` is NULL or valid for reads and writes of its `struct_size` bytes.
pub unsafe fn versioned_out<T: Copy>(ptr: *mut T, name: &str, value: T) -> Result<(), Failure> {
    if ptr.is_null() {
        return Err(Failure::null(name));
    }
    if !ptr.is_aligned() {
        return Err(Failure::invalid(name, "pointer is not aligned"));
    }
    // SAFETY: non-NULL and aligned; the first field is a u32 by the contract.
    let size = unsafe { ptr.cast::<u32>().read() };
    let ours = std::mem::size_of::<T>();
    if (size as usize) < ours {
        return Err(Failure::invalid(
            name,
            format_args!("struct_size is {size}, this struct has {ours} bytes: set struct_size = sizeof the struct"),
        ));
    }
    // SAFETY: valid for `ours` bytes; then the caller's size goes back into the first field.
    unsafe {
        ptr.write(value);
        ptr.cast::<u32>().write(size);
    }
    Ok(())
}
