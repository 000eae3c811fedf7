//! The system call table: handler and how strace shows the arguments, by
//! number.

use std::sync::LazyLock;

use syscalls::Sysno;

use super::strace::{Arg, Arg::*, Ret};
use super::{
    Handler, epoll, fs, futex, info, io, ipc, keys, membarrier, mm, mount, namei, net, notify, numa, pipe, process,
    ptrace, sched, settime, signal, time, timer,
};

/// One implemented system call.
pub struct SyscallDef {
    pub name: &'static str,
    pub handler: Handler,
    pub args: &'static [Arg],
    pub ret: Ret,
}

macro_rules! table {
    ($($sys:ident => $h:path, [$($a:expr),*], $r:ident;)*) => {
        fn entries() -> Vec<(Sysno, Handler, &'static [Arg], Ret)> {
            vec![$((Sysno::$sys, $h as Handler, &[$($a),*], Ret::$r)),*]
        }
    };
}

table! {
    read => io::read, [Fd, OutBuf, UInt], Int;
    write => io::write, [Fd, InBuf(2), UInt], Int;
    open => fs::open, [Path, OpenFlags, OpenMode(1)], Int;
    close => fs::close, [Fd], Int;
    stat => fs::stat, [Path, Ptr], Int;
    fstat => fs::fstat, [Fd, Ptr], Int;
    lstat => fs::lstat, [Path, Ptr], Int;
    lseek => io::lseek, [Fd, Long, Whence], Int;
    mmap => mm::mmap, [Ptr, UInt, Prot, MapFlags, Fd, Hex], Hex;
    mprotect => mm::mprotect, [Ptr, UInt, Prot], Int;
    munmap => mm::munmap, [Ptr, UInt], Int;
    brk => mm::brk, [Ptr], Hex;
    rt_sigaction => signal::rt_sigaction, [Signal, Ptr, Ptr, UInt], Int;
    rt_sigprocmask => signal::rt_sigprocmask, [SigHow, Ptr, Ptr, UInt], Int;
    ioctl => fs::ioctl, [Fd, Hex, Ptr], Int;
    pread64 => io::pread64, [Fd, OutBuf, UInt, Long], Int;
    pwrite64 => io::pwrite64, [Fd, InBuf(2), UInt, Long], Int;
    readv => io::readv, [Fd, Ptr, UInt], Int;
    writev => io::writev, [Fd, Ptr, UInt], Int;
    access => fs::access, [Path, AccessMode], Int;
    sched_yield => info::sched_yield, [], Int;
    mremap => mm::mremap, [Ptr, UInt, UInt, Hex, Ptr], Hex;
    msync => mm::msync, [Ptr, UInt, Hex], Int;
    mincore => mm::mincore, [Ptr, UInt, Ptr], Int;
    madvise => mm::madvise, [Ptr, UInt, Int], Int;
    pkey_alloc => mm::pkey_alloc, [Hex, Hex], Int;
    pkey_free => mm::pkey_free, [Int], Int;
    pkey_mprotect => mm::pkey_mprotect, [Ptr, UInt, Prot, Int], Int;
    membarrier => membarrier::membarrier, [Int, Hex, Int], Int;
    set_mempolicy => numa::set_mempolicy, [Int, Ptr, UInt], Int;
    get_mempolicy => numa::get_mempolicy, [Ptr, Ptr, UInt, Ptr, Hex], Int;
    mbind => numa::mbind, [Ptr, UInt, Int, Ptr, UInt, Hex], Int;
    shmget => ipc::shmget, [Int, UInt, Hex], Int;
    shmat => ipc::shmat, [Int, Ptr, Hex], Hex;
    shmctl => ipc::shmctl, [Int, Int, Ptr], Int;
    shmdt => ipc::shmdt, [Ptr], Int;
    semget => ipc::semget, [Int, Int, Hex], Int;
    semop => ipc::semop, [Int, Ptr, UInt], Int;
    semtimedop => ipc::semtimedop, [Int, Ptr, UInt, Ptr], Int;
    semctl => ipc::semctl, [Int, Int, Int, Hex], Int;
    msgget => ipc::msgget, [Int, Hex], Int;
    msgsnd => ipc::msgsnd, [Int, Ptr, UInt, Hex], Int;
    msgrcv => ipc::msgrcv, [Int, Ptr, UInt, Long, Hex], Int;
    msgctl => ipc::msgctl, [Int, Int, Ptr], Int;
    mq_open => ipc::mq_open, [Path, OpenFlags, Mode, Ptr], Int;
    mq_unlink => ipc::mq_unlink, [Path], Int;
    mq_timedsend => ipc::mq_timedsend, [Fd, Ptr, UInt, UInt, Ptr], Int;
    mq_timedreceive => ipc::mq_timedreceive, [Fd, Ptr, UInt, Ptr, Ptr], Int;
    mq_notify => ipc::mq_notify, [Fd, Ptr], Int;
    mq_getsetattr => ipc::mq_getsetattr, [Fd, Ptr, Ptr], Int;
    process_vm_readv => ipc::process_vm_readv, [Int, Ptr, UInt, Ptr, UInt, Hex], Int;
    process_vm_writev => ipc::process_vm_writev, [Int, Ptr, UInt, Ptr, UInt, Hex], Int;
    dup => fs::dup, [Fd], Int;
    dup2 => fs::dup2, [Fd, Fd], Int;
    nanosleep => time::nanosleep, [Ptr, Ptr], Int;
    getpid => process::getpid, [], Int;
    sendfile => io::sendfile, [Fd, Fd, Ptr, UInt], Int;
    exit => process::exit, [Int], None;
    kill => signal::kill, [Int, Signal], Int;
    uname => info::uname, [Ptr], Int;
    fcntl => fs::fcntl, [Fd, FcntlCmd, Hex], Int;
    flock => fs::flock, [Fd, Int], Int;
    fsync => fs::fsync, [Fd], Int;
    fdatasync => fs::fdatasync, [Fd], Int;
    truncate => namei::truncate, [Path, Long], Int;
    ftruncate => namei::ftruncate, [Fd, Long], Int;
    getcwd => fs::getcwd, [Ptr, UInt], Int;
    chdir => fs::chdir, [Path], Int;
    fchdir => fs::fchdir, [Fd], Int;
    rename => namei::rename, [Path, Path], Int;
    mkdir => namei::mkdir, [Path, Mode], Int;
    rmdir => namei::rmdir, [Path], Int;
    creat => fs::creat, [Path, Mode], Int;
    link => namei::link, [Path, Path], Int;
    unlink => namei::unlink, [Path], Int;
    symlink => namei::symlink, [Path, Path], Int;
    readlink => fs::readlink, [Path, Ptr, UInt], Int;
    chmod => namei::chmod, [Path, Mode], Int;
    fchmod => namei::fchmod, [Fd, Mode], Int;
    chown => namei::chown, [Path, Int, Int], Int;
    fchown => namei::fchown, [Fd, Int, Int], Int;
    lchown => namei::lchown, [Path, Int, Int], Int;
    umask => fs::umask, [Mode], Int;
    gettimeofday => time::gettimeofday, [Ptr, Ptr], Int;
    settimeofday => settime::settimeofday, [Ptr, Ptr], Int;
    adjtimex => settime::adjtimex, [Ptr], Int;
    getrlimit => process::getrlimit, [Int, Ptr], Int;
    getrusage => process::getrusage, [Int, Ptr], Int;
    sysinfo => info::sysinfo, [Ptr], Int;
    times => process::times, [Ptr], Int;
    getuid => process::getuid, [], Int;
    getgid => process::getgid, [], Int;
    setuid => process::setuid, [Int], Int;
    setgid => process::setgid, [Int], Int;
    geteuid => process::geteuid, [], Int;
    getegid => process::getegid, [], Int;
    getppid => process::getppid, [], Int;
    getpgrp => process::getpgrp, [], Int;
    setreuid => process::setreuid, [Int, Int], Int;
    setregid => process::setregid, [Int, Int], Int;
    getgroups => process::getgroups, [Int, Ptr], Int;
    setgroups => process::setgroups, [Int, Ptr], Int;
    setresuid => process::setresuid, [Int, Int, Int], Int;
    getresuid => process::getresuid, [Ptr, Ptr, Ptr], Int;
    setresgid => process::setresgid, [Int, Int, Int], Int;
    setfsuid => process::setfsuid, [Int], Int;
    setfsgid => process::setfsgid, [Int], Int;
    getresgid => process::getresgid, [Ptr, Ptr, Ptr], Int;
    getpgid => process::getpgid, [Int], Int;
    capget => process::capget, [Ptr, Ptr], Int;
    capset => process::capset, [Ptr, Ptr], Int;
    add_key => keys::add_key, [Path, Path, Ptr, UInt, Int], Int;
    request_key => keys::request_key, [Path, Path, Path, Int], Int;
    keyctl => keys::keyctl, [Int, Hex, Hex, Hex, Hex], Int;
    rt_sigpending => signal::rt_sigpending, [Ptr, UInt], Int;
    sigaltstack => signal::sigaltstack, [Ptr, Ptr], Int;
    utime => namei::utimes, [Path, Ptr], Int;
    mknod => namei::mknod, [Path, Mode, Hex], Int;
    personality => process::personality, [Hex], Hex;
    ptrace => ptrace::ptrace, [Hex, Int, Ptr, Ptr], Int;
    statfs => fs::statfs, [Path, Ptr], Int;
    fstatfs => fs::fstatfs, [Fd, Ptr], Int;
    getpriority => sched::getpriority, [Int, Int], Int;
    setpriority => sched::setpriority, [Int, Int, Int], Int;
    sched_getparam => sched::sched_getparam, [Int, Ptr], Int;
    sched_getscheduler => sched::sched_getscheduler, [Int], Int;
    sched_get_priority_max => info::sched_get_priority_max, [Int], Int;
    sched_get_priority_min => info::sched_get_priority_min, [Int], Int;
    sched_setattr => sched::sched_setattr, [Int, Ptr, Hex], Int;
    sched_getattr => sched::sched_getattr, [Int, Ptr, UInt, Hex], Int;
    ioprio_set => sched::ioprio_set, [Int, Int, Hex], Int;
    ioprio_get => sched::ioprio_get, [Int, Int], Int;
    mlock => mm::mlock, [Ptr, UInt], Int;
    mlock2 => mm::mlock2, [Ptr, UInt, Hex], Int;
    munlock => mm::munlock, [Ptr, UInt], Int;
    mlockall => mm::mlockall, [Hex], Int;
    munlockall => mm::munlockall, [], Int;
    prctl => process::prctl, [Int, Hex, Hex, Hex, Hex], Int;
    arch_prctl => process::arch_prctl, [Hex, Hex], Int;
    setrlimit => process::setrlimit, [Int, Ptr], Int;
    chroot => fs::chroot, [Path], Int;
    mount => mount::mount, [Path, Path, Path, Hex, Ptr], Int;
    umount2 => mount::umount2, [Path, Hex], Int;
    pivot_root => mount::pivot_root, [Path, Path], Int;
    sethostname => info::sethostname, [InBuf(1), UInt], Int;
    sync => fs::sync, [], Int;
    gettid => process::gettid, [], Int;
    readahead => fs::fd_noop, [Fd, Long, UInt], Int;
    time => time::time, [Ptr], Int;
    futex => futex::futex, [Ptr, Hex, UInt, Ptr, Ptr, UInt], Int;
    sched_setaffinity => info::sched_setaffinity, [Int, UInt, Ptr], Int;
    sched_getaffinity => info::sched_getaffinity, [Int, UInt, Ptr], Int;
    getdents64 => fs::getdents64, [Fd, Ptr, UInt], Int;
    set_tid_address => process::set_tid_address, [Ptr], Int;
    fadvise64 => fs::fd_noop, [Fd, Long, UInt, Int], Int;
    clock_gettime => time::clock_gettime, [Clock, Ptr], Int;
    clock_getres => time::clock_getres, [Clock, Ptr], Int;
    clock_settime => settime::clock_settime, [Clock, Ptr], Int;
    clock_adjtime => settime::clock_adjtime, [Clock, Ptr], Int;
    clock_nanosleep => time::clock_nanosleep, [Clock, Hex, Ptr, Ptr], Int;
    exit_group => process::exit_group, [Int], None;
    tgkill => signal::tgkill, [Int, Int, Signal], Int;
    tkill => signal::tkill, [Int, Signal], Int;
    utimes => namei::utimes, [Path, Ptr], Int;
    openat => fs::openat, [DirFd, Path, OpenFlags, OpenMode(2)], Int;
    mkdirat => namei::mkdirat, [DirFd, Path, Mode], Int;
    mknodat => namei::mknodat, [DirFd, Path, Mode, Hex], Int;
    fchownat => namei::fchownat, [DirFd, Path, Int, Int, AtFlags], Int;
    newfstatat => fs::newfstatat, [DirFd, Path, Ptr, AtFlags], Int;
    unlinkat => namei::unlinkat, [DirFd, Path, AtFlags], Int;
    renameat => namei::renameat, [DirFd, Path, DirFd, Path], Int;
    renameat2 => namei::renameat2, [DirFd, Path, DirFd, Path, Hex], Int;
    linkat => namei::linkat, [DirFd, Path, DirFd, Path, AtFlags], Int;
    symlinkat => namei::symlinkat, [Path, DirFd, Path], Int;
    readlinkat => fs::readlinkat, [DirFd, Path, Ptr, UInt], Int;
    fchmodat => namei::fchmodat, [DirFd, Path, Mode], Int;
    faccessat => fs::faccessat, [DirFd, Path, AccessMode], Int;
    faccessat2 => fs::faccessat2, [DirFd, Path, AccessMode, AtFlags], Int;
    set_robust_list => process::set_robust_list, [Ptr, UInt], Int;
    get_robust_list => process::get_robust_list, [Int, Ptr, Ptr], Int;
    utimensat => namei::utimensat, [DirFd, Path, Ptr, AtFlags], Int;
    fallocate => namei::fallocate, [Fd, Hex, Long, Long], Int;
    memfd_create => fs::memfd_create, [Path, Hex], Int;
    splice => io::splice, [Fd, Ptr, Fd, Ptr, UInt, Hex], Int;
    tee => io::tee, [Fd, Fd, UInt, Hex], Int;
    vmsplice => io::vmsplice, [Fd, Ptr, UInt, Hex], Int;
    sync_file_range => io::sync_file_range, [Fd, Long, Long, Hex], Int;
    fchmodat2 => namei::fchmodat2, [DirFd, Path, Mode, AtFlags], Int;
    dup3 => fs::dup3, [Fd, Fd, OpenFlags], Int;
    preadv => io::preadv, [Fd, Ptr, UInt, Long], Int;
    pwritev => io::pwritev, [Fd, Ptr, UInt, Long], Int;
    prlimit64 => process::prlimit64, [Int, Int, Ptr, Ptr], Int;
    syncfs => fs::fd_noop, [Fd], Int;
    getcpu => info::getcpu, [Ptr, Ptr, Ptr], Int;
    getrandom => info::getrandom, [Ptr, UInt, Hex], Int;
    execve => process::execve, [Path, Argv, Ptr], Int;
    execveat => process::execveat, [DirFd, Path, Argv, Ptr, AtFlags], Int;
    copy_file_range => io::copy_file_range, [Fd, Ptr, Fd, Ptr, UInt, Hex], Int;
    statx => fs::statx, [DirFd, Path, AtFlags, Hex, Ptr], Int;
    rseq => process::rseq, [Ptr, UInt, Hex, Hex], Int;
    close_range => fs::close_range, [Fd, Fd, Hex], Int;
    openat2 => fs::openat2, [DirFd, Path, Ptr, UInt], Int;
    clone => process::clone, [Hex, Ptr, Ptr, Ptr, Hex], Int;
    clone3 => process::clone3, [Ptr, UInt], Int;
    fork => process::fork, [], Int;
    vfork => process::vfork, [], Int;
    wait4 => process::wait4, [Int, Ptr, Hex, Ptr], Int;
    waitid => process::waitid, [Int, Int, Ptr, Hex, Ptr], Int;
    setpgid => process::setpgid, [Int, Int], Int;
    setsid => process::setsid, [], Int;
    getsid => process::getsid, [Int], Int;
    pipe => pipe::pipe, [Ptr], Int;
    pipe2 => pipe::pipe2, [Ptr, OpenFlags], Int;
    epoll_create => epoll::epoll_create, [Int], Int;
    pidfd_open => process::pidfd_open, [Int, Hex], Int;
    pidfd_send_signal => signal::pidfd_send_signal, [Fd, Signal, Ptr, Hex], Int;
    epoll_create1 => epoll::epoll_create1, [Hex], Int;
    inotify_init => notify::inotify_init, [], Int;
    inotify_init1 => notify::inotify_init1, [Hex], Int;
    inotify_add_watch => notify::inotify_add_watch, [Fd, Path, Hex], Int;
    inotify_rm_watch => notify::inotify_rm_watch, [Fd, Int], Int;
    epoll_ctl => epoll::epoll_ctl, [Fd, Int, Fd, Ptr], Int;
    epoll_wait => epoll::epoll_wait, [Fd, Ptr, Int, Int], Int;
    epoll_pwait => epoll::epoll_pwait, [Fd, Ptr, Int, Int, Ptr, UInt], Int;
    epoll_pwait2 => epoll::epoll_pwait2, [Fd, Ptr, Int, Ptr, Ptr, UInt], Int;
    eventfd => epoll::eventfd, [UInt], Int;
    eventfd2 => epoll::eventfd2, [UInt, Hex], Int;
    poll => pipe::poll, [Ptr, UInt, Int], Int;
    ppoll => pipe::ppoll, [Ptr, UInt, Ptr, Ptr, UInt], Int;
    select => pipe::select, [Int, Ptr, Ptr, Ptr, Ptr], Int;
    pselect6 => pipe::pselect6, [Int, Ptr, Ptr, Ptr, Ptr, Ptr], Int;
    rt_sigreturn => signal::rt_sigreturn, [], None;
    rt_sigsuspend => signal::rt_sigsuspend, [Ptr, UInt], Int;
    rt_sigtimedwait => signal::rt_sigtimedwait, [Ptr, Ptr, Ptr, UInt], Int;
    rt_sigqueueinfo => signal::rt_sigqueueinfo, [Int, Signal, Ptr], Int;
    rt_tgsigqueueinfo => signal::rt_tgsigqueueinfo, [Int, Int, Signal, Ptr], Int;
    pause => signal::pause, [], Int;
    alarm => timer::alarm, [UInt], Int;
    getitimer => timer::getitimer, [Int, Ptr], Int;
    setitimer => timer::setitimer, [Int, Ptr, Ptr], Int;
    timer_create => timer::timer_create, [Clock, Ptr, Ptr], Int;
    timer_settime => timer::timer_settime, [Int, Hex, Ptr, Ptr], Int;
    timer_gettime => timer::timer_gettime, [Int, Ptr], Int;
    timer_getoverrun => timer::timer_getoverrun, [Int], Int;
    timer_delete => timer::timer_delete, [Int], Int;
    timerfd_create => timer::timerfd_create, [Clock, Hex], Int;
    timerfd_settime => timer::timerfd_settime, [Fd, Hex, Ptr, Ptr], Int;
    timerfd_gettime => timer::timerfd_gettime, [Fd, Ptr], Int;
    signalfd => signal::signalfd, [Fd, Ptr, UInt], Int;
    signalfd4 => signal::signalfd4, [Fd, Ptr, UInt, Hex], Int;
    restart_syscall => time::restart_syscall, [], Int;
    getxattr => namei::getxattr, [Path, Path, Ptr, UInt], Int;
    lgetxattr => namei::lgetxattr, [Path, Path, Ptr, UInt], Int;
    fgetxattr => namei::fgetxattr, [Fd, Path, Ptr, UInt], Int;
    listxattr => namei::listxattr, [Path, Ptr, UInt], Int;
    llistxattr => namei::llistxattr, [Path, Ptr, UInt], Int;
    flistxattr => namei::flistxattr, [Fd, Ptr, UInt], Int;
    setxattr => namei::setxattr, [Path, Path, Ptr, UInt, Hex], Int;
    lsetxattr => namei::lsetxattr, [Path, Path, Ptr, UInt, Hex], Int;
    fsetxattr => namei::fsetxattr, [Fd, Path, Ptr, UInt, Hex], Int;
    removexattr => namei::removexattr, [Path, Path], Int;
    lremovexattr => namei::lremovexattr, [Path, Path], Int;
    fremovexattr => namei::fremovexattr, [Fd, Path], Int;
    socket => net::socket, [Int, Hex, Int], Int;
    socketpair => net::socketpair, [Int, Hex, Int, Ptr], Int;
    getpeername => net::getpeername, [Fd, Ptr, Ptr], Int;
    getsockname => net::getsockname, [Fd, Ptr, Ptr], Int;
    getsockopt => net::getsockopt, [Fd, Int, Int, Ptr, Ptr], Int;
    setsockopt => net::setsockopt, [Fd, Int, Int, Ptr, UInt], Int;
    shutdown => net::shutdown, [Fd, Int], Int;
    bind => net::bind, [Fd, Ptr, UInt], Int;
    listen => net::listen, [Fd, Int], Int;
    connect => net::connect, [Fd, Ptr, UInt], Int;
    accept => net::accept, [Fd, Ptr, Ptr], Int;
    accept4 => net::accept4, [Fd, Ptr, Ptr, Hex], Int;
    sendto => net::sendto, [Fd, Ptr, UInt, Hex, Ptr, UInt], Int;
    recvfrom => net::recvfrom, [Fd, Ptr, UInt, Hex, Ptr, Ptr], Int;
    sendmsg => net::sendmsg, [Fd, Ptr, Hex], Int;
    recvmsg => net::recvmsg, [Fd, Ptr, Hex], Int;
    sendmmsg => net::sendmmsg, [Fd, Ptr, UInt, Hex], Int;
    recvmmsg => net::recvmmsg, [Fd, Ptr, UInt, Hex, Ptr], Int;
}

