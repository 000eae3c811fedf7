//! The sentry's seccomp allow-list: the host system calls it makes, and
//! nothing else. Any other call kills the whole sentry
//! (`SECCOMP_RET_KILL_PROCESS`), so a violation is a visible failure, never
//! a silently changed result; cordon's monitor reports it as an internal
//! error.
//!
//! The list comes from reading the sentry's code and from running every
//! test under a filter that only logged (`SECCOMP_RET_LOG`). It has to
//! cover what the sentry does lazily: opening host files (any type, by
//! `openat2` under the served root and reopening through `/proc/self/fd`),
//! reading `/proc/self/*` for `--profile`, making vCPUs and host threads as
//! tasks appear, kicking them with signals, terminal ioctls on stdio.
//!
//! Arguments are checked where that is cheap and means something:
//! - `ioctl`: only the requests of the platform (KVM) and the terminal
//!   requests the sentry answers from its host descriptors.
//! - `clone`: threads only (`CLONE_THREAD`); `clone3`, whose flags sit in
//!   memory a filter cannot read, fails with ENOSYS, on which the C
//!   library falls back to `clone`.
//! - `tgkill`: signals to the sentry's own threads, and the trap
//!   platform's interrupt signal to its stub threads.
//! - `mmap`, `mprotect`: never executable memory (the sentry maps code only
//!   while it starts; application code runs in the guest).
//! - `prctl`: naming a thread only.
//! - `prlimit64`: reading limits only.
//! - `membarrier`: MEMBARRIER_CMD_QUERY and MEMBARRIER_CMD_GLOBAL only
//!   (the barrier the sandbox's own membarrier waits for).
//!
//! The calls that change host files ([`HOST_FILE_CHANGES`]) are allowed
//! only to a sentry serving a writable bind mount (`-v` without `:ro`).
//!
//! Sockets, by what the sentry does on the host's network
//! ([`HostNetwork`]):
//! - `--network=none` (the default), no port published: no socket call
//!   at all.
//! - ports published (`-p`): the calls on sockets it already holds (the
//!   listeners, made before the filter, and what they accept): `accept4`,
//!   sending, receiving, `shutdown`, the names, and `setsockopt` for
//!   `SO_LINGER` only (a connection nothing takes inside is reset).
//!   `socket` stays forbidden.
//! - `--network=host`: besides, `socket` for `AF_INET` and `AF_INET6`
//!   TCP and UDP only (non-blocking, close-on-exec, by argument),
//!   `bind`, `listen`, `connect`, `getsockopt` and `setsockopt` at the
//!   levels the sentry passes on (`SOL_SOCKET`, `IPPROTO_TCP`,
//!   `IPPROTO_IP`, `IPPROTO_IPV6`; the options themselves are vetted by
//!   `net::hostinet`), the interface and queue ioctls it passes on, and
//!   the epoll calls of the thread that watches host sockets; and a
//!   `NETLINK_ROUTE` socket (with its `SOL_NETLINK` flags) to ask the
//!   host's interfaces, sent only requests that read them.
//!
//! Never allowed, among everything else: `execve`, `fork`, `ptrace`,
//! `mount` and the rest of the mount API, `unshare`, `setns`, `kill` (of
//! other processes), sockets of any other family or type, `socketpair`,
//! `bpf`, `perf_event_open`, `process_vm_*`,
//! and `open_by_handle_at`/`name_to_handle_at`, which with the
//! CAP_DAC_READ_SEARCH a root-started sentry keeps would open any file of
//! a file system by its handle, past every root.

use std::collections::BTreeMap;

use linux_raw_sys::ioctl as io;

use super::HostNetwork;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

/// Host system calls allowed with any arguments.
const ALLOWED: &[libc::c_long] = &[
    // Descriptors and files (host files are opened under the served root
    // and reopened through /proc/self/fd).
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_lseek,
    libc::SYS_close,
    libc::SYS_dup,
    libc::SYS_fcntl,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_fstatfs,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_readlinkat,
    libc::SYS_getdents64,
    // Extended attributes, asked through /proc/self/fd links.
    libc::SYS_getxattr,
    libc::SYS_listxattr,
    // A panic's backtrace (RUST_BACKTRACE) names files relative to it.
    libc::SYS_getcwd,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    // The memory file.
    libc::SYS_memfd_create,
    libc::SYS_ftruncate,
    libc::SYS_fallocate,
    // The sentry's own memory.
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_brk,
    // Waiting and waking.
    libc::SYS_futex,
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_eventfd2,
    libc::SYS_signalfd4,
    libc::SYS_pipe2,
    libc::SYS_sched_yield,
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    // Time.
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_gettimeofday,
    // Signals of its own (kicks, the forwarded set, fault handling).
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_sigaltstack,
    libc::SYS_restart_syscall,
    // Threads.
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
    libc::SYS_sched_getaffinity,
    libc::SYS_getcpu,
    libc::SYS_exit,
    libc::SYS_exit_group,
    // Facts about the host it reports or sizes things by.
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getgroups,
    libc::SYS_capget,
    libc::SYS_uname,
    libc::SYS_sysinfo,
    libc::SYS_getrusage,
    libc::SYS_getrandom,
];

