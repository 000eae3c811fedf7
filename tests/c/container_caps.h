/* Narrows the calling process to what a container's root holds (docker's
 * and runsc's default capabilities) so that a native run, as root with
 * every capability, checks what the sandbox's root may do. Changes nothing
 * in the sandbox, nor for a caller without those capabilities. */
#ifndef CORDON_CONTAINER_CAPS_H
#define CORDON_CONTAINER_CAPS_H
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

static void narrow_to_container_caps(void) {
    const unsigned long long set =
        1ull << CAP_CHOWN | 1ull << CAP_DAC_OVERRIDE | 1ull << CAP_FSETID | 1ull << CAP_FOWNER | 1ull << CAP_MKNOD |
        1ull << CAP_NET_RAW | 1ull << CAP_SETGID | 1ull << CAP_SETUID | 1ull << CAP_SETFCAP | 1ull << CAP_SETPCAP |
        1ull << CAP_NET_BIND_SERVICE | 1ull << CAP_SYS_CHROOT | 1ull << CAP_KILL | 1ull << CAP_AUDIT_WRITE;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        return;
    for (int i = 0; i < 2; i++) {
        unsigned keep = (unsigned)(set >> (32 * i));
        d[i].effective &= keep;
        d[i].permitted &= keep;
        d[i].inheritable = 0;
    }
    syscall(SYS_capset, &h, d);
}
#endif