static TABLE: LazyLock<Vec<Option<SyscallDef>>> = LazyLock::new(|| {
    let mut t: Vec<Option<SyscallDef>> = Vec::new();
    for (sys, handler, args, ret) in entries() {
        let nr = sys.id() as usize;
        if t.len() <= nr {
            t.resize_with(nr + 1, || None);
        }
        t[nr] = Some(SyscallDef { name: sys.name(), handler, args, ret });
    }
    t
});

/// The definition of system call `nr`, if implemented.
pub fn lookup(nr: u64) -> Option<&'static SyscallDef> {
    TABLE.get(usize::try_from(nr).ok()?).and_then(|d| d.as_ref())
}

/// The name of system call `nr`, implemented or not.
pub fn name(nr: u64) -> String {
    i32::try_from(nr)
        .ok()
        .and_then(|n| Sysno::new(n as usize))
        .map(|s| s.name().to_string())
        .unwrap_or_else(|| format!("syscall_{nr:#x}"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The README's table of system calls: name and status, by name.
    fn readme_table() -> BTreeMap<String, String> {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
        let section = readme.split("\n## System calls\n").nth(1).expect("README has a System calls section");
        let section = section.split("\n## ").next().unwrap();
        let mut rows = BTreeMap::new();
        for line in section.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells[1].trim_matches('`').to_string();
            assert!(rows.insert(name.clone(), cells[2].to_string()).is_none(), "{name} has two rows");
        }
        rows
    }

    /// The README says of every system call the sentry dispatches whether
    /// it is served in full, partly or refused; what it says is served is
    /// dispatched, and what it says is missing is not.
    #[test]
    fn readme_table_matches_the_dispatch_table() {
        let rows = readme_table();
        let dispatched: Vec<&str> = entries().iter().map(|(sys, ..)| sys.name()).collect();
        for name in &dispatched {
            match rows.get(*name).map(String::as_str) {
                Some("yes" | "partly" | "refused") => {}
                other => panic!("{name} is dispatched, but the README's table says {other:?}"),
            }
        }
        for (name, status) in &rows {
            assert!(name.parse::<Sysno>().is_ok(), "{name} is no x86_64 system call");
            let served = dispatched.contains(&name.as_str());
            match status.as_str() {
                "yes" | "partly" => {
                    assert!(served, "the README says {name} is served ({status}), but it is not dispatched")
                }
                "no" => assert!(!served, "the README says {name} is missing, but it is dispatched"),
                "refused" => {}
                other => panic!("{name}: unknown status {other:?} (yes, partly, refused or no)"),
            }
        }
    }
}
