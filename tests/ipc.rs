//! System V IPC: semaphores, message queues and shared memory, each a C
//! program run natively and in the sandbox with the same output; the
//! PostgreSQL pattern across four processes; `ipcs` reading the sandbox's
//! objects through /proc/sysvipc and /proc/sys/kernel; POSIX message
//! queues; and process_vm_readv/writev between processes.

mod common;

use common::{VARIANTS, c_program, c_test, finish_within, native, spawn_cordon};

#[test]
fn semaphores() {
    require_kvm!();
    c_test("sysv_sem", &[]);
}

#[test]
fn message_queues() {
    require_kvm!();
    c_test("sysv_msg", &[]);
}

#[test]
fn shared_memory() {
    require_kvm!();
    c_test("sysv_shm", &[]);
}

#[test]
fn postgres_style_semaphore_and_shared_memory() {
    require_kvm!();
    c_test("sysv_postgres", &[]);
}

#[test]
fn posix_message_queues() {
    require_kvm!();
    c_test("posix_mq", &[]);
}

#[test]
fn process_vm_readv_and_writev() {
    require_kvm!();
    c_test("process_vm", &[]);
}

/// The lines of `ipcs` output with single spaces between columns, and the
/// rows of the objects sysv_ipcs made with their ids (which differ between
/// runs) replaced by what they are; rows of other objects are left out and
/// counted in the second value. The first line of `out` is the program's
/// `ids SEM MSG SHM REMOVED`.
fn ipcs_rows(out: &str, base: u32) -> (String, usize) {
    let mut lines = out.lines();
    let ids: Vec<String> = lines.next().expect("ids line").split_whitespace().skip(1).map(str::to_string).collect();
    assert_eq!(ids.len(), 4, "ids line of {out}");
    let key = |i: u32| format!("0x{:08x}", base + i);
    let mut section = "";
    let mut rows = String::new();
    // A section's rows come in id order, which differs between runs: they
    // are compared sorted.
    let mut pending: Vec<String> = Vec::new();
    let mut others = 0;
    for line in lines {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if line.starts_with("------ ") {
            section = line;
        }
        if !line.starts_with("0x") {
            pending.sort();
            for r in pending.drain(..) {
                rows.push_str(&r);
                rows.push('\n');
            }
            rows.push_str(&cols.join(" "));
            rows.push('\n');
            continue;
        }
        // Each kind has ids of its own: a row is ours if its section,
        // key and id all say so.
        let ours: &[(&str, usize, String)] = &[
            ("Semaphore", 0, key(1)),
            ("Message", 1, key(2)),
            ("Shared", 2, key(3)),
            ("Shared", 3, "0x00000000".to_string()),
        ];
        let names = ["SEM", "MSG", "SHM", "REMOVED"];
        match ours.iter().find(|(s, i, k)| section.contains(s) && cols[1] == ids[*i] && cols[0] == k) {
            Some((_, i, _)) => {
                let mut c = cols.clone();
                c[1] = names[*i];
                pending.push(c.join(" "));
            }
            None => others += 1,
        }
    }
    pending.sort();
    for r in pending {
        rows.push_str(&r);
        rows.push('\n');
    }
    (rows, others)
}

#[test]
fn ipcs_shows_the_sandbox_objects() {
    require_kvm!();
    for (n, v) in VARIANTS.iter().enumerate() {
        // Keys of this test's own, apart for each variant.
        let base = 0x51c0_0000 + 0x100 * n as u32;
        let key = format!("{base:#x}");
        let prog = c_program("sysv_ipcs", v);
        let p = prog.to_str().expect("utf-8 path");
        for args in [&["ipcs"][..], &["ipcs", "-q"], &["ipcs", "-m"], &["ipcs", "-s"], &["ipcs", "-l"]] {
            let what = format!("sysv_ipcs-{v} {}", args.join(" "));
            let all: Vec<&str> = [&[key.as_str()][..], args].concat();
            let nat = native(p, &all, None);
            assert!(nat.status.success(), "{what} fails natively:\n{}", String::from_utf8_lossy(&nat.stderr));
            let sb =
                finish_within(spawn_cordon(&[&[p][..], &all].concat()), std::time::Duration::from_secs(120), &what);
            assert!(
                sb.status.success(),
                "{what} fails in the sandbox:\n{}{}",
                String::from_utf8_lossy(&sb.stdout),
                String::from_utf8_lossy(&sb.stderr)
            );
            let (nat_rows, _) = ipcs_rows(&String::from_utf8_lossy(&nat.stdout), base);
            let (sb_rows, sb_others) = ipcs_rows(&String::from_utf8_lossy(&sb.stdout), base);
            assert_eq!(sb_others, 0, "{what}: rows of objects the sandbox does not have");
            assert_eq!(sb_rows, nat_rows, "{what}: sandbox and native differ");
        }
        // The summary counts everything in the namespace: only the
        // sandbox's is known exactly.
        let all = [p, &key, "ipcs", "-u"];
        let sb = finish_within(spawn_cordon(&all), std::time::Duration::from_secs(120), "ipcs -u");
        let text = String::from_utf8_lossy(&sb.stdout);
        for expected in [
            "allocated queues = 1\n",
            "used headers = 2\n",
            "used space = 8 bytes\n",
            "segments allocated 2\n",
            "pages allocated 5\n",
            "used arrays = 1\n",
            "allocated semaphores = 3\n",
        ] {
            assert!(text.contains(expected), "ipcs -u in the sandbox lacks {expected:?}:\n{text}");
        }
    }
}

/// Makes POSIX queues of the default size until one fails: Linux charges
/// each to its user's RLIMIT_MSGQUEUE until its last name and descriptor
/// are gone.
const QUEUE_LIMIT_SCRIPT: &str = r#"
import ctypes, os
rt = ctypes.CDLL('librt.so.1', use_errno=True)
def make(name):
    fd = rt.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, None)
    return fd if fd >= 0 else os.strerror(ctypes.get_errno())
fds = []
while True:
    fd = make(b'/cordon-q%d' % len(fds))
    if isinstance(fd, str):
        print(len(fds), 'made, then:', fd)
        break
    fds.append(fd)
rt.mq_unlink(b'/cordon-q0')
print('unlinked but open:', make(b'/cordon-again'))
os.close(fds[0])
print('closed too:', isinstance(make(b'/cordon-again'), int))
for i in range(1, len(fds)):
    rt.mq_unlink(b'/cordon-q%d' % i)
rt.mq_unlink(b'/cordon-again')
"#;

#[test]
fn posix_queues_are_charged_to_rlimit_msgqueue() {
    require_kvm!();
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipping: the native run needs root for an IPC namespace of its own");
        return;
    }
    let n = native("unshare", &["--ipc", "python3", "-c", QUEUE_LIMIT_SCRIPT], None);
    assert_eq!(
        String::from_utf8_lossy(&n.stdout),
        "9 made, then: Too many open files\nunlinked but open: Too many open files\nclosed too: True\n",
        "natively: {n:?}"
    );
    let s = common::sandbox(&[], "python3", &["-c", QUEUE_LIMIT_SCRIPT], None);
    common::assert_same("RLIMIT_MSGQUEUE", &s, &n);
}
