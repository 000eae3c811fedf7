/* Changing a prepared tree: in the sandbox it is part of the read-only
 * lower layer of the overlay root, so every change here is a copy-up, a
 * whiteout or an opaque directory; natively it is a plain copy of the
 * tree. Both must behave alike.
 *
 * argv[1] holds: data (10000 bytes, byte i = i % 251, mode 0640), keep
 * ("keep me"), gone, hard1 and hard2 (two names of one file, "hard"),
 * link -> data, dir/ (a = "a", sub/deep = "deep"), full/x, and big/ holding
 * l0 ... l1999. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "t.h"

static char bufs[4][4096];
static int next;
static const char *base;

static const char *at(const char *name) {
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", base, name);
    return b;
}

/* The first `n` bytes of a file, as a string. */
static const char *head(const char *path, size_t n) {
    static char s[256];
    s[0] = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return "(missing)";
    ssize_t r = read(fd, s, n < sizeof s - 1 ? n : sizeof s - 1);
    s[r > 0 ? r : 0] = 0;
    close(fd);
    return s;
}

static void write_at(const char *path, const char *text, off_t off) {
    int fd = open(path, O_WRONLY);
    CHECK(fd >= 0);
    CHECK(pwrite(fd, text, strlen(text), off) == (ssize_t)strlen(text));
    CHECK_OK(close(fd));
}

static int listed(const char *dir, const char *name) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, name) == 0;
    if (d)
        closedir(d);
    return n;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static void copy_up(void) {
    struct stat before, after;
    CHECK_OK(stat(at("data"), &before));
    write_at(at("data"), "XY", 1);
    CHECK_OK(stat(at("data"), &after));
    CHECK(after.st_ino == before.st_ino);
    CHECK(after.st_dev == before.st_dev);
    CHECK((after.st_mode & 07777) == 0640);
    CHECK(after.st_size == 10000);
    unsigned char b[10000];
    int fd = open(at("data"), O_RDONLY);
    CHECK(read(fd, b, sizeof b) == 10000);
    close(fd);
    int same = b[0] == 0 && b[1] == 'X' && b[2] == 'Y';
    for (int i = 3; i < 10000; i++)
        same &= b[i] == i % 251;
    CHECK(same);
    /* Through a symlink, and O_APPEND. */
    fd = open(at("link"), O_WRONLY | O_APPEND);
    CHECK(fd >= 0);
    CHECK(write(fd, "end", 3) == 3);
    close(fd);
    CHECK_OK(stat(at("data"), &after));
    CHECK(after.st_size == 10003 && after.st_ino == before.st_ino);

    /* Metadata alone copies up too. */
    CHECK_OK(stat(at("keep"), &before));
    CHECK_OK(chmod(at("keep"), 0604));
    struct timespec times[2] = {{1000000000, 5}, {1200000000, 7}};
    CHECK_OK(utimensat(AT_FDCWD, at("keep"), times, 0));
    CHECK_OK(stat(at("keep"), &after));
    CHECK(after.st_ino == before.st_ino);
    CHECK((after.st_mode & 07777) == 0604);
    CHECK(after.st_mtim.tv_sec == 1200000000 && after.st_mtim.tv_nsec == 7);
    CHECK(after.st_atim.tv_sec == 1000000000 && after.st_atim.tv_nsec == 5);
    CHECK(strcmp(head(at("keep"), 100), "keep me") == 0);
    CHECK_OK(truncate(at("keep"), 4));
    CHECK(strcmp(head(at("keep"), 100), "keep") == 0);
    /* O_TRUNC of a lower file. */
    fd = open(at("dir/a"), O_WRONLY | O_TRUNC);
    CHECK(fd >= 0);
    CHECK(write(fd, "A2", 2) == 2);
    close(fd);
    CHECK(strcmp(head(at("dir/a"), 100), "A2") == 0);
    printf("copy-up: data, mode, times and inode number kept\n");
}

