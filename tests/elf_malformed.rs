//! Malformed executables: broken ELF headers, program headers and
//! interpreters, and `#!` scripts that loop or overflow. Each is run from
//! tests/c/exec_malformed.c natively and in the sandbox, which must agree
//! on every outcome: execve's error while the old program can still be
//! returned to, or how the new one ends (SIGSEGV when Linux gives up past
//! the point of no return).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// x86-64 code for exit(42).
const EXIT_42: [u8; 12] = [0xb8, 0x3c, 0, 0, 0, 0xbf, 42, 0, 0, 0, 0x0f, 0x05];
/// Where the code is in every image, and where a PT_INTERP path goes.
const CODE_AT: u64 = 0x100;
const INTERP_AT: u64 = 0x200;
/// Every image is this long.
const IMAGE_LEN: u64 = 0x400;
/// Where fixed-address images are linked.
const BASE: u64 = 0x40_0000;

const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const PT_NOTE: u32 = 4;
const PF_RX: u32 = 5;
const PF_RW: u32 = 6;

/// A program header.
#[derive(Clone, Copy)]
struct Ph {
    p_type: u32,
    flags: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
}

impl Ph {
    /// The whole file mapped at `vaddr`, readable and executable.
    fn load(vaddr: u64) -> Ph {
        Ph { p_type: PT_LOAD, flags: PF_RX, offset: 0, vaddr, filesz: IMAGE_LEN, memsz: IMAGE_LEN }
    }

    /// An interpreter path `len` bytes long at INTERP_AT.
    fn interp(len: u64) -> Ph {
        Ph { p_type: PT_INTERP, flags: 4, offset: INTERP_AT, vaddr: BASE + INTERP_AT, filesz: len, memsz: len }
    }
}

/// An x86-64 ELF image: header, program headers, the exit code at
/// CODE_AT, `interp` at INTERP_AT.
fn image(e_type: u16, entry: u64, phdrs: &[Ph], interp: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; IMAGE_LEN as usize];
    let put = |b: &mut Vec<u8>, at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
    put(&mut b, 0, b"\x7fELF\x02\x01\x01");
    put(&mut b, 16, &e_type.to_le_bytes());
    put(&mut b, 18, &62u16.to_le_bytes()); // EM_X86_64
    put(&mut b, 20, &1u32.to_le_bytes());
    put(&mut b, 24, &entry.to_le_bytes());
    put(&mut b, 32, &64u64.to_le_bytes()); // e_phoff
    put(&mut b, 52, &64u16.to_le_bytes()); // e_ehsize
    put(&mut b, 54, &56u16.to_le_bytes()); // e_phentsize
    put(&mut b, 56, &(phdrs.len() as u16).to_le_bytes());
    for (i, p) in phdrs.iter().enumerate() {
        let o = 64 + 56 * i;
        put(&mut b, o, &p.p_type.to_le_bytes());
        put(&mut b, o + 4, &p.flags.to_le_bytes());
        put(&mut b, o + 8, &p.offset.to_le_bytes());
        put(&mut b, o + 16, &p.vaddr.to_le_bytes());
        put(&mut b, o + 24, &p.vaddr.to_le_bytes());
        put(&mut b, o + 32, &p.filesz.to_le_bytes());
        put(&mut b, o + 40, &p.memsz.to_le_bytes());
        put(&mut b, o + 48, &0x1000u64.to_le_bytes());
    }
    put(&mut b, CODE_AT as usize, &EXIT_42);
    put(&mut b, INTERP_AT as usize, interp);
    b
}

/// A fixed-address executable with these program headers.
fn exec(phdrs: &[Ph]) -> Vec<u8> {
    image(ET_EXEC, BASE + CODE_AT, phdrs, b"")
}

/// A fixed-address executable asking for interpreter `path`.
fn with_interp(path: &[u8]) -> Vec<u8> {
    let mut p = path.to_vec();
    p.push(0);
    image(ET_EXEC, BASE + CODE_AT, &[Ph::interp(p.len() as u64), Ph::load(BASE)], &p)
}

fn set_u16(mut b: Vec<u8>, at: usize, v: u16) -> Vec<u8> {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
    b
}

fn set_u64(mut b: Vec<u8>, at: usize, v: u64) -> Vec<u8> {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    b
}

