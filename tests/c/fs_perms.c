/* Permissions as another user: root makes files and directories of several
 * modes, then a child that has become nobody (65534) finds EACCES and EPERM
 * where Linux gives them, and the owners and modes of what it creates in a
 * set-group-ID directory. Must start as root. See work_dir.h for the
 * arguments. */
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "work_dir.h"

#define NOBODY 65534
#define GROUP 1234

static struct stat st_of(const char *path) {
    struct stat st;
    memset(&st, 0, sizeof st);
    CHECK(lstat(path, &st) == 0);
    return st;
}

static void as_root_setup(void) {
    CHECK(getuid() == 0 && geteuid() == 0);
    CHECK(put_file("secret", "s", 1, 0600) == 0);
    CHECK(put_file("public", "p", 1, 0644) == 0);
    CHECK(put_file("exec", "#!/bin/sh\n", 10, 0755) == 0);
    CHECK(put_file("shared", "w", 1, 0644) == 0 && chmod("shared", 0666) == 0);
    CHECK(put_file("setid", "x", 1, 0644) == 0 && chmod("setid", 06777) == 0);
    CHECK(mkdir("rootdir", 0755) == 0);
    CHECK(mkdir("nosearch", 0766) == 0 && put_file("nosearch/f", "", 0, 0644) == 0);
    CHECK(mkdir("sticky", 0755) == 0 && chmod("sticky", 01777) == 0);
    CHECK(put_file("sticky/roots", "", 0, 0644) == 0 && chmod("sticky/roots", 0666) == 0);
    CHECK(mkdir("sgid", 0755) == 0 && chown("sgid", 0, GROUP) == 0 && chmod("sgid", 02777) == 0);
    CHECK(mode_of("sgid") == (S_IFDIR | 02777));
    /* Root's own creations in the set-group-ID directory. */
    CHECK(put_file("sgid/rootfile", "", 0, 0644) == 0);
    CHECK(st_of("sgid/rootfile").st_gid == GROUP && st_of("sgid/rootfile").st_uid == 0);
    CHECK(mkdir("sgid/rootsub", 0755) == 0);
    CHECK(st_of("sgid/rootsub").st_gid == GROUP && (mode_of("sgid/rootsub") & 07777) == 02755);
    /* Outside it, the creator's group. */
    CHECK(st_of("public").st_gid == 0);
    /* Root may do what the modes deny. */
    CHECK(chmod("nosearch", 0) == 0 && access("nosearch/f", F_OK) == 0 && chmod("nosearch", 0766) == 0);
    char buf[4];
    CHECK(chmod("secret", 0) == 0 && get_file("secret", buf, sizeof buf) == 1 && chmod("secret", 0600) == 0);
    printf("as root: files 0600 0644 0755 0666 06777, directories 0755 1777 2777; set-group-ID inherited\n");
}