/// Host system calls that change host files, made for a writable bind
/// mount's files only (see `fs::host`). Writing and truncating files the
/// sentry opened (`pwrite64`, `pwritev`, `ftruncate`, `fallocate`,
/// `fsync`) are in [`ALLOWED`] already: the memory file needs them too.
const HOST_FILE_CHANGES: &[libc::c_long] = &[
    libc::SYS_mkdirat,
    libc::SYS_mknodat,
    libc::SYS_symlinkat,
    libc::SYS_linkat,
    libc::SYS_unlinkat,
    libc::SYS_renameat2,
    libc::SYS_fchmodat,
    libc::SYS_fchownat,
    libc::SYS_utimensat,
    libc::SYS_setxattr,
    libc::SYS_removexattr,
    // Appending (RWF_APPEND).
    libc::SYS_pwritev2,
];

/// Terminal requests the sentry makes on the host's stdio descriptors:
/// answers to the application's TCGETS, TIOCGWINSZ and FIONREAD, the
/// caller's window size followed under `-t`, raw mode for `-it`, and the
/// terminal settings put back when the run ends or cordon fails.
const TERMINAL_IOCTLS: &[u64] = &[libc::TCGETS, libc::TCSETS, libc::TIOCGWINSZ, libc::FIONREAD];

/// Calls on host sockets the sentry holds: a published port's listener
/// and its connections, or the sandbox's sockets with `--network=host`.
const HOST_SOCKET_CALLS: &[libc::c_long] = &[
    libc::SYS_accept4,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_shutdown,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
];

/// Calls on the control socket's connections (`sentry::control`): its
/// listener was made before the filter; requests bring descriptors.
const CONTROL_SOCKET_CALLS: &[libc::c_long] = &[libc::SYS_accept4, libc::SYS_sendmsg, libc::SYS_recvmsg];

/// Calls a sentry on the host's network makes besides: its own sockets,
/// and the epoll of the thread that watches them.
const HOST_NETWORK_CALLS: &[libc::c_long] = &[
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_connect,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
];

/// Socket requests passed to the host with `--network=host`: the queues
/// (FIONREAD is among the terminal requests), the urgent mark and the
/// interfaces.
const HOST_SOCKET_IOCTLS: &[u32] = &[
    io::TIOCOUTQ,
    io::SIOCATMARK,
    io::SIOCGIFCONF,
    io::SIOCGIFNAME,
    io::SIOCGIFINDEX,
    io::SIOCGIFFLAGS,
    io::SIOCGIFADDR,
    io::SIOCGIFDSTADDR,
    io::SIOCGIFBRDADDR,
    io::SIOCGIFNETMASK,
    io::SIOCGIFMETRIC,
    io::SIOCGIFMTU,
    io::SIOCGIFHWADDR,
    io::SIOCGIFTXQLEN,
];

/// The level of netlink's socket options.
const SOL_NETLINK: u64 = 270;

fn rule(conditions: Vec<SeccompCondition>) -> SeccompRule {
    SeccompRule::new(conditions).expect("a rule with conditions")
}

fn arg(index: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(index, len, op, value).expect("a valid condition")
}

