//! `--strace`: one line per system call, in strace's form:
//! `[tid] openat(AT_FDCWD, "/etc/passwd", O_RDONLY|O_CLOEXEC) = 3`.

use std::fmt::Write as _;

use linux_raw_sys::general as g;

use super::table::{self, SyscallDef};
use super::{SysError, SysResult};
use crate::task::Task;

/// Longest string shown before "..." (strace's default -s 32).
const STRING_MAX: usize = 32;

/// How to show an argument.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    /// A C int.
    Int,
    /// A 64-bit signed value (offsets, lengths).
    Long,
    UInt,
    Hex,
    Ptr,
    Fd,
    DirFd,
    Path,
    /// Data the call reads; its length is argument `n`.
    InBuf(usize),
    /// Data the call fills; its length is the return value.
    OutBuf,
    /// A NULL-terminated array of strings.
    Argv,
    OpenFlags,
    Mode,
    /// The mode of an open: shown only if the flags (argument `n`) create.
    OpenMode(usize),
    AtFlags,
    AccessMode,
    Whence,
    Prot,
    MapFlags,
    Signal,
    SigHow,
    Clock,
    FcntlCmd,
}

/// How to show the result.
#[derive(Clone, Copy, Debug)]
pub enum Ret {
    Int,
    Hex,
    /// The call does not return (exit).
    None,
}

/// A line begun at system call entry.
pub struct Pending {
    name: String,
    args: Vec<Option<String>>,
}

pub fn quote(bytes: &[u8], max: usize) -> String {
    let mut s = String::from("\"");
    for (i, &b) in bytes.iter().take(max).enumerate() {
        match b {
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\r' => s.push_str("\\r"),
            0x0b => s.push_str("\\v"),
            0x0c => s.push_str("\\f"),
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let next_is_digit = bytes.get(i + 1).is_some_and(|n| (b'0'..=b'7').contains(n));
                if next_is_digit {
                    let _ = write!(s, "\\{b:03o}");
                } else {
                    let _ = write!(s, "\\{b:o}");
                }
            }
        }
    }
    s.push('"');
    if bytes.len() > max {
        s.push_str("...");
    }
    s
}

