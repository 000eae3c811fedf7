/*
 * Guest entry code, copied into the supervisor area of every address space.
 * It is assembled into the host binary only as data: nothing here runs on the
 * host. Everything is position independent; absolute operands are the fixed
 * supervisor addresses passed in as constants.
 *
 * Two pages: the first is readable and executable from user mode, because on
 * PVM a `syscall` jumps to LSTAR without leaving CPL 3; the second holds the
 * ring-0 code (exception entry, and the syscall entry for CPUs where
 * `syscall` does switch to CPL 0).
 *
 * Every way out of the guest is a store to an MMIO page (a guest-physical
 * address with no memory behind it): the host sees KVM_EXIT_MMIO and the
 * address says why.
 */
    .pushsection .rodata.cordon_guest, "a"

    .balign 4096
    .globl cordon_guest_user_page
cordon_guest_user_page:

/* LSTAR where `syscall` stays at CPL 3. All registers are the app's (rcx is
 * the return address, r11 the flags); the host answers by setting them
 * directly, so nothing here touches the stack. */
    .globl cordon_guest_syscall_user
cordon_guest_syscall_user:
    movabs %eax, {SYSCALL_MMIO}
    .globl cordon_guest_syscall_user_done
cordon_guest_syscall_user_done:
    ud2

/* Run once at start-up to learn at which privilege `syscall` arrives. */
    .globl cordon_guest_probe
cordon_guest_probe:
    syscall
    ud2

    .balign 4096
    .globl cordon_guest_kernel_page
cordon_guest_kernel_page:

/* One 16-byte stub per exception vector 0..31, a single store to the
 * vector's word of the exception MMIO page. The frame the CPU pushed (error
 * code where the vector has one, then rip, cs, rflags, rsp, ss) is the exit
 * frame; no register is touched. Every instruction of guest ring-0 code is
 * emulated on PVM, so one instruction in and one out is the whole budget. */
    .globl cordon_guest_vectors
cordon_guest_vectors:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    .balign 16
    movabs %eax, {EXCEPTION_MMIO} + 8 * \n
    .endr

/* The host resumes here with rsp at an iretq frame it has written. */
    .balign 16
    .globl cordon_guest_return
cordon_guest_return:
    iretq

/* LSTAR where `syscall` arrives at CPL 0: build an iretq frame on this
 * vCPU's kernel stack (found through KERNEL_GS_BASE) and leave. rcx and r11
 * hold the return address and flags, as the syscall ABI says. */
    .globl cordon_guest_syscall_kernel
cordon_guest_syscall_kernel:
    swapgs
    mov %rsp, %gs:{PERCPU_SCRATCH}
    mov %gs:{PERCPU_STACK_TOP}, %rsp
    push ${USER_DS}
    push %gs:{PERCPU_SCRATCH}
    push %r11
    push ${USER_CS}
    push %rcx
    swapgs
    movabs %eax, {KERNEL_SYSCALL_MMIO}
    jmp cordon_guest_return

    .globl cordon_guest_kernel_end
cordon_guest_kernel_end:
    .popsection
