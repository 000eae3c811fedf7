/* Extended attributes in the user namespace on a writable file system:
 * set, get, list and remove, by path, without following links and by
 * descriptor, with every error Linux gives. See work_dir.h for the
 * arguments. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "work_dir.h"

/* Prints the user.* names listxattr gives for `path`, sorted (the order is
 * the file system's own), and returns how many there were. */
static int print_user_names(const char *label, const char *path) {
    char list[4096];
    ssize_t n = listxattr(path, list, sizeof list);
    CHECK(n >= 0);
    const char *names[64];
    int count = 0;
    for (ssize_t i = 0; i < n && count < 64; i += strlen(list + i) + 1)
        if (strncmp(list + i, "user.", 5) == 0)
            names[count++] = list + i;
    for (int i = 0; i < count; i++)
        for (int j = i + 1; j < count; j++)
            if (strcmp(names[j], names[i]) < 0) {
                const char *t = names[i];
                names[i] = names[j];
                names[j] = t;
            }
    printf("%s:", label);
    for (int i = 0; i < count; i++)
        printf(" %s", names[i]);
    printf("\n");
    return count;
}

static void basics(void) {
    CHECK(put_file("f", "", 0, 0644) == 0);
    char buf[2048];
    CHECK_ERR(getxattr("f", "user.a", buf, sizeof buf), ENODATA);
    CHECK(print_user_names("new file", "f") == 0);
    CHECK(setxattr("f", "user.a", "alpha", 5, 0) == 0);
    CHECK(setxattr("f", "user.b", "", 0, 0) == 0);
    CHECK(setxattr("f", "user.c", "\0binary\n", 8, 0) == 0);
    /* Size 0 asks for the size; a short buffer is ERANGE. */
    CHECK(getxattr("f", "user.a", NULL, 0) == 5);
    CHECK(getxattr("f", "user.a", buf, 0) == 5);
    CHECK_ERR(getxattr("f", "user.a", buf, 4), ERANGE);
    memset(buf, 0, sizeof buf);
    CHECK(getxattr("f", "user.a", buf, sizeof buf) == 5 && memcmp(buf, "alpha", 5) == 0);
    CHECK(getxattr("f", "user.b", buf, sizeof buf) == 0);
    CHECK(getxattr("f", "user.c", buf, sizeof buf) == 8 && memcmp(buf, "\0binary\n", 8) == 0);
    CHECK(print_user_names("after three sets", "f") == 3);
    /* listxattr's size query and ERANGE; names are NUL-terminated. */
    ssize_t total = listxattr("f", NULL, 0);
    CHECK(total >= 21);
    CHECK_ERR(listxattr("f", buf, 3), ERANGE);
    CHECK(listxattr("f", buf, total) == total && buf[total - 1] == 0);
    /* XATTR_CREATE and XATTR_REPLACE. */
    CHECK_ERR(setxattr("f", "user.a", "x", 1, XATTR_CREATE), EEXIST);
    CHECK_ERR(setxattr("f", "user.z", "x", 1, XATTR_REPLACE), ENODATA);
    CHECK(setxattr("f", "user.a", "replaced", 8, XATTR_REPLACE) == 0);
    CHECK(getxattr("f", "user.a", buf, sizeof buf) == 8 && memcmp(buf, "replaced", 8) == 0);
    CHECK(setxattr("f", "user.d", "d", 1, XATTR_CREATE) == 0);
    CHECK_ERR(setxattr("f", "user.e", "e", 1, 0x10), EINVAL);
    /* A value replaced by a shorter one. */
    CHECK(setxattr("f", "user.a", "ab", 2, 0) == 0);
    CHECK(getxattr("f", "user.a", NULL, 0) == 2);
    /* removexattr. */
    CHECK(removexattr("f", "user.b") == 0);
    CHECK_ERR(removexattr("f", "user.b"), ENODATA);
    CHECK_ERR(getxattr("f", "user.b", buf, sizeof buf), ENODATA);
    CHECK(print_user_names("after replace and remove", "f") == 3);
    /* A larger value. */
    char big[1500];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)(i * 7);
    CHECK(setxattr("f", "user.big", big, sizeof big, 0) == 0);
    CHECK(getxattr("f", "user.big", buf, sizeof buf) == sizeof big && memcmp(buf, big, sizeof big) == 0);
    printf("user xattrs: set, size query, ERANGE, XATTR_CREATE EEXIST, XATTR_REPLACE ENODATA, remove\n");
}

