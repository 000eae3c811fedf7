//! The trap platform's threat model, tried by an application
//! (tests/c/stub_escape.c): host system calls made from the stub's own code,
//! the one place its seccomp filter lets any through, a jump to a fast
//! path's write to application memory, and writes over the stub's pages,
//! must get the application nothing and leave the sandbox running. On a platform without stubs the program finds none there, as
//! natively.

mod common;

#[test]
fn the_stubs_code_and_pages_give_nothing() {
    require_kvm!();
    for variant in common::VARIANTS {
        let prog = common::c_program("stub_escape", variant);
        let prog = prog.to_str().expect("utf-8 path");
        let out = common::sandbox(&[], prog, &[], None);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let what = format!("stub_escape-{variant}");
        assert!(!stdout.contains("ESCAPED"), "{what}: a host call got through:\n{stdout}");
        if common::platform() == "trap" {
            assert_eq!(out.status.code(), Some(0), "{what}:\n{stdout}{}", String::from_utf8_lossy(&out.stderr));
            // The filters kill the stub (and so the process) for a call
            // they do not allow; the read-only request page faults.
            for line in [
                "host write: killed by signal 9",
                "host getpid: killed by signal 9",
                "host mmap: killed by signal 9",
                "host clone: killed by signal 9",
                "request page write: killed by signal 11",
                // The fast paths' writes fault there, and their fixup
                // makes the call in rax as any call is made.
                "fast-path write 0 to the request page: exited 3",
                "fast-path write 1 to the request page: exited 3",
                "parent alive",
            ] {
                assert!(stdout.lines().any(|l| l == line), "{what}: no {line:?} in:\n{stdout}");
            }
        } else {
            let native = common::native(prog, &[], None);
            common::assert_same(&what, &out, &native);
        }
    }
}
