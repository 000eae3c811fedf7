//! Builds the vDSO the sentry maps into every process: a small freestanding
//! shared object compiled from C, embedded in the sentry as bytes.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let dir = "src/arch/x86_64/vdso";
    for f in ["vdso.c", "vdso.lds", "vdso.map"] {
        println!("cargo:rerun-if-changed={dir}/{f}");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("vdso.so");
    let compiler = cc::Build::new().get_compiler();
    let result = Command::new(compiler.path())
        .args([
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fPIC",
            "-shared",
            "-nostdlib",
            "-ffreestanding",
            "-fno-builtin",
            "-fno-stack-protector",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
            // Application code calls in with its vector registers live.
            "-mgeneral-regs-only",
        ])
        .arg(format!("-Wl,-T,{dir}/vdso.lds"))
        .arg(format!("-Wl,--version-script={dir}/vdso.map"))
        .args([
            "-Wl,--hash-style=both",
            "-Wl,-soname=linux-vdso.so.1",
            "-Wl,--no-undefined",
            "-Wl,--build-id=none",
            "-Wl,-z,max-page-size=4096",
            "-Wl,-Bsymbolic",
        ])
        .arg("-o")
        .arg(&out)
        .arg(format!("{dir}/vdso.c"))
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", compiler.path().display()));
    if !result.status.success() {
        panic!("building the vDSO failed:\n{}", String::from_utf8_lossy(&result.stderr));
    }
}