static void names_and_kinds(void) {
    char buf[256];
    char name[300] = "user.";
    memset(name + 5, 'n', 250);
    name[255] = 0;
    CHECK(setxattr("f", name, "v", 1, 0) == 0);
    CHECK(getxattr("f", name, buf, sizeof buf) == 1);
    CHECK(removexattr("f", name) == 0);
    memset(name + 5, 'n', 251);
    name[256] = 0;
    CHECK_ERR(setxattr("f", name, "v", 1, 0), ERANGE);
    CHECK_ERR(getxattr("f", name, buf, sizeof buf), ERANGE);
    CHECK_ERR(setxattr("f", "", "v", 1, 0), ERANGE);
    CHECK_ERR(setxattr("f", "nonamespace", "v", 1, 0), EOPNOTSUPP);
    CHECK_ERR(getxattr("f", "bogus.x", buf, sizeof buf), EOPNOTSUPP);
    static char huge[65537];
    CHECK_ERR(setxattr("f", "user.huge", huge, sizeof huge, 0), E2BIG);
    CHECK_ERR(setxattr("none", "user.a", "v", 1, 0), ENOENT);
    CHECK_ERR(getxattr("none", "user.a", buf, sizeof buf), ENOENT);
    /* Directories carry user xattrs; symlinks and FIFOs do not. */
    CHECK(mkdir("d", 0755) == 0);
    CHECK(setxattr("d", "user.dir", "yes", 3, 0) == 0);
    CHECK(getxattr("d", "user.dir", buf, sizeof buf) == 3);
    CHECK(symlink("f", "l") == 0);
    CHECK_ERR(lsetxattr("l", "user.a", "v", 1, 0), EPERM);
    CHECK_ERR(lgetxattr("l", "user.a", buf, sizeof buf), ENODATA);
    /* Through the link, the target's. */
    CHECK(getxattr("l", "user.a", buf, sizeof buf) == 2);
    CHECK(setxattr("l", "user.via_link", "1", 1, 0) == 0);
    CHECK(getxattr("f", "user.via_link", buf, sizeof buf) == 1);
    CHECK(llistxattr("l", buf, sizeof buf) >= 0);
    CHECK(mkfifo("p", 0644) == 0);
    CHECK_ERR(setxattr("p", "user.a", "v", 1, 0), EPERM);
    /* By descriptor, O_PATH ones excepted. */
    int fd = open("f", O_RDONLY);
    CHECK(fsetxattr(fd, "user.fd", "fd", 2, 0) == 0);
    CHECK(fgetxattr(fd, "user.fd", buf, sizeof buf) == 2 && memcmp(buf, "fd", 2) == 0);
    CHECK(flistxattr(fd, NULL, 0) == listxattr("f", NULL, 0));
    CHECK(fremovexattr(fd, "user.fd") == 0);
    CHECK_ERR(fgetxattr(fd, "user.fd", buf, sizeof buf), ENODATA);
    close(fd);
    fd = open("f", O_PATH);
    CHECK_ERR(fgetxattr(fd, "user.a", buf, sizeof buf), EBADF);
    CHECK_ERR(fsetxattr(fd, "user.a", "v", 1, 0), EBADF);
    close(fd);
    CHECK_ERR(fgetxattr(-1, "user.a", buf, sizeof buf), EBADF);
    /* Attributes follow the inode: through a hard link, after a rename, and
     * not onto a copy. */
    CHECK(link("f", "hard") == 0 && rename("f", "moved") == 0);
    CHECK(getxattr("hard", "user.a", buf, sizeof buf) == 2);
    CHECK(getxattr("moved", "user.via_link", buf, sizeof buf) == 1);
    CHECK(print_user_names("after link and rename", "hard") == 5);
    printf("xattr names: 255 bytes fine, longer ERANGE, no namespace EOPNOTSUPP; EPERM on links and FIFOs\n");
}

int main(int argc, char **argv) {
    enter_work_dir(argc, argv);
    basics();
    names_and_kinds();
    return done();
}
