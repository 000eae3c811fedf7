//! The C programs of the processes issue (tests/c), each run natively and
//! in the sandbox in every executable variant: both must pass with the
//! same output, so every expectation is Linux's own.

mod common;

macro_rules! c_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                require_kvm!();
                common::c_test(stringify!($name), &[]);
            }
        )*
    };
}

c_tests! {
    fork_cow,
    fork_threads,
    signal_fault_race,
    futex_mutex,
    pthread_sync,
    sig_eintr,
    sig_faults,
    wait_status,
    thread_exit,
    exec_threads,
    fpu_signal,
    sig_mask,
    pgrp,
    pipes,
    poll_select,
    epoll,
    pidfd,
    timers,
    prctl_orphans,
    sig_edges,
    sched_affinity,
    exit_signals,
    spin_signals,
    many_processes,
    fast_ids,
    fast_affinity,
    spin_interrupt,
    rewrite_sites,
}

/// SIGBUS past the end of a file mapping, wherever the fault falls.
#[test]
fn sig_bus() {
    require_kvm!();
    common::c_test("sig_bus", &[]);
}

/// 10,000 threads that each block in a futex, then all finish. Sleeping
/// threads hold no vCPU: with `--cpus 2` the sandbox creates at most two,
/// and ten thousand threads exceed what one vCPU each would allow.
#[test]
fn many_threads() {
    require_kvm!();
    let prog = common::c_program("many_threads", "dynamic");
    let p = prog.to_str().expect("utf-8 path");
    let n = common::native(p, &[], None);
    assert!(n.status.success(), "many_threads fails natively: {}", String::from_utf8_lossy(&n.stderr));
    let report = common::scratch_dir("many-threads").join("profile.json");
    let s = common::sandbox(&["--cpus", "2", &format!("--profile={}", report.display())], p, &[], None);
    common::assert_same("many_threads", &s, &n);
    let profile: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("profile written")).expect("profile JSON");
    let exit = &profile["resources_at_exit"];
    assert!(exit["vcpus_created"].as_u64().expect("vcpus_created") <= 2, "more vCPUs than --cpus 2: {exit}");
    assert_eq!(exit["vcpus_in_use"].as_u64(), Some(0), "vCPUs still held: {exit}");
}

/// `int $0x80` in a 64-bit process: the sandbox runs no 32-bit system
/// calls, so it is what Linux without IA-32 emulation gives, a general
/// protection fault naming vector 0x80 (SIGSEGV, SI_KERNEL). Natively the
/// 32-bit call runs, so this is checked in the sandbox only.
#[test]
fn int80_is_a_general_protection_fault() {
    require_kvm!();
    for v in common::VARIANTS {
        let prog = common::c_program("sig_edges", v);
        let out = common::sandbox(&[], prog.to_str().unwrap(), &["int80"], None);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "int 0x80: signal 11 code 128 addr (nil) trapno 13 err 0x402\n",
            "sig_edges-{v}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Sets the path in an ELF file's PT_INTERP to `interp`, padded with NULs.
fn set_interpreter(elf: &mut [u8], interp: &[u8]) {
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(elf, 0x20), u16_at(elf, 0x36), u16_at(elf, 0x38));
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32::from_le_bytes(elf[ph..ph + 4].try_into().unwrap()) == 3 {
            let (off, size) = (u64_at(elf, ph + 8), u64_at(elf, ph + 32));
            assert!(interp.len() < size, "interpreter path too long for PT_INTERP");
            let field = &mut elf[off..off + size];
            field.fill(0);
            field[..interp.len()].copy_from_slice(interp);
            return;
        }
    }
    panic!("no PT_INTERP");
}

/// The names programs are run by, programs run by descriptor, and the
/// errors of their ELF interpreters (tests/c/exec_names.c says what the
/// fixture holds).
#[test]
fn exec_names() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    require_kvm!();
    let d = common::scratch_dir("exec_names");
    let script = d.join("script.long-name.sh");
    std::fs::write(&script, "#!/bin/sh\nread c < /proc/$$/comm; echo \"$c|$0\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    symlink("script.long-name.sh", d.join("link")).unwrap();
    std::fs::copy(common::c_program("exec_names", "static"), d.join("prog")).unwrap();
    std::fs::create_dir(d.join("jail")).unwrap();
    let dynamic = std::fs::read(common::c_program("exec_names", "dynamic")).unwrap();
    // An executable that is no ELF file: a script of the host's, if any.
    let script_interp = ["/usr/bin/ldd", "/usr/bin/gunzip", "/bin/gunzip"]
        .into_iter()
        .find(|p| std::fs::read(p).is_ok_and(|b| b.starts_with(b"#!")));
    let mut interps = vec![("no-interp", "/nonexistent/ld.so"), ("interp-not-exec", "/etc/passwd")];
    interps.extend(script_interp.map(|p| ("interp-not-elf", p)));
    for (name, interp) in interps {
        let mut elf = dynamic.clone();
        set_interpreter(&mut elf, interp.as_bytes());
        std::fs::write(d.join(name), elf).unwrap();
        std::fs::set_permissions(d.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    common::c_test("exec_names", &[d.to_str().unwrap()]);
}
