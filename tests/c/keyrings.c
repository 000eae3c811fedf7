/* Keyrings as a container's process has them: a session keyring of its
 * own (a fresh anonymous one first, so that the native run starts alike),
 * "user" keys added, updated, read, described, searched, linked,
 * unlinked and revoked, nested keyrings, request_key without an upcall,
 * fork sharing the session keyring, and the errors of each. Serial numbers
 * differ from run to run, so only how they relate is printed. */
#include <linux/keyctl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static long keyctl(int op, long a, long b, long c, long d) {
    return syscall(SYS_keyctl, op, a, b, c, d);
}

static long add_key(const char *type, const char *desc, const void *payload, size_t len, long ring) {
    return syscall(SYS_add_key, type, desc, payload, len, ring);
}

static void describe(const char *what, long id) {
    char buf[256] = {0};
    long n = keyctl(KEYCTL_DESCRIBE, id, (long)buf, sizeof buf, 0);
    printf("%s: %ld %s\n", what, n, buf);
}

int main(void) {
    long ses = keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0);
    CHECK(ses > 0);
    CHECK(keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0, 0, 0) == ses);
    describe("session", ses);
    describe("session by its special id", KEY_SPEC_SESSION_KEYRING);

    long k = add_key("user", "mykey", "secret", 6, KEY_SPEC_SESSION_KEYRING);
    CHECK(k > 0 && k != ses);
    describe("key", k);
    char buf[64];
    memset(buf, 0, sizeof buf);
    CHECK(keyctl(KEYCTL_READ, k, (long)buf, sizeof buf, 0) == 6 && memcmp(buf, "secret", 6) == 0);
    /* Too small a buffer: the size, nothing copied. */
    memset(buf, 'x', sizeof buf);
    CHECK(keyctl(KEYCTL_READ, k, (long)buf, 3, 0) == 6 && buf[0] == 'x');
    CHECK(keyctl(KEYCTL_READ, k, 0, 0, 0) == 6);
    /* So is a description. */
    memset(buf, 'x', sizeof buf);
    CHECK(keyctl(KEYCTL_DESCRIBE, k, (long)buf, 4, 0) == 24 && buf[0] == 'x');
    /* The same type and description again updates the key. */
    CHECK(add_key("user", "mykey", "other", 5, KEY_SPEC_SESSION_KEYRING) == k);
    CHECK(keyctl(KEYCTL_READ, k, (long)buf, sizeof buf, 0) == 5 && memcmp(buf, "other", 5) == 0);
    CHECK_OK(keyctl(KEYCTL_UPDATE, k, (long)"third", 5, 0));
    CHECK(keyctl(KEYCTL_READ, k, (long)buf, sizeof buf, 0) == 5 && memcmp(buf, "third", 5) == 0);
    /* The session keyring lists it. */
    int32_t ids[8];
    CHECK(keyctl(KEYCTL_READ, ses, (long)ids, sizeof ids, 0) == 4 && ids[0] == k);

    CHECK(keyctl(KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, (long)"user", (long)"mykey", 0) == k);
    CHECK_ERR(keyctl(KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, (long)"user", (long)"nokey", 0), ENOKEY);
    CHECK(syscall(SYS_request_key, "user", "mykey", NULL, 0) == k);
    CHECK_ERR(syscall(SYS_request_key, "user", "nokey", NULL, 0), ENOKEY);

    /* A keyring in the session keyring: searched through. */
    long inner = add_key("keyring", "inner", NULL, 0, KEY_SPEC_SESSION_KEYRING);
    CHECK(inner > 0);
    describe("inner keyring", inner);
    long deep = add_key("user", "deep", "x", 1, inner);
    CHECK(deep > 0);
    CHECK(keyctl(KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, (long)"user", (long)"deep", 0) == deep);
    CHECK_OK(keyctl(KEYCTL_LINK, k, inner, 0, 0));
    CHECK(keyctl(KEYCTL_READ, inner, (long)ids, sizeof ids, 0) == 8 && ids[0] == deep && ids[1] == k);
    CHECK_OK(keyctl(KEYCTL_UNLINK, k, inner, 0, 0));
    CHECK_ERR(keyctl(KEYCTL_UNLINK, k, inner, 0, 0), ENOENT);
    CHECK_OK(keyctl(KEYCTL_CLEAR, inner, 0, 0, 0));
    CHECK(keyctl(KEYCTL_READ, inner, (long)ids, sizeof ids, 0) == 0);
    CHECK_ERR(keyctl(KEYCTL_LINK, k, k, 0, 0), ENOTDIR);

    /* A child shares the session keyring. */
    fflush(stdout);
    pid_t p = fork();
    if (p == 0)
        _exit(keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0, 0, 0) == ses ? 0 : 1);
    int st;
    CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);

    long other = add_key("user", "other", "o", 1, KEY_SPEC_SESSION_KEYRING);
    CHECK_OK(keyctl(KEYCTL_REVOKE, other, 0, 0, 0));
    CHECK_ERR(keyctl(KEYCTL_READ, other, (long)buf, sizeof buf, 0), EKEYREVOKED);

    /* A named session keyring. Its owner may not search it without
     * possessing it, so joining the name again makes another. */
    long first = keyctl(KEYCTL_JOIN_SESSION_KEYRING, (long)"cordon-test-ring", 0, 0, 0);
    CHECK(first > 0 && first != ses);
    long named = keyctl(KEYCTL_JOIN_SESSION_KEYRING, (long)"cordon-test-ring", 0, 0, 0);
    CHECK(named > 0 && named != first);
    CHECK(keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0, 0, 0) == named);
    describe("named session", named);
    /* The key in the old session keyring is no longer possessed: its
     * owner may view it, not read or change it. */
    describe("key, not possessed", k);
    CHECK_ERR(keyctl(KEYCTL_READ, k, (long)buf, sizeof buf, 0), EACCES);
    CHECK_ERR(keyctl(KEYCTL_REVOKE, k, 0, 0, 0), EACCES);
    CHECK_ERR(keyctl(KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, (long)"user", (long)"mykey", 0), ENOKEY);

    /* Errors. */
    CHECK_ERR(add_key("bogus", "d", "x", 1, KEY_SPEC_SESSION_KEYRING), ENODEV);
    CHECK_ERR(add_key(".internal", "d", "x", 1, KEY_SPEC_SESSION_KEYRING), EPERM);
    CHECK_ERR(add_key("user", "", "x", 1, KEY_SPEC_SESSION_KEYRING), EINVAL);
    CHECK_ERR(add_key("user", "d", NULL, 0, KEY_SPEC_SESSION_KEYRING), EINVAL);
    CHECK_ERR(add_key("keyring", "d", "x", 1, KEY_SPEC_SESSION_KEYRING), EINVAL);
    static char big[32768];
    CHECK_ERR(add_key("user", "d", big, sizeof big, KEY_SPEC_SESSION_KEYRING), EINVAL);
    CHECK_ERR(add_key("user", "d", (void *)8, 1, KEY_SPEC_SESSION_KEYRING), EFAULT);
    CHECK_ERR(keyctl(KEYCTL_READ, 2, (long)buf, sizeof buf, 0), ENOKEY);
    CHECK_ERR(keyctl(KEYCTL_DESCRIBE, 2, (long)buf, sizeof buf, 0), ENOKEY);
    CHECK_ERR(keyctl(99, 0, 0, 0, 0), EOPNOTSUPP);
    return done();
}
