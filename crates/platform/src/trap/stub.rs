//! The code every stub process runs, and the layout it shares with the
//! sentry.
//!
//! The code is position-independent assembly, copied to [`CODE`] in each
//! stub: the seccomp filters let only instructions there make host calls.
//! It has three entries: the signal handler (every trap of application
//! code arrives there), the restorer it returns through, and the control
//! loop the stub's first thread runs. The control loop keeps its state in
//! registers and reads its requests from a page the stub maps read-only, so
//! application threads, which share its memory, cannot steer it.

use std::arch::global_asm;

/// Where the stub's code is mapped in every stub process. Far from both
/// the host's own mappings (which start near 0x7f..., with the PIE near
/// 0x55...) and the application's (its mmap area grows down from near the
/// top of the user range and reaches here only after terabytes).
pub(crate) const CODE: u64 = 0x6fff_0000_0000;
/// Bytes reserved for the code and its seccomp programs.
pub(crate) const CODE_SIZE: u64 = 0x1_0000;
/// Where the stub's control slot (request page, response page, thread
/// areas) is mapped.
pub(crate) const SLOT: u64 = 0x6fff_0100_0000;
/// Bytes of one slot in the control file.
pub(crate) const SLOT_SIZE: u64 = 0x4000_0000;
/// The range application mappings may not enter.
pub(crate) const RESERVED: std::ops::Range<u64> = CODE..SLOT + SLOT_SIZE;
/// The end of the host's user address range.
pub(crate) const TASK_TOP: u64 = 0x7fff_ffff_f000;

/// Bytes of one thread area: a page of control words, then the thread's
/// alternate signal stack. Aligned to its size, so that the handler finds
/// its area from its stack pointer.
pub(crate) const AREA: u64 = 0x1_0000;
/// Thread areas per stub (area 0 is the request and response pages).
pub(crate) const MAX_THREADS: usize = (SLOT_SIZE / AREA) as usize - 1;

/// The descriptor of the memory file in every stub.
pub(crate) const MEM_FD: i32 = 900;
/// The eventfd through which the control thread acknowledges a request.
pub(crate) const ACK_FD: i32 = 901;

// Offsets in the request page (read-only in the stub).
pub(crate) const REQ_SEQ: usize = 0;
pub(crate) const REQ_COUNT: usize = 4;
/// Holds the value 1, which the control thread writes to its eventfd.
pub(crate) const REQ_ONE: usize = 8;
pub(crate) const REQ_OPS: usize = 64;
pub(crate) const OP_SIZE: usize = 40;
pub(crate) const MAX_OPS: usize = (4096 - REQ_OPS) / OP_SIZE;
// Operation kinds.
pub(crate) const OP_MAP: u64 = 1;
pub(crate) const OP_UNMAP: u64 = 2;
pub(crate) const OP_PROTECT: u64 = 3;
pub(crate) const OP_THREAD: u64 = 4;
pub(crate) const OP_EXIT: u64 = 5;
/// As OP_MAP, backing every page at once (MAP_POPULATE): for memory the
/// program is about to fill, one host call instead of a host fault a page.
pub(crate) const OP_MAP_RESIDENT: u64 = 6;

// Offsets in the response page (writable in the stub: advisory only).
pub(crate) const RESP: usize = 4096;
pub(crate) const RESP_ERR: usize = RESP + 8;
pub(crate) const RESP_TID: usize = RESP + 16;
// Where the stub's setup leaves the seccomp program headers.
pub(crate) const SETUP_CONTROL_FPROG: usize = 2 * 4096;
pub(crate) const SETUP_THREAD_FPROG: usize = 2 * 4096 + 16;

// Offsets in a thread area's control page.
/// The futex word: whose turn it is.
pub(crate) const A_STATE: usize = 0;
pub(crate) const A_SIGNO: usize = 8;
pub(crate) const A_INFO: usize = 16;
pub(crate) const A_UCONTEXT: usize = 24;
pub(crate) const A_FS: usize = 32;
pub(crate) const A_GS: usize = 40;
/// How many times the handler may poll the state word before it sleeps
/// (written by the sentry; the handler caps it at [`SPIN_CAP`]).
pub(crate) const A_SPIN: usize = 48;
/// Nonzero while the answers at [`A_FAST_ANSWERS`] hold (a u32).
pub(crate) const A_FAST_ON: usize = 128;
/// The answers to the first [`crate::FAST_PATH_CONSTANTS`] calls of
/// [`crate::FAST_PATH_SYSCALLS`], a u64 each, written by the sentry while
/// the thread is parked.
pub(crate) const A_FAST_ANSWERS: usize = 136;
/// The thread's affinity mask, which the trampoline's sched_getaffinity
/// writes (a u64), and whether it holds (a u32, nonzero).
pub(crate) const A_AFFINITY: usize = 192;
pub(crate) const A_AFFINITY_ON: usize = 200;
/// The flags of a call the handler sent to the trampoline's path for kept
/// sites, which it returns in r11 as a `syscall` would.
pub(crate) const A_KEPT_FLAGS: usize = 208;
/// Calls the handler or the trampoline answered, a u64 per
/// [`crate::FAST_PATH_SYSCALLS`] entry; the sentry adds them to its counts
/// and clears them at each event.
pub(crate) const A_FAST_HITS: usize = 320;
const A_ALTSTACK: usize = 64;
/// The mask of XSAVE components the trampoline saves and restores (the
/// ones the kernel puts in a signal frame), written by the sentry.
pub(crate) const A_XMASK: usize = 256;
/// The top of the trampoline's stack, in the control page.
const TRAMP_STACK: usize = 4096;
/// Return addresses of fast-path calls at sites the sentry does not
/// rewrite, which the handler answers itself ([`FAST_SITES`] of them).
pub(crate) const A_FAST_SITES: usize = 264;
pub(crate) const FAST_SITES: usize = 4;
const _: () = assert!(
    A_FAST_ANSWERS + 8 * crate::FAST_PATH_CONSTANTS <= A_AFFINITY
        && A_AFFINITY_ON + 4 <= A_KEPT_FLAGS
        && A_KEPT_FLAGS + 8 <= A_XMASK
        && A_FAST_SITES + 8 * FAST_SITES <= A_FAST_HITS
        && A_FAST_HITS + 8 * crate::FAST_PATH_SYSCALLS.len() <= 1024,
    "the control words of a thread area overlap nothing"
);
/// Where the trampoline keeps the application's registers while the
/// sentry has its call: a ucontext, as a signal frame's, at the bottom of
/// the alternate stack (signal frames are built from its top).
pub(crate) const FAKE_UC: usize = 4096;
/// The trampoline's XSAVE image, which the ucontext's FP pointer names.
pub(crate) const FAKE_FP: usize = FAKE_UC + 512;
/// The signal number an event from the trampoline is posted with.
pub(crate) const SIGNO_TRAMPOLINE: u32 = 0;

