//! Plain C structures of the Linux ABI (from linux-raw-sys) as bytes.

use linux_raw_sys::general as g;
use linux_raw_sys::system as s;

/// A C struct made only of integers and arrays of integers: every bit
/// pattern is a valid value, so it can be read from application memory.
///
/// # Safety
/// Implement only for such structs. Values given to [`bytes_of`] must have
/// been built from [`Pod::zeroed`] so that any padding bytes are zero and no
/// sentry memory leaks through them.
pub unsafe trait Pod: Sized + 'static {
    fn zeroed() -> Self {
        // SAFETY: all-zero is a valid value of an integer-only struct.
        unsafe { std::mem::zeroed() }
    }
}

macro_rules! pod {
    ($($t:ty),* $(,)?) => {
        // SAFETY: each of these linux-raw-sys types is a bindgen struct of
        // integer fields and integer arrays only.
        $(unsafe impl Pod for $t {})*
    };
}

pod!(
    g::stat,
    g::statx,
    g::statx_timestamp,
    g::statfs64,
    g::termios,
    g::termios2,
    g::winsize,
    g::__kernel_timespec,
    g::__kernel_old_timeval,
    g::timeval,
    g::timespec,
    g::timezone,
    g::rlimit64,
    g::rusage,
    g::iovec,
    g::robust_list_head,
    g::itimerval,
    g::itimerspec,
    g::pollfd,
    g::open_how,
    g::clone_args,
    g::f_owner_ex,
    g::flock,
    s::sysinfo,
    s::new_utsname,
    u32,
    u64,
    i32,
    i64,
    [u64; 2],
);

/// The bytes of a value.
pub fn bytes_of<T: Pod>(v: &T) -> &[u8] {
    // SAFETY: Pod values are plain integers with zeroed padding (see the
    // trait's contract); the slice covers exactly the value.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
}

/// A value read from bytes; `bytes` must be exactly its size.
pub fn from_bytes<T: Pod>(bytes: &[u8]) -> T {
    assert_eq!(bytes.len(), size_of::<T>());
    let mut v = T::zeroed();
    // SAFETY: any bit pattern is a valid Pod value; sizes match.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&mut v as *mut T).cast::<u8>(), bytes.len()) };
    v
}