/// `A|B|0x..` for the bits of `v` named in `names`.
fn flags(v: u64, names: &[(&str, u64)], zero: &str) -> String {
    let mut parts = Vec::new();
    let mut rest = v;
    for (n, bit) in names {
        if *bit != 0 && rest & bit == *bit {
            parts.push(n.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 || parts.is_empty() {
        if parts.is_empty() && rest == 0 {
            return zero.to_string();
        }
        parts.push(format!("{rest:#x}"));
    }
    parts.join("|")
}

macro_rules! names {
    ($m:ident; $($n:ident),* $(,)?) => { &[$((stringify!($n), $m::$n as u64)),*] };
}

fn open_flags(v: u64) -> String {
    let mode = match v as u32 & g::O_ACCMODE {
        g::O_WRONLY => "O_WRONLY",
        g::O_RDWR => "O_RDWR",
        _ => "O_RDONLY",
    };
    let rest = v & !(g::O_ACCMODE as u64);
    let others: &[(&str, u64)] = names!(g; O_CREAT, O_EXCL, O_NOCTTY, O_TRUNC, O_APPEND, O_NONBLOCK, O_DSYNC,
        O_DIRECT, O_LARGEFILE, O_DIRECTORY, O_NOFOLLOW, O_NOATIME, O_CLOEXEC, O_PATH);
    let mut s = mode.to_string();
    if rest != 0 {
        let _ = write!(s, "|{}", flags(rest, others, "0"));
    }
    s
}

pub fn signal_name(sig: u64) -> String {
    let names: &[(&str, u64)] = names!(g; SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE,
        SIGKILL, SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGSTKFLT, SIGCHLD, SIGCONT, SIGSTOP,
        SIGTSTP, SIGTTIN, SIGTTOU, SIGURG, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGWINCH, SIGIO, SIGPWR, SIGSYS);
    match names.iter().find(|(_, v)| *v == sig) {
        Some((n, _)) => n.to_string(),
        None if (32..=64).contains(&sig) => format!("SIGRT_{}", sig - 32),
        None => sig.to_string(),
    }
}

fn read_string(task: &Task, addr: u64, max: usize) -> String {
    if addr == 0 {
        return "NULL".into();
    }
    match task.mm.read_cstring(addr, 4096) {
        Ok(s) => quote(&s, max),
        Err(_) => format!("{addr:#x}"),
    }
}

fn read_buf(task: &Task, addr: u64, len: u64) -> String {
    let n = (len as usize).min(STRING_MAX);
    let mut b = vec![0u8; n];
    match task.mm.copy_in(addr, &mut b) {
        Ok(()) => {
            let mut s = quote(&b, n);
            if len as usize > n {
                s.push_str("...");
            }
            s
        }
        Err(_) => format!("{addr:#x}"),
    }
}

fn format_arg(task: &Task, kind: Arg, v: u64, args: &[u64; 6]) -> Option<String> {
    Some(match kind {
        Arg::Int | Arg::Fd => (v as i32).to_string(),
        Arg::Long => (v as i64).to_string(),
        Arg::UInt => v.to_string(),
        Arg::Hex => format!("{v:#x}"),
        Arg::Ptr => {
            if v == 0 {
                "NULL".into()
            } else {
                format!("{v:#x}")
            }
        }
        Arg::DirFd => {
            if v as i32 == g::AT_FDCWD {
                "AT_FDCWD".into()
            } else {
                (v as i32).to_string()
            }
        }
        Arg::Path => read_string(task, v, 4096),
        Arg::InBuf(n) => read_buf(task, v, args[n]),
        Arg::OutBuf => return None,
        Arg::Argv => {
            if v == 0 {
                return Some("NULL".into());
            }
            let mut items = Vec::new();
            for i in 0..32 {
                match task.mm.read_pod::<u64>(v + 8 * i) {
                    Ok(0) => break,
                    Ok(p) => items.push(read_string(task, p, STRING_MAX)),
                    Err(_) => return Some(format!("{v:#x}")),
                }
            }
            format!("[{}]", items.join(", "))
        }
        Arg::OpenFlags => open_flags(v),
        Arg::Mode => mode(v),
        Arg::OpenMode(n) => {
            if args[n] as u32 & (g::O_CREAT | g::__O_TMPFILE) == 0 {
                return Some(String::new());
            }
            mode(v)
        }
        Arg::AtFlags => flags(
            v,
            names!(g; AT_SYMLINK_NOFOLLOW, AT_REMOVEDIR, AT_SYMLINK_FOLLOW, AT_NO_AUTOMOUNT,
            AT_EMPTY_PATH, AT_EACCESS),
            "0",
        ),
        Arg::AccessMode => flags(v, names!(g; R_OK, W_OK, X_OK), "F_OK"),
        Arg::Whence => match v as u32 {
            g::SEEK_SET => "SEEK_SET".into(),
            g::SEEK_CUR => "SEEK_CUR".into(),
            g::SEEK_END => "SEEK_END".into(),
            g::SEEK_DATA => "SEEK_DATA".into(),
            g::SEEK_HOLE => "SEEK_HOLE".into(),
            _ => v.to_string(),
        },
        Arg::Prot => flags(v, names!(g; PROT_READ, PROT_WRITE, PROT_EXEC), "PROT_NONE"),
        Arg::MapFlags => {
            let kind = match v as u32 & g::MAP_TYPE {
                g::MAP_SHARED => "MAP_SHARED",
                g::MAP_PRIVATE => "MAP_PRIVATE",
                g::MAP_SHARED_VALIDATE => "MAP_SHARED_VALIDATE",
                _ => "0",
            };
            let rest = v & !(g::MAP_TYPE as u64);
            if rest == 0 {
                kind.into()
            } else {
                format!(
                    "{kind}|{}",
                    flags(
                        rest,
                        names!(g; MAP_FIXED, MAP_ANONYMOUS, MAP_GROWSDOWN, MAP_DENYWRITE, MAP_NORESERVE,
                        MAP_POPULATE, MAP_STACK, MAP_FIXED_NOREPLACE),
                        "0"
                    )
                )
            }
        }
        Arg::Signal => signal_name(v),
        Arg::SigHow => match v as u32 {
            g::SIG_BLOCK => "SIG_BLOCK".into(),
            g::SIG_UNBLOCK => "SIG_UNBLOCK".into(),
            g::SIG_SETMASK => "SIG_SETMASK".into(),
            _ => v.to_string(),
        },
        Arg::Clock => match v as u32 {
            g::CLOCK_REALTIME => "CLOCK_REALTIME".into(),
            g::CLOCK_MONOTONIC => "CLOCK_MONOTONIC".into(),
            g::CLOCK_PROCESS_CPUTIME_ID => "CLOCK_PROCESS_CPUTIME_ID".into(),
            g::CLOCK_THREAD_CPUTIME_ID => "CLOCK_THREAD_CPUTIME_ID".into(),
            g::CLOCK_MONOTONIC_RAW => "CLOCK_MONOTONIC_RAW".into(),
            g::CLOCK_BOOTTIME => "CLOCK_BOOTTIME".into(),
            _ => v.to_string(),
        },
        Arg::FcntlCmd => match v as u32 {
            g::F_DUPFD => "F_DUPFD".into(),
            g::F_GETFD => "F_GETFD".into(),
            g::F_SETFD => "F_SETFD".into(),
            g::F_GETFL => "F_GETFL".into(),
            g::F_SETFL => "F_SETFL".into(),
            g::F_GETLK => "F_GETLK".into(),
            g::F_SETLK => "F_SETLK".into(),
            g::F_SETLKW => "F_SETLKW".into(),
            g::F_DUPFD_CLOEXEC => "F_DUPFD_CLOEXEC".into(),
            _ => v.to_string(),
        },
    })
}

fn mode(v: u64) -> String {
    if v == 0 { "000".into() } else { format!("0{v:o}") }
}

/// Formats the arguments a call reads, at entry.
pub fn enter(task: &Task, nr: u64, def: Option<&SyscallDef>, args: &[u64; 6]) -> Pending {
    match def {
        Some(d) => Pending {
            name: d.name.to_string(),
            args: d.args.iter().enumerate().map(|(i, k)| format_arg(task, *k, args[i], args)).collect(),
        },
        None => Pending { name: table::name(nr), args: args.iter().map(|a| Some(format!("{a:#x}"))).collect() },
    }
}

/// Completes and prints the line at exit.
pub fn exit(task: &Task, p: Pending, def: Option<&SyscallDef>, args: &[u64; 6], result: SysResult) {
    let mut line = format!("[{}] {}(", task.tid(), p.name);
    let mut first = true;
    for (i, a) in p.args.iter().enumerate() {
        if a.as_deref() == Some("") {
            continue;
        }
        if !first {
            line.push_str(", ");
        }
        first = false;
        match a {
            Some(s) => line.push_str(s),
            None => match result {
                Ok(n) if (n as i64) >= 0 => line.push_str(&read_buf(task, args[i], n)),
                _ => {
                    let _ = write!(line, "{:#x}", args[i]);
                }
            },
        }
    }
    line.push_str(") = ");
    let ret = def.map(|d| d.ret).unwrap_or(Ret::Int);
    match (result, ret) {
        (Err(SysError::Errno(e)), _) => {
            let _ = write!(line, "-1 {} ({})", e.name(), e.description());
        }
        (Err(SysError::JustReturn), _) | (_, Ret::None) => line.push('?'),
        (Ok(v), Ret::Hex) => {
            let _ = write!(line, "{v:#x}");
        }
        (Ok(v), Ret::Int) => {
            let _ = write!(line, "{}", v as i64);
        }
    }
    line.push('\n');
    crate::diag::text(&line);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_like_strace() {
        assert_eq!(quote(b"a\"b\\c\n", 32), r#""a\"b\\c\n""#);
        assert_eq!(quote(b"\x00x", 32), r#""\0x""#);
        assert_eq!(quote(b"\x001", 32), r#""\0001""#);
        assert_eq!(quote(b"abcdef", 3), r#""abc"..."#);
    }

    #[test]
    fn flags_are_named() {
        assert_eq!(open_flags((g::O_RDONLY | g::O_CLOEXEC) as u64), "O_RDONLY|O_CLOEXEC");
        assert_eq!(open_flags((g::O_WRONLY | g::O_CREAT | g::O_TRUNC) as u64), "O_WRONLY|O_CREAT|O_TRUNC");
        assert_eq!(flags(0, &[("A", 1)], "NONE"), "NONE");
        assert_eq!(flags(0x11, &[("A", 1)], "0"), "A|0x10");
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(mode(0o644), "0644");
    }
}