/// The thread is gone (the kernel clears the word when it exits).
pub(crate) const STATE_DEAD: u32 = 0;
/// The stub posted an event; the sentry's turn.
pub(crate) const STATE_EVENT: u32 = 1;
/// The sentry gave the thread back to the application.
pub(crate) const STATE_RUN: u32 = 2;
/// The sentry asks the thread to exit.
pub(crate) const STATE_EXIT: u32 = 3;
/// As [`STATE_EVENT`], and the stub thread sleeps (or is about to) on the
/// futex: whoever changes the word must wake it.
pub(crate) const STATE_EVENT_SLEEPING: u32 = 4;
/// As [`STATE_RUN`], and the sentry sleeps (or is about to) on the futex.
pub(crate) const STATE_RUN_SLEEPING: u32 = 5;

/// The most polls of the state word the handler makes before it sleeps,
/// whatever the word at [`A_SPIN`] says: an application that scribbles it
/// wastes at most this much of its own thread's time.
pub(crate) const SPIN_CAP: u32 = 1 << 16;

const CLONE_THREAD_FLAGS: u64 = (libc::CLONE_VM
    | libc::CLONE_FS
    | libc::CLONE_FILES
    | libc::CLONE_SIGHAND
    | libc::CLONE_THREAD
    | libc::CLONE_SYSVSEM
    | libc::CLONE_CHILD_CLEARTID) as u64;

/// Flags of every clone the control thread makes.
pub(crate) const fn clone_flags() -> u64 {
    CLONE_THREAD_FLAGS
}

/// The trampoline's checks of a sched_getaffinity call (rdi, rsi, rdx as
/// the application passed them, gs the thread area) that it may answer:
/// the published mask of this thread (pid 0 or its own tid) into a buffer
/// of at least one word, a whole number of words (int pid and unsigned
/// int len, as the kernel reads them), outside the stub's own range,
/// which the sentry does not map. Leaves the mask in r11; anything else
/// goes to the sentry with rax unchanged.
macro_rules! getaffinity_checks {
    () => {
        concat!(
            "cmp dword ptr gs:[{a_affinity_on}], 0\n",
            "je cordon_trap_stub_tramp_posting\n",
            "test edi, edi\n",
            "jz 86f\n",
            "cmp edi, dword ptr gs:[{a_fast_answers} + 8]\n",
            "jne cordon_trap_stub_tramp_posting\n",
            "86:\n",
            "cmp esi, 8\n",
            "jb cordon_trap_stub_tramp_posting\n",
            "test esi, 7\n",
            "jnz cordon_trap_stub_tramp_posting\n",
            "movabs r11, {reserved_start_less_word}\n",
            "cmp rdx, r11\n",
            "jbe 87f\n",
            "movabs r11, {reserved_end}\n",
            "cmp rdx, r11\n",
            "jb cordon_trap_stub_tramp_posting\n",
            "87:\n",
            "mov r11, qword ptr gs:[{a_affinity}]",
        )
    };
}