/// The allow-list for a sentry whose process id (as it sees it) is
/// `own_pid`, that changes host files if `host_writes`, and does
/// `network` on the host's network.
fn allow_list(
    own_pid: i32,
    host_writes: bool,
    network: HostNetwork,
    control_socket: bool,
) -> BTreeMap<i64, Vec<SeccompRule>> {
    use SeccompCmpArgLen::{Dword, Qword};
    let changes = if host_writes { HOST_FILE_CHANGES } else { &[] };
    let (sockets, own_sockets, socket_ioctls) = match network {
        HostNetwork::None => (&[][..], &[][..], &[][..]),
        HostNetwork::Published => (HOST_SOCKET_CALLS, &[][..], &[][..]),
        HostNetwork::Host => (HOST_SOCKET_CALLS, HOST_NETWORK_CALLS, HOST_SOCKET_IOCTLS),
    };
    let control = if control_socket { CONTROL_SOCKET_CALLS } else { &[] };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = ALLOWED
        .iter()
        .chain(changes)
        .chain(sockets)
        .chain(own_sockets)
        .chain(control)
        .map(|nr| (*nr, Vec::new()))
        .collect();
    match network {
        HostNetwork::None => {}
        HostNetwork::Published => {
            let linger = vec![
                arg(1, Dword, SeccompCmpOp::Eq, libc::SOL_SOCKET as u64),
                arg(2, Dword, SeccompCmpOp::Eq, libc::SO_LINGER as u64),
            ];
            rules.insert(libc::SYS_setsockopt, vec![rule(linger)]);
        }
        HostNetwork::Host => {
            let flags = (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u64;
            let mut socket = Vec::new();
            for family in [libc::AF_INET, libc::AF_INET6] {
                for (kind, protocol) in [(libc::SOCK_STREAM, libc::IPPROTO_TCP), (libc::SOCK_DGRAM, libc::IPPROTO_UDP)]
                {
                    socket.push(rule(vec![
                        arg(0, Dword, SeccompCmpOp::Eq, family as u64),
                        arg(1, Dword, SeccompCmpOp::Eq, kind as u64 | flags),
                        arg(2, Dword, SeccompCmpOp::Eq, protocol as u64),
                    ]));
                }
            }
            // The route netlink socket that asks the host's interfaces for
            // the application (net::hostinet::host_route_request, which
            // sends it only requests that read).
            socket.push(rule(vec![
                arg(0, Dword, SeccompCmpOp::Eq, libc::AF_NETLINK as u64),
                arg(1, Dword, SeccompCmpOp::Eq, libc::SOCK_RAW as u64 | flags),
                arg(2, Dword, SeccompCmpOp::Eq, libc::NETLINK_ROUTE as u64),
            ]));
            rules.insert(libc::SYS_socket, socket);
            let levels = || {
                [libc::SOL_SOCKET, libc::IPPROTO_TCP, libc::IPPROTO_IP, libc::IPPROTO_IPV6]
                    .into_iter()
                    .map(|level| rule(vec![arg(1, Dword, SeccompCmpOp::Eq, level as u64)]))
                    .collect::<Vec<_>>()
            };
            rules.insert(libc::SYS_getsockopt, levels());
            let mut set = levels();
            // The route netlink socket's flags, as the application's.
            set.push(rule(vec![arg(1, Dword, SeccompCmpOp::Eq, SOL_NETLINK)]));
            rules.insert(libc::SYS_setsockopt, set);
        }
    }
    // The kernel takes an ioctl's request as 32 bits.
    let ioctls = platform::kvm::host_ioctls()
        .into_iter()
        .chain(TERMINAL_IOCTLS.iter().copied())
        .chain(socket_ioctls.iter().map(|r| u64::from(*r)));
    rules.insert(libc::SYS_ioctl, ioctls.map(|req| rule(vec![arg(1, Dword, SeccompCmpOp::Eq, req)])).collect());
    let thread = libc::CLONE_THREAD as u64;
    rules.insert(libc::SYS_clone, vec![rule(vec![arg(0, Qword, SeccompCmpOp::MaskedEq(thread), thread)])]);
    // Let through here; the second filter makes it ENOSYS.
    rules.insert(libc::SYS_clone3, Vec::new());
    rules.insert(
        libc::SYS_tgkill,
        vec![
            rule(vec![arg(0, Dword, SeccompCmpOp::Eq, own_pid as u64)]),
            // The trap platform interrupts application code in its stub
            // processes with this signal, which they handle.
            rule(vec![arg(2, Dword, SeccompCmpOp::Eq, platform::trap::KICK_SIGNAL as u64)]),
        ],
    );
    let exec = libc::PROT_EXEC as u64;
    let no_exec = || vec![rule(vec![arg(2, Qword, SeccompCmpOp::MaskedEq(exec), 0)])];
    rules.insert(libc::SYS_mmap, no_exec());
    rules.insert(libc::SYS_mprotect, no_exec());
    rules.insert(
        libc::SYS_prctl,
        [libc::PR_SET_NAME, libc::PR_GET_NAME]
            .into_iter()
            .map(|op| rule(vec![arg(0, Dword, SeccompCmpOp::Eq, op as u64)]))
            .collect(),
    );
    rules.insert(libc::SYS_prlimit64, vec![rule(vec![arg(2, Qword, SeccompCmpOp::Eq, 0)])]);
    rules.insert(
        libc::SYS_membarrier,
        [libc::MEMBARRIER_CMD_QUERY, libc::MEMBARRIER_CMD_GLOBAL]
            .into_iter()
            .map(|cmd| rule(vec![arg(0, Dword, SeccompCmpOp::Eq, cmd as u64), arg(1, Dword, SeccompCmpOp::Eq, 0)]))
            .collect(),
    );
    rules
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, mismatch: SeccompAction, matched: SeccompAction) -> BpfProgram {
    let arch = std::env::consts::ARCH.try_into().expect("an architecture seccompiler knows");
    SeccompFilter::new(rules, mismatch, matched, arch)
        .and_then(BpfProgram::try_from)
        .expect("the sentry's filter compiles")
}

/// Installs the filters on every thread of the sentry; `host_writes`: it
/// serves a writable bind mount; `network`: what it does on the host's
/// network; `control_socket`: it serves one. Needs PR_SET_NO_NEW_PRIVS (or
/// CAP_SYS_ADMIN).
pub fn install(host_writes: bool, network: HostNetwork, control_socket: bool) -> std::io::Result<()> {
    let own_pid = rustix::process::getpid().as_raw_nonzero().get();
    let rules = allow_list(own_pid, host_writes, network, control_socket);
    let allow = compile(rules, SeccompAction::KillProcess, SeccompAction::Allow);
    let clone3 = compile(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
    );
    for program in [clone3, allow] {
        seccompiler::apply_filter_all_threads(&program).map_err(|e| std::io::Error::other(e.to_string()))?;
    }
    Ok(())
}
