//! The tools that show a system's processes, memory, CPUs, mounts and
//! identity (procps, coreutils, util-linux), run in the sandbox: each must
//! succeed, show what the sandbox has (its --cpus, --memory, processes and
//! host name, never the host's) and print nothing of cordon's own.

mod common;

use std::process::Output;

use common::{native, sandbox};

/// The host program `name` under /usr/bin or /bin. Missing, the test skips
/// (saying so), unless CORDON_REQUIRE_KVM=1 asks for every test to run;
/// scripts/install-deps installs them.
fn tool(name: &str) -> Option<String> {
    let found = ["/usr/bin", "/bin"].iter().map(|d| format!("{d}/{name}")).find(|p| std::path::Path::new(p).is_file());
    if found.is_none() {
        if std::env::var("CORDON_REQUIRE_KVM").as_deref() == Ok("1") {
            panic!("{name} is not installed (scripts/install-deps installs it), and CORDON_REQUIRE_KVM=1");
        }
        eprintln!("skipping: {name} is not installed");
    }
    found
}

/// The sandbox's shape in these tests.
const LIMITS: [&str; 8] = ["--cpus", "3", "--memory", "768M", "--pids-limit", "64", "--hostname", "box-7"];
const MEMORY: u64 = 768 << 20;

/// Runs `program args` in a sandbox of [`LIMITS`]; it must exit 0 with
/// an empty stderr (nothing of cordon's own among the program's output).
fn run_ok(program: &str, args: &[&str]) -> String {
    let out = sandbox(&LIMITS, program, args, None);
    check_ok(&format!("{program} {args:?}"), &out)
}

fn check_ok(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{what}: status\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stderr.is_empty(), "{what}: stderr is not empty:\n{stderr}\nstdout:\n{stdout}");
    stdout
}

/// A shell in the sandbox that starts `sleep 1000` in the background and,
/// once it runs sleep (its /proc cmdline says so), runs `tool`. The sandbox
/// ends with the shell, taking sleep with it.
fn with_a_sleeper(tool: &str) -> String {
    let script = format!(
        "sleep 1000 & while ! grep -q '^sleep' /proc/$!/cmdline 2>/dev/null; do :; done; echo sleeper $!; {tool}"
    );
    run_ok("/bin/sh", &["-c", &script])
}

/// The sleeper's pid and the rest of the output.
fn sleeper_pid(out: &str) -> (String, String) {
    let (first, rest) = out.split_once('\n').expect("two lines at least");
    (first.strip_prefix("sleeper ").expect("sleeper line").to_string(), rest.to_string())
}

#[test]
fn ps_lists_the_sandboxes_processes() {
    require_kvm!();
    let Some(ps) = tool("ps") else { return };
    for args in ["aux", "-ef"] {
        let out = with_a_sleeper(&format!("{ps} {args}"));
        let (pid, listing) = sleeper_pid(&out);
        let lines: Vec<&str> = listing.lines().collect();
        assert!(lines[0].contains("PID") && (lines[0].contains("CMD") || lines[0].contains("COMMAND")), "{listing}");
        let row = |command: &str| lines.iter().find(|l| l.ends_with(&format!(" {command}"))).copied();
        let sleeper = row("sleep 1000").unwrap_or_else(|| panic!("ps {args} shows no sleeper:\n{listing}"));
        assert!(sleeper.split_whitespace().any(|f| f == pid), "pid {pid}: {sleeper}");
        assert!(row(&format!("{ps} {args}")).is_some(), "ps {args} shows itself:\n{listing}");
        let init = lines.iter().find(|l| l.split_whitespace().nth(1) == Some("1"));
        assert!(init.is_some_and(|l| l.contains("sh -c")), "the shell is pid 1:\n{listing}");
        // Only the sandbox's: the shell, sleep and ps (and grep, gone).
        assert_eq!(lines.len(), 4, "ps {args}:\n{listing}");
    }
}

#[test]
fn top_shows_the_sandbox() {
    require_kvm!();
    let Some(top) = tool("top") else { return };
    let out = with_a_sleeper(&format!("{top} -b -n1"));
    let (_, screen) = sleeper_pid(&out);
    let tasks = screen.lines().find(|l| l.starts_with("Tasks:")).unwrap_or_else(|| panic!("{screen}"));
    assert!(tasks.starts_with("Tasks:   3 total"), "shell, sleep and top: {tasks}");
    let mem = screen.lines().find(|l| l.starts_with("MiB Mem")).unwrap_or_else(|| panic!("{screen}"));
    assert!(mem.contains(" 768.0 total"), "{mem}");
    assert!(screen.lines().any(|l| l.ends_with(" sleep")), "{screen}");
}