global_asm!(
    ".pushsection .text.cordon_trap_stub,\"ax\",@progbits",
    ".p2align 12",
    ".globl cordon_trap_stub_start",
    "cordon_trap_stub_start:",
    // The signal handler: rdi = signal, rsi = siginfo, rdx = ucontext, on
    // the thread's alternate stack inside its area.
    ".globl cordon_trap_stub_handler",
    "cordon_trap_stub_handler:",
    "mov r8, rsp",
    "and r8, -{area}",
    // A fault at one of the fast paths' accesses to application memory
    // (cordon_trap_stub_fixups): the access had no effect, and the call
    // goes on at its fixup, the way to the sentry, as if no fast path
    // existed: the sentry then gives EFAULT, or maps the page and makes
    // the call, as for any other call.
    "cmp edi, {sigsegv}",
    "je 50f",
    "cmp edi, {sigbus}",
    "jne 52f",
    "50:",
    "mov rax, qword ptr [rdx + {uc_rip}]",
    "lea r9, [rip + cordon_trap_stub_start]",
    "sub rax, r9",
    "lea rcx, [rip + cordon_trap_stub_fixups]",
    "lea r10, [rip + cordon_trap_stub_fixups_end]",
    "51:",
    "cmp rcx, r10",
    "jae 52f",
    "cmp rax, qword ptr [rcx]",
    "lea rcx, [rcx + 16]",
    "jne 51b",
    "mov rax, qword ptr [rcx - 8]",
    "add rax, r9",
    "mov qword ptr [rdx + {uc_rip}], rax",
    "ret",
    "52:",
    // A kick while the trampoline posts a call or waits for its answer:
    // the sentry is about to hear from this thread anyway, and finds the
    // kick pending then.
    "cmp edi, {kick}",
    "jne 0f",
    "mov rax, qword ptr [rdx + {uc_rip}]",
    "lea rcx, [rip + cordon_trap_stub_tramp_posting]",
    "cmp rax, rcx",
    "jb 0f",
    "lea rcx, [rip + cordon_trap_stub_tramp_return]",
    "cmp rax, rcx",
    "jae 0f",
    // Unless the sentry has answered the call already: the thread is on
    // its way back to the registers it was given, and the sentry waits for
    // its next event, which this kick is.
    "lea rcx, [rip + cordon_trap_stub_handoff_posted]",
    "cmp rax, rcx",
    "jb 99f",
    "mov eax, dword ptr [r8]",
    "cmp eax, {run}",
    "je 0f",
    "cmp eax, {run_sleeping}",
    "jne 99f",
    "0:",
    // The trampoline's way back when the application's gs is not the
    // thread area: the registers the sentry gave are in the trampoline's
    // frame; return to them through rt_sigreturn.
    "cmp edi, {sigill}",
    "jne 0f",
    "mov rax, qword ptr [rdx + {uc_rip}]",
    "lea rcx, [rip + cordon_trap_stub_tramp_slow_return]",
    "cmp rax, rcx",
    "jne 0f",
    "lea rsi, [r8 + {fake_uc} + {uc_gregs}]",
    "lea rdi, [rdx + {uc_gregs}]",
    "mov ecx, 18",
    "rep movsq",
    "jmp 8f",
    "0:",
    // A call the sentry published the answer to is answered here: rax in
    // the frame, a count, and back through rt_sigreturn.
    "cmp edi, {sigsys}",
    "jne 1f",
    "cmp dword ptr [r8 + {a_fast_on}], 0",
    "je 1f",
    "cmp dword ptr [rsi + {si_code}], {sys_seccomp_code}",
    "jne 1f",
    "cmp dword ptr [rsi + {si_arch}], {audit_arch}",
    "jne 1f",
    "mov eax, dword ptr [rsi + {si_syscall}]",
    "call cordon_trap_stub_fast_index",
    "je 3f",
    "cmp eax, {nr_getaffinity}",
    "jne 1f",
    "3:",
    // Only at a site the sentry would not rewrite: any other goes to it
    // once, to be rewritten, and is answered by the trampoline after.
    "mov r9, qword ptr [rdx + {uc_rip}]",
    "cmp r9, qword ptr [r8 + {a_fast_sites}]",
    "je 2f",
    "cmp r9, qword ptr [r8 + {a_fast_sites} + 8]",
    "je 2f",
    "cmp r9, qword ptr [r8 + {a_fast_sites} + 16]",
    "je 2f",
    "cmp r9, qword ptr [r8 + {a_fast_sites} + 24]",
    "jne 1f",
    "2:",
    "cmp eax, {nr_getaffinity}",
    "jne 4f",
    // sched_getaffinity writes application memory, which the handler
    // never does: the thread goes on in the trampoline's path for kept
    // sites instead, with the registers a `syscall` leaves (rcx the
    // return address; the flags for r11 in the thread area), provided the
    // real gs is the thread area the path finds its words through.
    "rdgsbase rcx",
    "cmp rcx, r8",
    "jne 1f",
    "mov qword ptr [rdx + {uc_rcx}], r9",
    "mov qword ptr [rdx + {uc_rax}], rax",
    "mov rcx, qword ptr [rdx + {uc_efl}]",
    "mov qword ptr [r8 + {a_kept_flags}], rcx",
    "lea rcx, [rip + cordon_trap_stub_tramp_kept]",
    "mov qword ptr [rdx + {uc_rip}], rcx",
    "ret",
    "4:",
    "mov rax, qword ptr [r8 + rcx * 8 + {a_fast_answers}]",
    "mov qword ptr [rdx + {uc_rax}], rax",
    "inc qword ptr [r8 + rcx * 8 + {a_fast_hits}]",
    "ret",
    "1:",
    "mov dword ptr [r8 + {a_signo}], edi",
    "mov qword ptr [r8 + {a_info}], rsi",
    "mov qword ptr [r8 + {a_uc}], rdx",
    "rdfsbase rcx",
    "mov qword ptr [r8 + {a_fs}], rcx",
    // The application's gs is 0 while the real one is the thread area,
    // where the trampoline finds it.
    "rdgsbase rcx",
    "xor eax, eax",
    "cmp rcx, r8",
    "cmove rcx, rax",
    "mov qword ptr [r8 + {a_gs}], rcx",
    "call cordon_trap_stub_handoff",
    "8:",
    "mov rcx, qword ptr [r8 + {a_fs}]",
    "wrfsbase rcx",
    "mov rcx, qword ptr [r8 + {a_gs}]",
    "test rcx, rcx",
    "cmovz rcx, r8",
    "wrgsbase rcx",
    "99:",
    "ret",
    // eax: a system call number; sets ZF and rcx to its index in the fast
    // paths if it has one. Clobbers nothing else.
    "cordon_trap_stub_fast_index:",
    "xor ecx, ecx",
    "cmp eax, {nr0}",
    "je 9f",
    "inc ecx",
    "cmp eax, {nr1}",
    "je 9f",
    "inc ecx",
    "cmp eax, {nr2}",
    "je 9f",
    "inc ecx",
    "cmp eax, {nr3}",
    "je 9f",
    "inc ecx",
    "cmp eax, {nr4}",
    "je 9f",
    "inc ecx",
    "cmp eax, {nr5}",
    "je 9f",
    "inc ecx",
    "cmp eax, {nr6}",
    "9:",
    "ret",
    // The trampoline of rewritten sites (see crate::arch::rewrite): rcx
    // = return address, r11 = the site's cell. No stack until the
    // application's registers are saved: the red zone below rsp is the
    // application's.
    ".globl cordon_trap_stub_trampoline",
    "cordon_trap_stub_trampoline:",
    // gs must be a thread area of this stub, or the application set its
    // own: then the cell's plain system call, which traps.
    "rdgsbase rax",
    "test eax, {area} - 1",
    "jnz 70f",
    "shr rax, 16",
    "sub rax, {first_area_shifted}",
    "cmp rax, {max_threads}",
    "jae 70f",
    "mov eax, dword ptr [r11 + {cell_nr}]",
    "cmp dword ptr gs:[{a_fast_on}], 0",
    "je cordon_trap_stub_tramp_posting",
    // The cell is done with: r11 = the index of a fast path.
    "xor r11d, r11d",
    "cmp eax, {nr0}",
    "je 9f",
    "inc r11d",
    "cmp eax, {nr1}",
    "je 9f",
    "inc r11d",
    "cmp eax, {nr2}",
    "je 9f",
    "inc r11d",
    "cmp eax, {nr3}",
    "je 9f",
    "inc r11d",
    "cmp eax, {nr4}",
    "je 9f",
    "inc r11d",
    "cmp eax, {nr5}",
    "je 9f",
    "inc r11d",
    "cmp eax, {nr6}",
    "je 9f",
    "cmp eax, {nr_getaffinity}",
    "jne cordon_trap_stub_tramp_posting",
    // sched_getaffinity: the published mask, 8 bytes, at rdx.
    getaffinity_checks!(),
    // Faults here go to the sentry (the handler's fixups), with rax
    // still the call's number.
    ".globl cordon_trap_stub_tramp_getaffinity_write",
    "cordon_trap_stub_tramp_getaffinity_write:",
    "mov qword ptr [rdx], r11",
    "mov eax, 8",
    "mov r11d, {getaffinity_index}",
    "jmp 19f",
    // A fast path: the answer, a count, r11 = the flags as a system call
    // leaves them (pushed below the red zone), and back.
    "9:",
    "mov rax, qword ptr gs:[r11 * 8 + {a_fast_answers}]",
    "19:",
    "inc qword ptr gs:[r11 * 8 + {a_fast_hits}]",
    "lea rsp, [rsp - 128]",
    ".globl cordon_trap_stub_tramp_lowered",
    "cordon_trap_stub_tramp_lowered:",
    "pushfq",
    ".globl cordon_trap_stub_tramp_pushed",
    "cordon_trap_stub_tramp_pushed:",
    "pop r11",
    ".globl cordon_trap_stub_tramp_popped",
    "cordon_trap_stub_tramp_popped:",
    "lea rsp, [rsp + 128]",
    ".globl cordon_trap_stub_tramp_commit",
    "cordon_trap_stub_tramp_commit:",
    "jmp rcx",
    "70:",
    "mov eax, dword ptr [r11 + {cell_nr}]",
    "add r11, {cell_fallback}",
    "jmp r11",
    // sched_getaffinity at a site the sentry keeps, sent here by the
    // handler: rax = the number, rcx = the return address, the flags at
    // the call in the thread area. rax keeps the number until the last
    // two instructions, so that the sentry may put a thread interrupted
    // before them back at its `syscall`.
    ".globl cordon_trap_stub_tramp_kept",
    "cordon_trap_stub_tramp_kept:",
    getaffinity_checks!(),
    ".globl cordon_trap_stub_tramp_kept_write",
    "cordon_trap_stub_tramp_kept_write:",
    "mov qword ptr [rdx], r11",
    "inc qword ptr gs:[{getaffinity_index} * 8 + {a_fast_hits}]",
    "mov r11, qword ptr gs:[{a_kept_flags}]",
    "mov eax, 8",
    ".globl cordon_trap_stub_tramp_kept_commit",
    "cordon_trap_stub_tramp_kept_commit:",
    "jmp rcx",
    ".globl cordon_trap_stub_tramp_kept_end",
    "cordon_trap_stub_tramp_kept_end:",
    // The call goes to the sentry: the registers into the thread's
    // trampoline frame, shaped as a signal frame's, then the handoff.
    ".globl cordon_trap_stub_tramp_posting",
    "cordon_trap_stub_tramp_posting:",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 0 * 8], r8",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 1 * 8], r9",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 2 * 8], r10",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 4 * 8], r12",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 5 * 8], r13",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 6 * 8], r14",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 7 * 8], r15",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 8 * 8], rdi",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 9 * 8], rsi",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 10 * 8], rbp",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 11 * 8], rbx",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 12 * 8], rdx",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 13 * 8], rax",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 14 * 8], rcx",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 15 * 8], rsp",
    "mov qword ptr gs:[{fake_uc} + {uc_gregs} + 16 * 8], rcx",
    "rdgsbase r8",
    "lea rsp, [r8 + {tramp_stack}]",
    "pushfq",
    "pop r11",
    "mov qword ptr [r8 + {fake_uc} + {uc_gregs} + 3 * 8], r11",
    "mov qword ptr [r8 + {fake_uc} + {uc_gregs} + 17 * 8], r11",
    "mov eax, dword ptr [r8 + {a_xmask}]",
    "mov edx, dword ptr [r8 + {a_xmask} + 4]",
    "xsave64 [r8 + {fake_fp}]",
    "mov dword ptr [r8 + {a_signo}], {signo_trampoline}",
    "lea rcx, [r8 + {fake_uc}]",
    "mov qword ptr [r8 + {a_uc}], rcx",
    "rdfsbase rcx",
    "mov qword ptr [r8 + {a_fs}], rcx",
    "mov qword ptr [r8 + {a_gs}], 0",
    // The handoff returns straight to the way back: no instruction of
    // this thread runs outside the handoff between the sentry's answer
    // and the way back (see the kicks in the handler).
    "lea rcx, [rip + cordon_trap_stub_tramp_return]",
    "push rcx",
    "jmp cordon_trap_stub_handoff",
    // The handoff (see the module docs of the platform): posts the event
    // of the thread whose area is r8, waits for the sentry's answer and
    // returns when it says run; exits the thread when it says exit.
    "cordon_trap_stub_handoff:",
    "mov eax, {event}",
    "xchg eax, dword ptr [r8]",
    ".globl cordon_trap_stub_handoff_posted",
    "cordon_trap_stub_handoff_posted:",
    "cmp eax, {run}",
    "je 2f",
    "mov eax, {sys_futex}",
    "mov rdi, r8",
    "mov esi, 1", // FUTEX_WAKE, shared: the sentry waits in another process
    "mov edx, 1",
    "syscall",
    // Poll for the answer as long as the sentry allows (never more than
    // the cap), then announce sleep and wait on the futex.
    "2:",
    "mov ecx, dword ptr [r8 + {a_spin}]",
    "mov eax, {spin_cap}",
    "cmp ecx, eax",
    "cmova ecx, eax",
    "test ecx, ecx",
    "jz 5f",
    "3:",
    "mov eax, dword ptr [r8]",
    "cmp eax, {event}",
    "jne 6f",
    "pause",
    "dec ecx",
    "jnz 3b",
    "5:",
    "mov eax, {event}",
    "mov edx, {event_sleeping}",
    "lock cmpxchg dword ptr [r8], edx",
    "jne 6f",
    "7:",
    "mov eax, {sys_futex}",
    "mov rdi, r8",
    "xor esi, esi", // FUTEX_WAIT
    "mov edx, {event_sleeping}",
    "xor r10d, r10d",
    "syscall",
    "mov eax, dword ptr [r8]",
    "cmp eax, {event_sleeping}",
    "je 7b",
    // eax: the sentry's answer.
    "6:",
    "cmp eax, {run}",
    "je 8f",
    "cmp eax, {run_sleeping}",
    "jne 4f",
    "8:",
    "ret",
    "4:",
    "mov eax, {sys_exit}",
    "xor edi, edi",
    "syscall",
    "ud2",
    // Back to the application with the registers and FP state the sentry
    // left in the frame. A kick from here on is reported by the sentry
    // as an interruption before these registers ran.
    ".globl cordon_trap_stub_tramp_return",
    "cordon_trap_stub_tramp_return:",
    "mov eax, dword ptr [r8 + {a_xmask}]",
    "mov edx, dword ptr [r8 + {a_xmask} + 4]",
    "xrstor64 [r8 + {fake_fp}]",
    "mov rcx, qword ptr [r8 + {a_fs}]",
    "wrfsbase rcx",
    "cmp qword ptr [r8 + {a_gs}], 0",
    "jne cordon_trap_stub_tramp_slow_return",
    "push qword ptr [r8 + {fake_uc} + {uc_gregs} + 17 * 8]",
    "popfq",
    "mov r9, qword ptr [r8 + {fake_uc} + {uc_gregs} + 1 * 8]",
    "mov r10, qword ptr [r8 + {fake_uc} + {uc_gregs} + 2 * 8]",
    "mov r11, qword ptr [r8 + {fake_uc} + {uc_gregs} + 3 * 8]",
    "mov r12, qword ptr [r8 + {fake_uc} + {uc_gregs} + 4 * 8]",
    "mov r13, qword ptr [r8 + {fake_uc} + {uc_gregs} + 5 * 8]",
    "mov r14, qword ptr [r8 + {fake_uc} + {uc_gregs} + 6 * 8]",
    "mov r15, qword ptr [r8 + {fake_uc} + {uc_gregs} + 7 * 8]",
    "mov rdi, qword ptr [r8 + {fake_uc} + {uc_gregs} + 8 * 8]",
    "mov rsi, qword ptr [r8 + {fake_uc} + {uc_gregs} + 9 * 8]",
    "mov rbp, qword ptr [r8 + {fake_uc} + {uc_gregs} + 10 * 8]",
    "mov rbx, qword ptr [r8 + {fake_uc} + {uc_gregs} + 11 * 8]",
    "mov rdx, qword ptr [r8 + {fake_uc} + {uc_gregs} + 12 * 8]",
    "mov rax, qword ptr [r8 + {fake_uc} + {uc_gregs} + 13 * 8]",
    "mov rcx, qword ptr [r8 + {fake_uc} + {uc_gregs} + 14 * 8]",
    "mov rsp, qword ptr [r8 + {fake_uc} + {uc_gregs} + 15 * 8]",
    "mov r8, qword ptr [r8 + {fake_uc} + {uc_gregs} + 0 * 8]",
    "jmp qword ptr gs:[{fake_uc} + {uc_gregs} + 16 * 8]",
    // The application's gs is its own: the handler returns (above).
    ".globl cordon_trap_stub_tramp_slow_return",
    "cordon_trap_stub_tramp_slow_return:",
    "ud2",
    ".globl cordon_trap_stub_tramp_end",
    "cordon_trap_stub_tramp_end:",
    ".globl cordon_trap_stub_restorer",
    "cordon_trap_stub_restorer:",
    "mov eax, {sys_rt_sigreturn}",
    "syscall",
    "ud2",
    // The fast paths' accesses to application memory and where each
    // goes when it faults, as offsets from the start of the code.
    ".p2align 3",
    ".globl cordon_trap_stub_fixups",
    "cordon_trap_stub_fixups:",
    ".quad cordon_trap_stub_tramp_getaffinity_write - cordon_trap_stub_start",
    ".quad cordon_trap_stub_tramp_posting - cordon_trap_stub_start",
    ".quad cordon_trap_stub_tramp_kept_write - cordon_trap_stub_start",
    ".quad cordon_trap_stub_tramp_posting - cordon_trap_stub_start",
    ".globl cordon_trap_stub_fixups_end",
    "cordon_trap_stub_fixups_end:",
    // The control thread: unmaps everything of the host's but the stub,
    // installs the control filter and serves requests.
    ".globl cordon_trap_stub_control",
    "cordon_trap_stub_control:",
    "mov eax, {sys_munmap}",
    "xor edi, edi",
    "movabs rsi, {code}",
    "syscall",
    "mov eax, {sys_munmap}",
    "movabs rdi, {code_end}",
    "movabs rsi, {gap_len}",
    "syscall",
    "mov eax, {sys_munmap}",
    "movabs rdi, {slot_end}",
    "movabs rsi, {top_len}",
    "syscall",
    "mov eax, {sys_seccomp}",
    "mov edi, 1", // SECCOMP_SET_MODE_FILTER
    "xor esi, esi",
    "movabs rdx, {control_fprog}",
    "syscall",
    "test rax, rax",
    "jnz 90f",
    "movabs r15, {slot}",
    "lea r14, [r15 + {resp}]",
    "xor r13d, r13d",
    "10:",
    "mov eax, dword ptr [r15 + {req_seq}]",
    "cmp eax, r13d",
    "jne 11f",
    "mov eax, {sys_futex}",
    "mov rdi, r15",
    "xor esi, esi",
    "mov edx, r13d",
    "xor r10d, r10d",
    "syscall",
    "jmp 10b",
    "11:",
    "mov r13d, eax",
    "mov ebx, dword ptr [r15 + {req_count}]",
    "mov eax, {max_ops}",
    "cmp ebx, eax",
    "cmova ebx, eax",
    "lea rbp, [r15 + {req_ops}]",
    "xor r12d, r12d",
    "20:",
    "test ebx, ebx",
    "jz 30f",
    "mov rax, qword ptr [rbp]",
    "cmp rax, {op_map}",
    "je 21f",
    "cmp rax, {op_unmap}",
    "je 22f",
    "cmp rax, {op_protect}",
    "je 23f",
    "cmp rax, {op_thread}",
    "je 24f",
    "cmp rax, {op_exit}",
    "je 90f",
    "cmp rax, {op_map_resident}",
    "je 25f",
    "jmp 29f",
    "25:",
    "mov r10d, {map_resident_flags}",
    "jmp 26f",
    "21:",
    "mov r10d, {map_flags}",
    "26:",
    "mov rdi, qword ptr [rbp + 8]",
    "mov rsi, qword ptr [rbp + 16]",
    "mov rdx, qword ptr [rbp + 24]",
    "mov r8d, {mem_fd}",
    "mov r9, qword ptr [rbp + 32]",
    "mov eax, {sys_mmap}",
    "syscall",
    "jmp 28f",
    "22:",
    "mov rdi, qword ptr [rbp + 8]",
    "mov rsi, qword ptr [rbp + 16]",
    "mov eax, {sys_munmap}",
    "syscall",
    "jmp 28f",
    "23:",
    "mov rdi, qword ptr [rbp + 8]",
    "mov rsi, qword ptr [rbp + 16]",
    "mov rdx, qword ptr [rbp + 24]",
    "mov eax, {sys_mprotect}",
    "syscall",
    "jmp 28f",
    "24:",
    "movabs rdi, {clone_flags}",
    "mov rsi, qword ptr [rbp + 8]",
    "add rsi, 4096",
    "xor edx, edx",
    "mov r10, qword ptr [rbp + 8]",
    "xor r8d, r8d",
    "mov eax, {sys_clone}",
    "syscall",
    "test rax, rax",
    "jz 40f",
    "mov qword ptr [r14 + {resp_tid_rel}], rax",
    "28:",
    "cmp rax, -4095",
    "jb 29f",
    "test r12, r12",
    "jnz 29f",
    "mov r12, rax",
    "29:",
    "add rbp, {op_size}",
    "dec ebx",
    "jmp 20b",
    "30:",
    "mov qword ptr [r14 + {resp_err_rel}], r12",
    "mov dword ptr [r14], r13d",
    "mov eax, {sys_write}",
    "mov edi, {ack_fd}",
    "lea rsi, [r15 + {req_one}]",
    "mov edx, 8",
    "syscall",
    "jmp 10b",
    // A new application thread: its alternate stack, its own filter, then
    // a trap that parks it in the handler until the sentry runs it.
    "40:",
    "lea r8, [rsp - 4096]",
    "lea rax, [r8 + 4096]",
    "mov qword ptr [r8 + {a_altstack}], rax",
    "mov qword ptr [r8 + {a_altstack} + 8], 0",
    "mov qword ptr [r8 + {a_altstack} + 16], {altstack_size}",
    "lea rdi, [r8 + {a_altstack}]",
    "xor esi, esi",
    "mov eax, {sys_sigaltstack}",
    "syscall",
    "test rax, rax",
    "jnz 91f",
    "mov eax, {sys_seccomp}",
    "mov edi, 1",
    "xor esi, esi",
    "movabs rdx, {thread_fprog}",
    "syscall",
    "test rax, rax",
    "jnz 91f",
    "ud2",
    "90:",
    "mov eax, {sys_exit_group}",
    "xor edi, edi",
    "syscall",
    "ud2",
    "91:",
    "mov eax, {sys_exit}",
    "mov edi, 1",
    "syscall",
    "ud2",
    ".globl cordon_trap_stub_end",
    "cordon_trap_stub_end:",
    ".popsection",
    area = const AREA,
    kick = const super::KICK_SIGNAL,
    sigill = const libc::SIGILL,
    uc_rip = const 40 + 16 * 8,
    uc_gregs = const 40,
    fake_uc = const FAKE_UC,
    fake_fp = const FAKE_FP,
    a_xmask = const A_XMASK,
    a_fast_sites = const A_FAST_SITES,
    tramp_stack = const TRAMP_STACK,
    first_area_shifted = const (SLOT + AREA) >> 16,
    max_threads = const MAX_THREADS,
    cell_nr = const crate::arch::rewrite::CELL_NR,
    cell_fallback = const crate::arch::rewrite::CELL_FALLBACK,
    signo_trampoline = const SIGNO_TRAMPOLINE,
    a_signo = const A_SIGNO,
    a_info = const A_INFO,
    a_uc = const A_UCONTEXT,
    a_fs = const A_FS,
    a_gs = const A_GS,
    a_altstack = const A_ALTSTACK,
    altstack_size = const AREA - 4096,
    a_spin = const A_SPIN,
    a_fast_on = const A_FAST_ON,
    a_fast_answers = const A_FAST_ANSWERS,
    a_fast_hits = const A_FAST_HITS,
    sigsys = const libc::SIGSYS,
    sigsegv = const libc::SIGSEGV,
    sigbus = const libc::SIGBUS,
    a_affinity = const A_AFFINITY,
    a_affinity_on = const A_AFFINITY_ON,
    nr_getaffinity = const crate::FAST_PATH_SYSCALLS[crate::FAST_PATH_GETAFFINITY],
    getaffinity_index = const crate::FAST_PATH_GETAFFINITY,
    reserved_start_less_word = const RESERVED.start - 8,
    reserved_end = const RESERVED.end,
    si_code = const 8,
    si_syscall = const 24,
    si_arch = const 28,
    sys_seccomp_code = const 1, // SYS_SECCOMP
    audit_arch = const 0xc000_003e_u32, // AUDIT_ARCH_X86_64
    uc_rax = const 40 + 13 * 8, // uc_mcontext.gregs[REG_RAX]
    uc_rcx = const 40 + 14 * 8,
    uc_efl = const 40 + 17 * 8,
    a_kept_flags = const A_KEPT_FLAGS,
    nr0 = const crate::FAST_PATH_SYSCALLS[0],
    nr1 = const crate::FAST_PATH_SYSCALLS[1],
    nr2 = const crate::FAST_PATH_SYSCALLS[2],
    nr3 = const crate::FAST_PATH_SYSCALLS[3],
    nr4 = const crate::FAST_PATH_SYSCALLS[4],
    nr5 = const crate::FAST_PATH_SYSCALLS[5],
    nr6 = const crate::FAST_PATH_SYSCALLS[6],
    spin_cap = const SPIN_CAP,
    event = const STATE_EVENT,
    event_sleeping = const STATE_EVENT_SLEEPING,
    run = const STATE_RUN,
    run_sleeping = const STATE_RUN_SLEEPING,
    sys_futex = const libc::SYS_futex,
    sys_exit = const libc::SYS_exit,
    sys_exit_group = const libc::SYS_exit_group,
    sys_rt_sigreturn = const libc::SYS_rt_sigreturn,
    sys_munmap = const libc::SYS_munmap,
    sys_mmap = const libc::SYS_mmap,
    sys_mprotect = const libc::SYS_mprotect,
    sys_clone = const libc::SYS_clone,
    sys_write = const libc::SYS_write,
    sys_seccomp = const libc::SYS_seccomp,
    sys_sigaltstack = const libc::SYS_sigaltstack,
    code = const CODE,
    code_end = const CODE + CODE_SIZE,
    gap_len = const SLOT - (CODE + CODE_SIZE),
    slot = const SLOT,
    slot_end = const SLOT + SLOT_SIZE,
    top_len = const TASK_TOP - (SLOT + SLOT_SIZE),
    control_fprog = const SLOT + SETUP_CONTROL_FPROG as u64,
    thread_fprog = const SLOT + SETUP_THREAD_FPROG as u64,
    resp = const RESP,
    resp_err_rel = const RESP_ERR - RESP,
    resp_tid_rel = const RESP_TID - RESP,
    req_seq = const REQ_SEQ,
    req_count = const REQ_COUNT,
    req_one = const REQ_ONE,
    req_ops = const REQ_OPS,
    max_ops = const MAX_OPS,
    op_size = const OP_SIZE,
    op_map = const OP_MAP,
    op_unmap = const OP_UNMAP,
    op_protect = const OP_PROTECT,
    op_thread = const OP_THREAD,
    op_exit = const OP_EXIT,
    map_flags = const libc::MAP_SHARED | libc::MAP_FIXED,
    op_map_resident = const OP_MAP_RESIDENT,
    map_resident_flags = const libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_POPULATE,
    mem_fd = const MEM_FD,
    ack_fd = const ACK_FD,
    clone_flags = const CLONE_THREAD_FLAGS,
);