static void whiteouts(void) {
    CHECK_OK(unlink(at("gone")));
    struct stat st;
    CHECK_ERR(stat(at("gone"), &st), ENOENT);
    CHECK(listed(base, "gone") == 0);
    CHECK_ERR(unlink(at("gone")), ENOENT);
    int fd = open(at("gone"), O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(stat(at("gone"), &st));
    CHECK(st.st_size == 0 && (st.st_mode & 0777) == 0600);
    CHECK(listed(base, "gone") == 1);

    /* A lower directory counts its lower entries. */
    CHECK_ERR(rmdir(at("full")), ENOTEMPTY);
    CHECK_OK(unlink(at("full/x")));
    CHECK(count_entries(at("full")) == 0);
    CHECK_OK(rmdir(at("full")));
    CHECK_ERR(stat(at("full"), &st), ENOENT);
    /* Made again, it is a new, empty (opaque) directory. */
    CHECK_OK(mkdir(at("full"), 0700));
    CHECK(count_entries(at("full")) == 0);
    CHECK_ERR(stat(at("full/x"), &st), ENOENT);
    /* A lower directory replaced by a file. */
    CHECK_OK(unlink(at("dir/sub/deep")));
    CHECK_OK(rmdir(at("dir/sub")));
    fd = open(at("dir/sub"), O_WRONLY | O_CREAT | O_EXCL, 0644);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(stat(at("dir/sub"), &st));
    CHECK(S_ISREG(st.st_mode));
    CHECK_OK(unlink(at("dir/sub")));
    printf("whiteouts and opaque directories\n");
}

static void renames(void) {
    struct stat before, after;
    /* A lower directory moves whole, inode number and all. */
    CHECK_OK(mkdir(at("dir/sub"), 0755));
    int fd = open(at("dir/sub/new"), O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(stat(at("dir"), &before));
    CHECK_OK(rename(at("dir"), at("dir2")));
    CHECK_OK(stat(at("dir2"), &after));
    CHECK(after.st_ino == before.st_ino);
    CHECK_ERR(stat(at("dir"), &before), ENOENT);
    CHECK(strcmp(head(at("dir2/a"), 100), "A2") == 0);
    CHECK_OK(stat(at("dir2/sub/new"), &after));
    CHECK(count_entries(at("dir2")) == 2);
    /* A file over a lower file, and a name made where one moved away. */
    CHECK_OK(stat(at("hard1"), &before));
    CHECK_OK(rename(at("keep"), at("dir2/a")));
    CHECK(strcmp(head(at("dir2/a"), 100), "keep") == 0);
    CHECK_ERR(stat(at("keep"), &after), ENOENT);
    CHECK_OK(mkdir(at("dir"), 0755));
    CHECK(count_entries(at("dir")) == 0);
    /* An empty directory over a lower one that was emptied. */
    CHECK_OK(unlink(at("dir2/sub/new")));
    CHECK_OK(rename(at("dir"), at("dir2/sub")));
    CHECK(count_entries(at("dir2/sub")) == 0);
    CHECK_ERR(rename(at("big"), at("dir2")), ENOTEMPTY);
    printf("renames\n");
}

static void hard_links(void) {
    struct stat a, b;
    CHECK_OK(link(at("data"), at("data_link")));
    CHECK_OK(stat(at("data"), &a));
    CHECK_OK(stat(at("data_link"), &b));
    CHECK(a.st_ino == b.st_ino && a.st_nlink == 2 && b.st_nlink == 2);
    write_at(at("data_link"), "LINK", 0);
    CHECK(strcmp(head(at("data"), 4), "LINK") == 0);
    /* Two names of one lower file stay one file. */
    CHECK_OK(stat(at("hard1"), &a));
    CHECK_OK(stat(at("hard2"), &b));
    CHECK(a.st_ino == b.st_ino);
    write_at(at("hard1"), "H", 0);
    CHECK(strcmp(head(at("hard2"), 100), "Hard") == 0);
    CHECK_OK(stat(at("hard1"), &a));
    CHECK_OK(stat(at("hard2"), &b));
    CHECK(a.st_ino == b.st_ino);
    printf("hard links\n");
}

#define LOWER 2000
#define TOTAL 10000

/* readdir of a big merged directory while names come and go: every name
 * that was there throughout is seen exactly once, none twice, and seekdir
 * to a telldir position continues from there. */
static void big_directory(void) {
    char p[256];
    for (int i = 0; i < TOTAL - LOWER; i++) {
        snprintf(p, sizeof p, "big/u%d", i);
        int fd = open(at(p), O_WRONLY | O_CREAT | O_EXCL, 0644);
        CHECK(fd >= 0);
        close(fd);
    }
    /* Some lower files copied up before the listing starts. */
    for (int i = 0; i < LOWER; i += 7) {
        snprintf(p, sizeof p, "big/l%d", i);
        write_at(at(p), "c", 0);
    }
    CHECK(count_entries(at("big")) == TOTAL);
    /* seen[k]: times name k was listed; names l0..l1999 are 0..1999, u0...
     * are 2000..9999, new ones n0... are 10000 on. */
    static int seen[TOTAL + 2000], removed[TOTAL];
    DIR *d = opendir(at("big"));
    CHECK(d != NULL);
    if (!d)
        return;
    long marks[64];
    char after_mark[64][32];
    /* The checks made in the loop are counted here: how many there are
     * depends on the order names come in. */
    int nmarks = 0, n = 0, made = 0, failed = 0;
    struct dirent *e;
    for (;;) {
        long mark = telldir(d);
        if (!(e = readdir(d)))
            break;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        int k = -1;
        if (e->d_name[0] == 'l')
            k = atoi(e->d_name + 1);
        else if (e->d_name[0] == 'u')
            k = LOWER + atoi(e->d_name + 1);
        else if (e->d_name[0] == 'n')
            k = TOTAL + atoi(e->d_name + 1);
        if (k >= 0)
            seen[k]++;
        else
            failed++;
        if (n % 200 == 0 && nmarks < 64) {
            marks[nmarks] = mark;
            snprintf(after_mark[nmarks++], sizeof after_mark[0], "%s", e->d_name);
        }
        if (n % 10 == 0 && made < 2000) {
            /* Meanwhile: remove a lower and an upper name, copy a lower
             * file up, add a name. */
            int victim = (n * 7919) % TOTAL;
            if (!removed[victim]) {
                removed[victim] = 1;
                if (victim < LOWER)
                    snprintf(p, sizeof p, "big/l%d", victim);
                else
                    snprintf(p, sizeof p, "big/u%d", victim - LOWER);
                failed += unlink(at(p)) != 0;
            }
            int up = (n * 104729) % LOWER;
            if (!removed[up]) {
                snprintf(p, sizeof p, "big/l%d", up);
                failed += truncate(at(p), 1) != 0;
            }
            snprintf(p, sizeof p, "big/n%d", made++);
            int fd = open(at(p), O_WRONLY | O_CREAT | O_EXCL, 0644);
            failed += fd < 0;
            close(fd);
        }
        n++;
    }
    int twice = 0, missed = 0;
    for (int k = 0; k < TOTAL + 2000; k++) {
        twice += seen[k] > 1;
        missed += k < TOTAL && !removed[k] && seen[k] != 1;
    }
    CHECK(failed == 0);
    CHECK(twice == 0);
    CHECK(missed == 0);
    /* seekdir back to each mark: the name read after it comes again,
     * unless it was removed since. */
    int again = 0, checked = 0;
    for (int i = 0; i < nmarks; i++) {
        seekdir(d, marks[i]);
        e = readdir(d);
        snprintf(p, sizeof p, "big/%s", after_mark[i]);
        struct stat st;
        if (stat(at(p), &st) == 0) {
            checked++;
            again += e && strcmp(e->d_name, after_mark[i]) == 0;
        }
    }
    CHECK(again == checked && checked > 10);
    closedir(d);
    printf("readdir of %d entries while names come and go: none twice, none missed, seekdir ok\n", TOTAL);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: overlay PREPARED-TREE\n");
        return 2;
    }
    base = argv[1];
    copy_up();
    whiteouts();
    renames();
    hard_links();
    big_directory();
    return done();
}
