//! Builds the C test programs under the workspace's tests/c: each NAME.c
//! becomes NAME-static, NAME-static-pie and NAME-dynamic in $OUT_DIR/c, so
//! the end-to-end tests cover every kind of executable the loader handles.
//! Only the test build depends on this crate: building `cordon` builds none
//! of them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;

const VARIANTS: &[(&str, &[&str])] =
    &[("static", &["-static"]), ("static-pie", &["-static-pie", "-fPIE"]), ("dynamic", &["-fPIE", "-pie"])];

fn main() {
    let sources_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/c");
    println!("cargo:rerun-if-changed={}", sources_dir.display());
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("c");
    std::fs::create_dir_all(&out).expect("create output directory");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&sources_dir)
        .expect("tests/c")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    let compiler = cc::Build::new().opt_level(2).warnings(true).get_compiler();
    let jobs: Vec<(PathBuf, PathBuf, &[&str])> = sources
        .iter()
        .flat_map(|src| {
            let stem = src.file_stem().expect("file name").to_string_lossy().into_owned();
            let out = &out;
            VARIANTS.iter().map(move |(v, flags)| (src.clone(), out.join(format!("{stem}-{v}")), *flags))
        })
        .collect();
    let workers = thread::available_parallelism().map(|n| n.get()).unwrap_or(2).max(2);
    for chunk in jobs.chunks(jobs.len().div_ceil(workers).max(1)) {
        thread::scope(|s| {
            for (src, exe, flags) in chunk {
                let compiler = &compiler;
                let include = &sources_dir;
                s.spawn(move || compile(compiler, include, src, exe, flags));
            }
        });
    }
}

fn compile(compiler: &cc::Tool, include: &Path, src: &Path, exe: &Path, flags: &[&str]) {
    let mut cmd = Command::new(compiler.path());
    cmd.args(["-O2", "-g", "-Wall", "-Wextra", "-Wno-unused-parameter", "-D_GNU_SOURCE", "-pthread"])
        .arg(format!("-I{}", include.display()))
        .args(flags)
        .arg("-o")
        .arg(exe)
        .arg(src)
        .arg("-lm");
    let out = cmd.output().unwrap_or_else(|e| panic!("running {}: {e}", compiler.path().display()));
    if !out.status.success() {
        panic!("compiling {} failed:\n{}", src.display(), String::from_utf8_lossy(&out.stderr));
    }
}