unsafe extern "C" {
    static cordon_trap_stub_start: u8;
    static cordon_trap_stub_handler: u8;
    static cordon_trap_stub_restorer: u8;
    static cordon_trap_stub_control: u8;
    static cordon_trap_stub_trampoline: u8;
    static cordon_trap_stub_tramp_lowered: u8;
    static cordon_trap_stub_tramp_pushed: u8;
    static cordon_trap_stub_tramp_popped: u8;
    static cordon_trap_stub_tramp_commit: u8;
    static cordon_trap_stub_tramp_kept: u8;
    static cordon_trap_stub_tramp_kept_commit: u8;
    static cordon_trap_stub_tramp_kept_end: u8;
    static cordon_trap_stub_tramp_posting: u8;
    static cordon_trap_stub_handoff_posted: u8;
    static cordon_trap_stub_tramp_return: u8;
    static cordon_trap_stub_tramp_end: u8;
    static cordon_trap_stub_end: u8;
}

/// The stub's code as it lies in this binary.
pub(crate) fn code() -> &'static [u8] {
    let start = &raw const cordon_trap_stub_start;
    let end = &raw const cordon_trap_stub_end;
    // SAFETY: both symbols delimit one section of this binary's text, which
    // is mapped readable for the life of the process.
    unsafe { std::slice::from_raw_parts(start, end as usize - start as usize) }
}