static void as_nobody(void) {
    CHECK(setgroups(0, NULL) == 0);
    CHECK(setgid(NOBODY) == 0 && setuid(NOBODY) == 0);
    CHECK(getuid() == NOBODY && geteuid() == NOBODY && getegid() == NOBODY);
    CHECK_ERR(setuid(0), EPERM);
    char buf[8];
    /* Reading and writing by mode. */
    CHECK_ERR(open("secret", O_RDONLY), EACCES);
    CHECK_ERR(access("secret", R_OK), EACCES);
    CHECK(get_file("public", buf, sizeof buf) == 1);
    CHECK_ERR(open("public", O_WRONLY), EACCES);
    CHECK_ERR(open("public", O_RDONLY | O_TRUNC), EACCES);
    CHECK_ERR(truncate("public", 0), EACCES);
    CHECK_ERR(access("public", W_OK), EACCES);
    CHECK(access("exec", R_OK | X_OK) == 0);
    CHECK_ERR(access("public", X_OK), EACCES);
    /* Search permission along the path. */
    CHECK_ERR(access("nosearch/f", F_OK), EACCES);
    struct stat st;
    CHECK_ERR(stat("nosearch/f", &st), EACCES);
    CHECK(stat("nosearch", &st) == 0);
    /* Creating, removing and renaming in root's 0755 directories. */
    CHECK_ERR(open("rootdir/new", O_WRONLY | O_CREAT, 0644), EACCES);
    CHECK_ERR(mkdir("rootdir/new", 0755), EACCES);
    CHECK_ERR(mkfifo("rootdir/fifo", 0644), EACCES);
    CHECK_ERR(symlink("x", "rootdir/link"), EACCES);
    CHECK_ERR(unlink("public"), EACCES);
    CHECK_ERR(rename("public", "sticky/public"), EACCES);
    CHECK_ERR(rmdir("rootdir"), EACCES);
    /* The sticky directory: anyone creates, only the owner removes. */
    CHECK(put_file("sticky/mine", "m", 1, 0644) == 0);
    CHECK(st_of("sticky/mine").st_uid == NOBODY && st_of("sticky/mine").st_gid == NOBODY);
    CHECK_ERR(unlink("sticky/roots"), EPERM);
    CHECK_ERR(rename("sticky/roots", "sticky/taken"), EPERM);
    CHECK_ERR(rename("sticky/mine", "sticky/roots"), EPERM);
    CHECK(get_file("sticky/roots", buf, sizeof buf) == 0);
    CHECK(rename("sticky/mine", "sticky/mine2") == 0);
    CHECK(unlink("sticky/mine2") == 0);
    /* Attributes of files it does not own. */
    CHECK_ERR(chmod("public", 0666), EPERM);
    CHECK_ERR(chmod("shared", 0600), EPERM);
    CHECK_ERR(chown("public", NOBODY, NOBODY), EPERM);
    struct timespec times[2] = {{1000000000, 0}, {1000000000, 0}};
    CHECK_ERR(utimensat(AT_FDCWD, "shared", times, 0), EPERM);
    /* UTIME_NOW only needs write access; without it, EACCES. */
    CHECK(utimensat(AT_FDCWD, "shared", NULL, 0) == 0);
    struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    CHECK(utimensat(AT_FDCWD, "shared", now, 0) == 0);
    CHECK_ERR(utimensat(AT_FDCWD, "public", NULL, 0), EACCES);
    /* Its own files: chown to itself is allowed, to anyone else not. */
    CHECK(put_file("sticky/own", "", 0, 0644) == 0);
    CHECK(chown("sticky/own", NOBODY, NOBODY) == 0 && chown("sticky/own", -1, -1) == 0);
    CHECK_ERR(chown("sticky/own", 0, -1), EPERM);
    CHECK_ERR(chown("sticky/own", -1, 0), EPERM);
    CHECK(utimensat(AT_FDCWD, "sticky/own", times, 0) == 0);
    /* Writing a set-ID file it may write drops both set-ID bits. */
    int fd = open("setid", O_WRONLY);
    CHECK(fd >= 0 && write(fd, "y", 1) == 1);
    close(fd);
    /* The set-group-ID directory: new files take its group, new directories
     * its group and its set-group-ID bit. */
    CHECK(put_file("sgid/nobodyfile", "", 0, 0755) == 0);
    CHECK(st_of("sgid/nobodyfile").st_uid == NOBODY && st_of("sgid/nobodyfile").st_gid == GROUP);
    CHECK(mkdir("sgid/nobodydir", 0755) == 0);
    CHECK(st_of("sgid/nobodydir").st_gid == GROUP && (mode_of("sgid/nobodydir") & 07777) == 02755);
    /* Not in that group, it cannot set set-group-ID on its file: the bit is
     * silently dropped. */
    CHECK(chmod("sgid/nobodyfile", 02755) == 0 && (mode_of("sgid/nobodyfile") & 07777) == 0755);
    CHECK(chmod("sgid/nobodyfile", 04755) == 0 && (mode_of("sgid/nobodyfile") & 07777) == 04755);
    /* Nor give it to a group it is not in. */
    CHECK_ERR(chown("sgid/nobodyfile", -1, GROUP + 1), EPERM);
    printf("as nobody: EACCES by mode and search, EPERM in the sticky directory and on others' files\n");
}

int main(int argc, char **argv) {
    enter_work_dir(argc, argv);
    as_root_setup();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        as_nobody();
        int status = done();
        fflush(stdout);
        _exit(status);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* What the child's actions left, as root sees it. */
    CHECK((mode_of("setid") & 07777) == 0777);
    CHECK(access("sticky/mine2", F_OK) == -1 && access("sticky/roots", F_OK) == 0);
    CHECK(st_of("sgid/nobodyfile").st_gid == GROUP);
    printf("as root again: the set-ID bits of the written file are gone\n");
    return done();
}