/// Writes an executable file.
fn write_exe(dir: &Path, name: &str, content: &[u8]) {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Writes the cases into `dir`; returns their names, in order.
fn write_cases(dir: &Path) -> Vec<String> {
    let d = dir.to_str().expect("utf-8 path");
    let valid = exec(&[Ph::load(BASE)]);
    let kernel = 0xffff_8000_0000_0000u64;
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("valid".into(), valid.clone()),
        ("valid-pie".into(), image(ET_DYN, CODE_AT, &[Ph::load(0)], b"")),
        ("empty".into(), Vec::new()),
        ("truncated-header".into(), valid[..40].to_vec()),
        ("truncated-phdrs".into(), valid[..64 + 20].to_vec()),
        ("phnum-zero".into(), set_u16(valid.clone(), 56, 0)),
        ("phnum-huge".into(), set_u16(valid.clone(), 56, 0xffff)),
        ("phentsize-wrong".into(), set_u16(valid.clone(), 54, 32)),
        ("phoff-past-eof".into(), set_u64(valid.clone(), 32, 1 << 40)),
        ("et-rel".into(), set_u16(valid.clone(), 16, ET_REL)),
        ("filesz-over-memsz".into(), exec(&[Ph { memsz: 0x100, ..Ph::load(BASE) }])),
        ("offset-past-eof".into(), exec(&[Ph { offset: 0x10_0000, ..Ph::load(BASE) }])),
        ("memsz-past-user-space".into(), exec(&[Ph { memsz: 0x7fff_ffff_0000, ..Ph::load(BASE) }])),
        ("memsz-max".into(), exec(&[Ph { memsz: u64::MAX, ..Ph::load(BASE) }])),
        ("overlapping".into(), exec(&[Ph::load(BASE), Ph::load(BASE)])),
        (
            "overlapping-writable".into(),
            exec(&[Ph::load(BASE), Ph { flags: PF_RW, filesz: 0x10, memsz: 0x2000, ..Ph::load(BASE) }]),
        ),
        ("vaddr-kernel".into(), image(ET_EXEC, kernel + CODE_AT, &[Ph::load(kernel)], b"")),
        ("vaddr-non-canonical".into(), image(ET_EXEC, 0x8000_0000_0000 + CODE_AT, &[Ph::load(0x8000_0000_0000)], b"")),
        ("vaddr-unaligned".into(), exec(&[Ph::load(BASE + 1)])),
        ("no-load".into(), exec(&[Ph { p_type: PT_NOTE, ..Ph::load(BASE) }])),
        ("entry-kernel".into(), image(ET_EXEC, kernel, &[Ph::load(BASE)], b"")),
        ("interp-missing".into(), with_interp(b"/nonexistent/ld.so")),
        ("interp-self".into(), with_interp(format!("{d}/interp-self").as_bytes())),
        ("interp-empty".into(), with_interp(format!("{d}/empty").as_bytes())),
        ("interp-directory".into(), with_interp(d.as_bytes())),
        ("interp-script".into(), with_interp(format!("{d}/shebang-missing").as_bytes())),
        ("interp-et-rel".into(), with_interp(format!("{d}/et-rel").as_bytes())),
        ("interp-truncated-phdrs".into(), with_interp(format!("{d}/truncated-phdrs").as_bytes())),
        ("interp-no-nul".into(), image(ET_EXEC, BASE + CODE_AT, &[Ph::interp(8), Ph::load(BASE)], b"/bin/sh!")),
        ("interp-one-byte".into(), image(ET_EXEC, BASE + CODE_AT, &[Ph::interp(1), Ph::load(BASE)], b"\0")),
        ("interp-huge".into(), image(ET_EXEC, BASE + CODE_AT, &[Ph::interp(8192), Ph::load(BASE)], b"/x\0")),
        (
            "interp-past-eof".into(),
            image(ET_EXEC, BASE + CODE_AT, &[Ph { offset: 0x10_0000, ..Ph::interp(16) }, Ph::load(BASE)], b""),
        ),
        ("shebang-empty".into(), b"#!\n".to_vec()),
        ("shebang-missing".into(), b"#!/nonexistent/interpreter\n".to_vec()),
        ("shebang-self".into(), format!("#!{d}/shebang-self\n").into_bytes()),
        ("shebang-too-long".into(), format!("#!/{}\n", "a".repeat(300)).into_bytes()),
        ("shebang-long-argument".into(), format!("#!/nonexistent/sh {}\n", "a".repeat(300)).into_bytes()),
        ("shebang-no-newline".into(), b"#!/nonexistent/interpreter".to_vec()),
    ];
    // `#!` chains ending at the valid program, around Linux's limit.
    for levels in 1..=6 {
        let name = format!("chain-{levels}");
        for k in 0..levels {
            let next = if k + 1 == levels { "valid".to_string() } else { format!("{name}.{}", k + 1) };
            let this = if k == 0 { name.clone() } else { format!("{name}.{k}") };
            write_exe(dir, &this, format!("#!{d}/{next}\n").as_bytes());
        }
        cases.push((name, Vec::new()));
    }
    let mut names = Vec::new();
    for (name, content) in cases {
        if !name.starts_with("chain-") {
            write_exe(dir, &name, &content);
        }
        names.push(name);
    }
    std::fs::create_dir(dir.join("directory")).unwrap();
    names.push("directory".into());
    std::fs::write(dir.join("not-executable"), &valid).unwrap();
    names.push("not-executable".into());
    names
}

#[test]
fn malformed_executables_fail_as_on_linux() {
    require_kvm!();
    let dir = common::scratch_dir("elf_malformed");
    let names = write_cases(&dir);
    let mut args = vec![dir.to_str().unwrap()];
    args.extend(names.iter().map(String::as_str));
    common::c_test("exec_malformed", &args);
}

/// The same under `--strace --profile`: the outcomes do not change, every
/// line before the profile report is a whole strace line (execve's
/// included, whether it fails, succeeds or dies), and the report follows.
#[test]
fn strace_and_profile_follow_malformed_executables() {
    require_kvm!();
    let dir = common::scratch_dir("elf_malformed_strace");
    let names = write_cases(&dir);
    let prog = common::c_program("exec_malformed", "static");
    let mut args = vec![prog.to_str().unwrap(), dir.to_str().unwrap()];
    args.extend(names.iter().map(String::as_str));
    let native = common::native(args[0], &args[1..], None);
    let child = common::spawn_cordon_with(&["--strace", "--profile"], &args);
    let traced = common::finish_within(child, std::time::Duration::from_secs(300), "exec_malformed --strace");
    common::assert_same("exec_malformed under --strace --profile", &traced, &native);
    let stderr = String::from_utf8_lossy(&traced.stderr);
    let (trace, report) = stderr.split_once("\ncordon profile (").expect("the profile report follows the trace");
    assert!(report.contains("\nsyscalls:"), "the profile report is cut short:\n{report}");
    let mut execs = 0;
    for line in trace.lines().filter(|l| !l.starts_with("cordon: ")) {
        assert!(common::well_formed_strace_line(line), "not a whole strace line: {line:?}");
        execs += usize::from(line.contains("] execve("));
    }
    assert!(execs >= names.len(), "{execs} execve lines for {} programs", names.len());
}