fn offset(sym: *const u8) -> u64 {
    sym as u64 - (&raw const cordon_trap_stub_start) as u64
}

/// The handler's address in a stub.
pub(crate) fn handler() -> u64 {
    CODE + offset(&raw const cordon_trap_stub_handler)
}

/// The restorer's address in a stub.
pub(crate) fn restorer() -> u64 {
    CODE + offset(&raw const cordon_trap_stub_restorer)
}

/// The control loop's address in a stub.
pub(crate) fn control() -> u64 {
    CODE + offset(&raw const cordon_trap_stub_control)
}

/// Where the trampoline's code lies in a stub, in the order it runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TrampolineCode {
    /// The entry cells jump to.
    pub entry: u64,
    /// In a fast path, rsp is 128 below the application's here...
    pub lowered: u64,
    /// ...136 here...
    pub pushed: u64,
    /// ...and 128 here.
    pub popped: u64,
    /// The jump that ends a fast path.
    pub commit: u64,
    /// The path of calls the handler sends here from a kept site (the
    /// thread is at its `syscall` until...
    pub kept: u64,
    /// ...the jump that ends it).
    pub kept_commit: u64,
    pub kept_end: u64,
    /// From here the call is being posted to the sentry...
    pub posting: u64,
    /// ...from here it is posted (the handoff, which lies before
    /// `returning`), and the sentry may have answered...
    pub posted: u64,
    /// From here the sentry's answer is being restored.
    pub returning: u64,
    pub end: u64,
}

