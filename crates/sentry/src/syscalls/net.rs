//! Socket calls on descriptors. The sandbox has no sockets yet (`socket`
//! and `socketpair` are unsupported and reported), so no descriptor is a
//! socket: a call on one is answered as Linux answers it for a file or a
//! pipe. Programs probe their standard descriptors this way (bash asks
//! whether stdin is a network connection).

use super::{SysResult, file};
use crate::errno::Errno;
use crate::task::Task;

/// getpeername, getsockname, getsockopt, setsockopt, shutdown, bind,
/// listen, connect, accept(4), sendto, recvfrom, sendmsg, recvmsg,
/// sendmmsg, recvmmsg: EBADF for a bad descriptor, else ENOTSOCK.
pub fn on_descriptor(task: &mut Task, a: &[u64; 6]) -> SysResult {
    file(task, a[0])?;
    Err(Errno::ENOTSOCK.into())
}