#[test]
fn free_shows_the_memory_limit() {
    require_kvm!();
    let Some(free) = tool("free") else { return };
    let out = run_ok(&free, &["-b"]);
    let mem: Vec<&str> = out.lines().find(|l| l.starts_with("Mem:")).expect("a Mem: line").split_whitespace().collect();
    assert_eq!(mem[1], MEMORY.to_string(), "{out}");
    let used: u64 = mem[2].parse().unwrap();
    assert!(used > 0 && used < MEMORY, "{out}");
}

#[test]
fn nproc_and_runtimes_count_the_sandboxes_cpus() {
    require_kvm!();
    let Some(nproc) = tool("nproc") else { return };
    assert_eq!(run_ok(&nproc, &[]), "3\n");
    assert_eq!(run_ok(&nproc, &["--all"]), "3\n");
    let Some(python) = tool("python3") else { return };
    let out = run_ok(&python, &["-c", "import os; print(os.cpu_count(), len(os.sched_getaffinity(0)))"]);
    assert_eq!(out, "3 3\n");
    if let Some(lscpu) = tool("lscpu") {
        let out = run_ok(&lscpu, &[]);
        let cpus = out.lines().find(|l| l.starts_with("CPU(s):")).unwrap_or_else(|| panic!("{out}"));
        assert_eq!(cpus.split_whitespace().last(), Some("3"), "{out}");
    }
}

#[test]
fn df_and_mount_show_the_sandboxes_mounts() {
    require_kvm!();
    let (Some(df), Some(mount)) = (tool("df"), tool("mount")) else { return };
    let out = run_ok(&df, &[]);
    assert!(out.starts_with("Filesystem"), "{out}");
    assert!(out.lines().any(|l| l.ends_with(" /")), "{out}");
    run_ok(&df, &["-a"]);
    let out = run_ok(&mount, &[]);
    for line in
        ["overlay on / type overlay (rw", "proc on /proc type proc (rw", "cgroup2 on /sys/fs/cgroup type cgroup2 (ro"]
    {
        assert!(out.lines().any(|l| l.starts_with(line)), "no `{line}`:\n{out}");
    }
}

#[test]
fn host_name_agrees_everywhere() {
    require_kvm!();
    let (Some(uname), Some(hostname)) = (tool("uname"), tool("hostname")) else { return };
    assert_eq!(run_ok(&uname, &["-n"]), "box-7\n");
    assert_eq!(run_ok(&hostname, &[]), "box-7\n");
    assert_eq!(run_ok("/bin/cat", &["/proc/sys/kernel/hostname"]), "box-7\n");
    let outside = native(&hostname, &[], None);
    // sethostname inside changes the sandbox's name alone; it takes
    // CAP_SYS_ADMIN, which the sandbox's root holds only when given it
    // (and a caller other than root never).
    let script = format!("{hostname} renamed && {uname} -n && {hostname} && cat /proc/sys/kernel/hostname");
    let out = sandbox(&[&LIMITS[..], &["--cap-add", "SYS_ADMIN"]].concat(), "/bin/sh", &["-c", &script], None);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(check_ok("sethostname", &out), "renamed\nrenamed\nrenamed\n");
    } else {
        assert_ne!(out.status.code(), Some(0), "sethostname without CAP_SYS_ADMIN fails");
    }
    assert_eq!(native(&hostname, &[], None).stdout, outside.stdout, "the host's name is untouched");
}

#[test]
fn id_prints_only_its_own_output() {
    require_kvm!();
    let Some(id) = tool("id") else { return };
    let n = native(&id, &[], None);
    let out = sandbox(&[], &id, &[], None);
    common::assert_same("id", &out, &n);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "nothing of cordon's own");
}

#[test]
fn cgroup_files_show_the_sandboxes_limits() {
    require_kvm!();
    let script = "cd /sys/fs/cgroup && for f in memory.max cpu.max pids.max cgroup.controllers; do cat $f; done \
                  && cat pids.current memory.current /proc/self/cgroup && stat -f -c %T .";
    let out = run_ok("/bin/sh", &["-c", script]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(&lines[..4], [MEMORY.to_string().as_str(), "300000 100000", "64", "cpu memory pids"], "{out}");
    let pids: u64 = lines[4].parse().unwrap();
    assert!((2..64).contains(&pids), "the shell and cat at least: {out}");
    let used: u64 = lines[5].parse().unwrap();
    assert!(used > 0 && used < MEMORY, "{out}");
    assert_eq!(&lines[6..], ["0::/", "cgroup2fs"], "{out}");
    // Without limits: no CPU quota, no pids limit.
    let out = sandbox(&[], "/bin/cat", &["/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/pids.max"], None);
    assert_eq!(check_ok("no limits", &out), "max 100000\nmax\n");
}