/// The trampoline's addresses in a stub.
pub(crate) fn trampoline() -> TrampolineCode {
    TrampolineCode {
        entry: CODE + offset(&raw const cordon_trap_stub_trampoline),
        lowered: CODE + offset(&raw const cordon_trap_stub_tramp_lowered),
        pushed: CODE + offset(&raw const cordon_trap_stub_tramp_pushed),
        popped: CODE + offset(&raw const cordon_trap_stub_tramp_popped),
        commit: CODE + offset(&raw const cordon_trap_stub_tramp_commit),
        kept: CODE + offset(&raw const cordon_trap_stub_tramp_kept),
        kept_commit: CODE + offset(&raw const cordon_trap_stub_tramp_kept_commit),
        kept_end: CODE + offset(&raw const cordon_trap_stub_tramp_kept_end),
        posting: CODE + offset(&raw const cordon_trap_stub_tramp_posting),
        posted: CODE + offset(&raw const cordon_trap_stub_handoff_posted),
        returning: CODE + offset(&raw const cordon_trap_stub_tramp_return),
        end: CODE + offset(&raw const cordon_trap_stub_tramp_end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" {
        static cordon_trap_stub_tramp_getaffinity_write: u8;
        static cordon_trap_stub_tramp_kept_write: u8;
        static cordon_trap_stub_fixups: u8;
        static cordon_trap_stub_fixups_end: u8;
    }

    /// The handler's table of fixups names the trampoline's write of the
    /// affinity mask, which lies in its fast path (where a kick puts the
    /// thread back at its site), and sends it to the way to the sentry.
    #[test]
    fn the_fixups_name_the_fast_paths_writes() {
        let start = &raw const cordon_trap_stub_start as usize;
        let (table, end) =
            (&raw const cordon_trap_stub_fixups as usize, &raw const cordon_trap_stub_fixups_end as usize);
        // SAFETY: the table lies between both symbols in this binary's
        // text, 8-aligned, as pairs of u64.
        let entries = unsafe { std::slice::from_raw_parts(table as *const [u64; 2], (end - table) / 16) };
        let t = trampoline();
        let write = CODE + (&raw const cordon_trap_stub_tramp_getaffinity_write as usize - start) as u64;
        let kept_write = CODE + (&raw const cordon_trap_stub_tramp_kept_write as usize - start) as u64;
        assert_eq!(entries, &[[write - CODE, t.posting - CODE], [kept_write - CODE, t.posting - CODE]]);
        assert!(t.entry < write && write < t.lowered, "{t:?}");
        assert!(t.kept < kept_write && kept_write < t.kept_commit, "{t:?}");
        use iced_x86::{Code, Decoder, DecoderOptions, Register};
        for at in [write, kept_write] {
            let off = (at - CODE) as usize;
            let i = Decoder::with_ip(64, &code()[off..], at, DecoderOptions::NONE).decode();
            assert_eq!(
                (i.code(), i.memory_base(), i.op1_register()),
                (Code::Mov_rm64_r64, Register::RDX, Register::R11)
            );
        }
    }

    /// The path for kept sites leaves rax, the call's number, alone until
    /// its last two instructions (the sentry puts a thread stopped before
    /// them back at its `syscall`), and touches no stack.
    #[test]
    fn the_kept_path_keeps_the_number_until_it_commits() {
        use iced_x86::{Decoder, DecoderOptions, Mnemonic, Register};
        let t = trampoline();
        let bytes = &code()[(t.kept - CODE) as usize..(t.kept_end - CODE) as usize];
        let insns: Vec<_> = Decoder::with_ip(64, bytes, t.kept, DecoderOptions::NONE).into_iter().collect();
        let n = insns.len();
        assert_eq!((insns[n - 2].mnemonic(), insns[n - 2].op0_register()), (Mnemonic::Mov, Register::EAX));
        assert_eq!((insns[n - 1].ip(), insns[n - 1].mnemonic()), (t.kept_commit, Mnemonic::Jmp));
        use Register::*;
        let forbidden = [RAX, EAX, AX, AL, AH, RSP, ESP, SP, SPL];
        for i in &insns[..n - 2] {
            let regs = (0..i.op_count()).map(|k| i.op_register(k)).chain([i.memory_base(), i.memory_index()]);
            for r in regs {
                assert!(!forbidden.contains(&r), "{i:?} uses {r:?}");
            }
            assert!(![Mnemonic::Push, Mnemonic::Pop, Mnemonic::Call].contains(&i.mnemonic()), "{i:?}");
        }
    }

    /// The handler and the sentry tell where a thread stopped in the
    /// trampoline by comparing addresses: its parts lie in the order they
    /// run.
    #[test]
    fn trampoline_parts_lie_in_order() {
        let t = trampoline();
        let order = [
            t.entry,
            t.lowered,
            t.pushed,
            t.popped,
            t.commit,
            t.kept,
            t.kept_commit,
            t.posting,
            t.posted,
            t.returning,
            t.end,
        ];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{t:?}");
        assert!(t.kept_commit < t.kept_end && t.kept_end <= t.posting, "{t:?}");
    }
}
