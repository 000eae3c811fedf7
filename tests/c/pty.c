/* Pseudo-terminals: posix_openpt/grantpt/unlockpt/ptsname and the devpts
 * directory, the line discipline (termios defaults, canonical editing and
 * echo, input and output translation, raw reads with VMIN/VTIME, flushing,
 * poll on both ends), window sizes, and the controlling terminal of a
 * session: acquiring it, the foreground group, ^C/^Z/^\ as signals,
 * SIGTTIN/SIGTTOU for background groups, /dev/tty, and hang-up when the
 * master closes. Every controlling-terminal case runs in a new session of
 * its own, so the caller's terminal (if any) plays no part. */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "t.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

/* Linux hands what the master writes to the slave's line discipline
 * asynchronously; a poll of the slave waits for that, so the signals its
 * characters raise are sent before it returns. */
static void settle(int slave) {
    struct pollfd p = {slave, POLLIN, 0};
    poll(&p, 1, 0);
}

/* The slave of the pair a test works on: drain() settles it first, so that
 * the echoes of input written before are with the master. */
static int cur_slave = -1;

/* A fresh pair: the master and its unlocked slave, opened without
 * becoming anyone's controlling terminal. */
static int open_pair(int *slave) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0) return -1;
    *slave = open(ptsname(m), O_RDWR | O_NOCTTY);
    cur_slave = *slave;
    return *slave < 0 ? -1 : m;
}

/* Everything readable on `fd` now, without waiting (the fd is made
 * non-blocking for the call). */
static int drain(int fd, char *buf, int size) {
    if (cur_slave >= 0) settle(cur_slave);
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    int n = 0;
    for (;;) {
        int r = read(fd, buf + n, size - 1 - n);
        if (r <= 0) break;
        n += r;
    }
    fcntl(fd, F_SETFL, fl);
    buf[n] = 0;
    return n;
}

static int put(int fd, const char *s) { return write(fd, s, strlen(s)) == (ssize_t)strlen(s); }


/* Runs `f` in a child that starts a session of its own; its exit code. */
static int in_session(int (*f)(void)) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        t_failures = 0;
        if (setsid() < 0) _exit(100);
        _exit(f());
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    if (WIFSIGNALED(st)) return 200 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

static void openpt_and_names(void) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    CHECK(m >= 0);
    CHECK_OK(grantpt(m));
    char *name = ptsname(m);
    CHECK(name && strncmp(name, "/dev/pts/", 9) == 0);
    int n = -1;
    CHECK_OK(ioctl(m, TIOCGPTN, &n));
    char want[32];
    snprintf(want, sizeof want, "/dev/pts/%d", n);
    CHECK(name && strcmp(name, want) == 0);
    /* Locked until unlockpt. */
    int lock = 0;
    CHECK_OK(ioctl(m, TIOCGPTLCK, &lock));
    CHECK(lock == 1);
    CHECK_ERR(open(want, O_RDWR | O_NOCTTY), EIO);
    CHECK_OK(unlockpt(m));
    CHECK_OK(ioctl(m, TIOCGPTLCK, &lock));
    CHECK(lock == 0);
    int s = open(want, O_RDWR | O_NOCTTY);
    CHECK(s >= 0);
    CHECK(isatty(s) && isatty(m));
    struct stat ss, ps, ms;
    CHECK_OK(fstat(s, &ss));
    CHECK_OK(stat(want, &ps));
    CHECK_OK(fstat(m, &ms));
    CHECK(S_ISCHR(ss.st_mode) && S_ISCHR(ms.st_mode));
    CHECK(ss.st_rdev == ps.st_rdev && ss.st_ino == ps.st_ino);
    CHECK(ss.st_rdev != ms.st_rdev);
    CHECK(major(ss.st_rdev) == 136 && (int)minor(ss.st_rdev) == n);
    CHECK(major(ms.st_rdev) == 5 && minor(ms.st_rdev) == 2);
    /* The slave's name as ttyname finds it. */
    char *tn = ttyname(s);
    CHECK(tn && strcmp(tn, want) == 0);
    /* TIOCGPTPEER opens the same slave. */
    int peer = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY);
    CHECK(peer >= 0);
    struct stat es;
    CHECK_OK(fstat(peer, &es));
    CHECK(es.st_rdev == ss.st_rdev);
    CHECK_ERR(ioctl(s, TIOCGPTN, &n), ENOTTY);
    CHECK_ERR(ioctl(s, TIOCGPTPEER, O_RDWR), EIO);
    /* devpts lists the live slaves. */
    char own[16];
    snprintf(own, sizeof own, "%d", n);
    int seen = 0;
    DIR *d = opendir("/dev/pts");
    CHECK(d != NULL);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, own) == 0) seen = 1;
    if (d) closedir(d);
    CHECK(seen);
    /* Another open of /dev/ptmx is another pair. */
    int m2 = posix_openpt(O_RDWR | O_NOCTTY);
    int n2 = -1;
    CHECK_OK(ioctl(m2, TIOCGPTN, &n2));
    CHECK(n2 != n);
    close(m2);
    close(peer);
    close(s);
    close(m);
    /* Not terminals. */
    int pp[2];
    CHECK_OK(pipe(pp));
    CHECK_ERR(ioctl(pp[0], TIOCGPTN, &n), ENOTTY);
    CHECK_ERR(tcgetattr(pp[0], &(struct termios){0}), ENOTTY);
    close(pp[0]);
    close(pp[1]);
}

static void termios_defaults(void) {
    int s, m = open_pair(&s);
    CHECK(m >= 0);
    struct termios t;
    CHECK_OK(tcgetattr(s, &t));
    CHECK((t.c_lflag & (ICANON | ECHO | ECHOE | ECHOK | ISIG | IEXTEN | ECHOCTL | ECHOKE)) ==
          (ICANON | ECHO | ECHOE | ECHOK | ISIG | IEXTEN | ECHOCTL | ECHOKE));
    CHECK((t.c_iflag & (ICRNL | IXON)) == (ICRNL | IXON));
    CHECK((t.c_oflag & (OPOST | ONLCR)) == (OPOST | ONLCR));
    CHECK(t.c_cc[VINTR] == 3 && t.c_cc[VQUIT] == 034 && t.c_cc[VERASE] == 0177 && t.c_cc[VKILL] == 025);
    CHECK(t.c_cc[VEOF] == 4 && t.c_cc[VSUSP] == 032 && t.c_cc[VWERASE] == 027 && t.c_cc[VMIN] == 1);
    CHECK(cfgetospeed(&t) == B38400);
    /* The master shows and sets the slave's settings. */
    struct termios mt;
    CHECK_OK(tcgetattr(m, &mt));
    CHECK(mt.c_lflag == t.c_lflag && mt.c_iflag == t.c_iflag);
    mt.c_lflag &= ~ECHO;
    CHECK_OK(tcsetattr(m, TCSANOW, &mt));
    CHECK_OK(tcgetattr(s, &t));
    CHECK(!(t.c_lflag & ECHO));
    close(s);
    close(m);
}

static void canonical_editing(void) {
    int s, m = open_pair(&s);
    char buf[256];
    /* Erase, then a line; echo shows the erase as backspace-space-backspace. */
    CHECK(put(m, "abc\177d\n"));
    CHECK(read(s, buf, sizeof buf) == 4 && memcmp(buf, "abd\n", 4) == 0);
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "abc\b \bd\r\n") == 0);
    /* Kill erases the line (ECHOKE erases it on screen too). */
    CHECK(put(m, "xyz\025ok\n"));
    CHECK(read(s, buf, sizeof buf) == 3 && memcmp(buf, "ok\n", 3) == 0);
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "xyz\b \b\b \b\b \bok\r\n") == 0);
    /* Word erase. */
    CHECK(put(m, "one two\027three\n"));
    memset(buf, 0, sizeof buf);
    CHECK(read(s, buf, sizeof buf) == 10 && memcmp(buf, "one three\n", 10) == 0);
    drain(m, buf, sizeof buf);
    /* Erase stops at the start of the line. */
    CHECK(put(m, "\177\177q\n"));
    CHECK(read(s, buf, sizeof buf) == 2 && memcmp(buf, "q\n", 2) == 0);
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "q\r\n") == 0);
    /* Control characters echo as ^X; erasing one takes both columns. */
    CHECK(put(m, "\001\177z\n"));
    CHECK(read(s, buf, sizeof buf) == 2 && memcmp(buf, "z\n", 2) == 0);
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "^A\b \b\b \bz\r\n") == 0);
    /* EOF ends a line without a newline; alone, it reads as end of file. */
    CHECK(put(m, "ab\004"));
    CHECK(read(s, buf, sizeof buf) == 2 && memcmp(buf, "ab", 2) == 0);
    CHECK(put(m, "\004"));
    CHECK(read(s, buf, sizeof buf) == 0);
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "ab") == 0);
    /* A read takes at most one line, and what is left of it later. */
    CHECK(put(m, "first\nsecond\n"));
    CHECK(read(s, buf, 3) == 3 && memcmp(buf, "fir", 3) == 0);
    CHECK(read(s, buf, sizeof buf) == 3 && memcmp(buf, "st\n", 3) == 0);
    CHECK(read(s, buf, sizeof buf) == 7 && memcmp(buf, "second\n", 7) == 0);
    drain(m, buf, sizeof buf);
    /* Literal next. */
    CHECK(put(m, "a\026\177b\n"));
    CHECK(read(s, buf, sizeof buf) == 4 && memcmp(buf, "a\177b\n", 4) == 0);
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "a^\b^?b\r\n") == 0);

    /* Input translation: CR to NL by default, NL to CR, CR ignored. */
    struct termios t, orig;
    tcgetattr(s, &orig);
    CHECK(put(m, "cr\r"));
    CHECK(read(s, buf, sizeof buf) == 3 && memcmp(buf, "cr\n", 3) == 0);
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "cr\r\n") == 0);
    t = orig;
    t.c_iflag |= IGNCR;
    tcsetattr(s, TCSANOW, &t);
    CHECK(put(m, "ig\r\n"));
    CHECK(read(s, buf, sizeof buf) == 3 && memcmp(buf, "ig\n", 3) == 0);
    t = orig;
    t.c_iflag = (t.c_iflag & ~ICRNL) | INLCR;
    t.c_lflag &= ~ICANON;
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    tcsetattr(s, TCSANOW, &t);
    drain(m, buf, sizeof buf);
    CHECK(put(m, "x\n"));
    CHECK(read(s, buf, sizeof buf) == 2 && memcmp(buf, "x\r", 2) == 0);
    /* ECHONL echoes newlines with ECHO off. */
    t = orig;
    t.c_lflag = (t.c_lflag & ~ECHO) | ECHONL;
    tcsetattr(s, TCSANOW, &t);
    drain(m, buf, sizeof buf);
    CHECK(put(m, "quiet\n"));
    CHECK(read(s, buf, sizeof buf) == 6);
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "\r\n") == 0);
    /* ECHOK without ECHOKE: the kill character and a newline. */
    t = orig;
    t.c_lflag &= ~ECHOKE;
    tcsetattr(s, TCSANOW, &t);
    CHECK(put(m, "gone\025k\n"));
    CHECK(read(s, buf, sizeof buf) == 2);
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "gone^U\r\nk\r\n") == 0);

    /* Output: NL becomes CR NL under OPOST|ONLCR, nothing changes
     * without OPOST. */
    tcsetattr(s, TCSANOW, &orig);
    CHECK(put(s, "a\nb"));
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "a\r\nb") == 0);
    t = orig;
    t.c_oflag &= ~OPOST;
    tcsetattr(s, TCSANOW, &t);
    CHECK(put(s, "a\nb"));
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "a\nb") == 0);
    close(s);
    close(m);
}

static void raw_reads_and_poll(void) {
    int s, m = open_pair(&s);
    char buf[256];
    struct termios t;
    tcgetattr(s, &t);
    /* Canonical: a partial line is not readable yet. */
    CHECK(put(m, "par"));
    struct pollfd p = {s, POLLIN, 0};
    CHECK(poll(&p, 1, 0) == 0);
    int n = -1;
    CHECK_OK(ioctl(s, FIONREAD, &n));
    CHECK(n == 0);
    fcntl(s, F_SETFL, O_NONBLOCK);
    CHECK_ERR(read(s, buf, sizeof buf), EAGAIN);
    fcntl(s, F_SETFL, 0);
    CHECK(put(m, "t\n"));
    CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLIN));
    CHECK_OK(ioctl(s, FIONREAD, &n));
    CHECK(n == 5);
    /* The master is readable with the echo, and writable. */
    struct pollfd mp = {m, POLLIN | POLLOUT, 0};
    CHECK(poll(&mp, 1, 0) == 1 && (mp.revents & POLLIN) && (mp.revents & POLLOUT));
    /* Flushing: the slave's input. */
    CHECK_OK(tcflush(s, TCIFLUSH));
    CHECK_OK(ioctl(s, FIONREAD, &n));
    CHECK(n == 0);
    /* And the master's input: what the slave wrote. */
    CHECK(put(s, "out"));
    CHECK_OK(tcflush(m, TCIFLUSH));
    fcntl(m, F_SETFL, O_NONBLOCK);
    CHECK_ERR(read(m, buf, sizeof buf), EAGAIN);
    fcntl(m, F_SETFL, 0);

    /* Raw, VMIN=0 VTIME=0: a read never waits. */
    cfmakeraw(&t);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    CHECK_OK(tcsetattr(s, TCSANOW, &t));
    CHECK(read(s, buf, sizeof buf) == 0);
    fcntl(s, F_SETFL, O_NONBLOCK);
    CHECK(read(s, buf, sizeof buf) == 0);
    fcntl(s, F_SETFL, 0);
    CHECK(put(m, "raw\r\003"));
    settle(s);
    CHECK(read(s, buf, sizeof buf) == 5 && memcmp(buf, "raw\r\003", 5) == 0);
    CHECK(drain(m, buf, sizeof buf) == 0);
    /* VMIN=0 VTIME=1: nothing within a tenth of a second reads as 0. */
    t.c_cc[VTIME] = 1;
    CHECK_OK(tcsetattr(s, TCSANOW, &t));
    CHECK(read(s, buf, sizeof buf) == 0);
    /* VMIN=3: a read takes what is there once three bytes are. */
    t.c_cc[VMIN] = 3;
    t.c_cc[VTIME] = 0;
    CHECK_OK(tcsetattr(s, TCSANOW, &t));
    CHECK(put(m, "1234"));
    settle(s);
    CHECK(read(s, buf, sizeof buf) == 4);
    CHECK(put(m, "xyz"));
    settle(s);
    CHECK(read(s, buf, 2) == 2 && memcmp(buf, "xy", 2) == 0);
    CHECK(read(s, buf, 1) == 1 && buf[0] == 'z');
    /* TCSETSF flushes pending input. */
    CHECK(put(m, "stale"));
    settle(s);
    t.c_cc[VMIN] = 0;
    CHECK_OK(tcsetattr(s, TCSAFLUSH, &t));
    CHECK(read(s, buf, sizeof buf) == 0);
    close(s);
    close(m);
}

static volatile sig_atomic_t got_winch, got_int, got_quit, got_tstp, got_hup, got_cont;
static void on_signal(int sig) {
    if (sig == SIGWINCH) got_winch++;
    if (sig == SIGINT) got_int++;
    if (sig == SIGQUIT) got_quit++;
    if (sig == SIGTSTP) got_tstp++;
    if (sig == SIGHUP) got_hup++;
    if (sig == SIGCONT) got_cont++;
}

static void catch(int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(sig, &sa, NULL);
}

/* A session leader with a pty as its controlling terminal. */
static int ctty_master, ctty_slave;

static int take_ctty(void) {
    ctty_master = posix_openpt(O_RDWR | O_NOCTTY);
    if (ctty_master < 0 || grantpt(ctty_master) || unlockpt(ctty_master)) return -1;
    /* No O_NOCTTY: a session leader without a terminal gets this one. */
    ctty_slave = open(ptsname(ctty_master), O_RDWR);
    cur_slave = ctty_slave;
    return ctty_slave;
}

static int controlling_terminal(void) {
    pid_t me = getpid();
    /* No terminal yet. */
    CHECK_ERR(open("/dev/tty", O_RDWR), ENXIO);
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    grantpt(m);
    unlockpt(m);
    /* The master never becomes one; O_NOCTTY keeps the slave from it. */
    int s0 = open(ptsname(m), O_RDWR | O_NOCTTY);
    CHECK_ERR(tcgetpgrp(s0), ENOTTY);
    CHECK_ERR(tcgetsid(s0), ENOTTY);
    CHECK_OK(ioctl(s0, TIOCSCTTY, 0));
    CHECK(tcgetsid(s0) == me);
    CHECK(tcgetpgrp(s0) == me);
    CHECK(tcgetpgrp(m) == me);
    CHECK(tcgetsid(m) == me);
    /* Asking again is fine; the master side works too. */
    CHECK_OK(ioctl(m, TIOCSCTTY, 0));
    int tty = open("/dev/tty", O_RDWR);
    CHECK(tty >= 0);
    struct stat ts;
    CHECK_OK(fstat(tty, &ts));
    CHECK(major(ts.st_rdev) == 5 && minor(ts.st_rdev) == 0);
    char buf[64];
    drain(m, buf, sizeof buf);
    CHECK(put(tty, "via tty\n"));
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "via tty\r\n") == 0);
    CHECK(tcgetpgrp(tty) == me);
    /* Another terminal is refused while this one is held. */
    int s2, m2 = open_pair(&s2);
    CHECK_ERR(ioctl(s2, TIOCSCTTY, 0), EPERM);
    /* The foreground group: only a group of this session. */
    CHECK_ERR(tcsetpgrp(s0, 999999), ESRCH);
    CHECK_ERR(tcsetpgrp(s0, -1), EINVAL);
    CHECK_ERR(tcsetpgrp(s2, me), ENOTTY);
    pid_t kid = fork();
    if (kid == 0) {
        setpgid(0, 0);
        pause();
        _exit(0);
    }
    setpgid(kid, kid);
    CHECK_OK(tcsetpgrp(s0, kid));
    CHECK(tcgetpgrp(s0) == kid);
    CHECK(tcgetpgrp(tty) == kid);
    /* The leader is now in the background: it may still set the group
     * back while SIGTTOU is ignored. */
    signal(SIGTTOU, SIG_IGN);
    CHECK_OK(tcsetpgrp(s0, me));
    signal(SIGTTOU, SIG_DFL);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    /* Giving the terminal up: TIOCNOTTY by the leader. */
    signal(SIGHUP, SIG_IGN);
    CHECK_ERR(ioctl(m, TIOCNOTTY), ENOTTY);
    CHECK_OK(ioctl(tty, TIOCNOTTY));
    signal(SIGHUP, SIG_DFL);
    CHECK_ERR(tcgetpgrp(s0), ENOTTY);
    CHECK_ERR(open("/dev/tty", O_RDWR), ENXIO);
    /* Now the other one can be taken. */
    CHECK_OK(ioctl(s2, TIOCSCTTY, 0));
    CHECK(tcgetsid(s2) == me);
    (void)m2;
    return t_failures;
}

static int signal_characters(void) {
    if (take_ctty() < 0) return 50;
    int m = ctty_master, s = ctty_slave;
    char buf[64];
    CHECK(tcgetpgrp(s) == getpid());
    catch(SIGINT);
    catch(SIGQUIT);
    catch(SIGTSTP);
    catch(SIGWINCH);
    /* ^C: SIGINT to the foreground group, pending input flushed, ^C
     * echoed. */
    CHECK(put(m, "abc\003"));
    settle(s);
    CHECK(got_int == 1);
    drain(m, buf, sizeof buf);
    /* The echo of the flushed input goes with it. */
    CHECK(strcmp(buf, "^C") == 0);
    CHECK(put(m, "d\n"));
    CHECK(read(s, buf, sizeof buf) == 2 && memcmp(buf, "d\n", 2) == 0);
    drain(m, buf, sizeof buf);
    CHECK(put(m, "\034"));
    settle(s);
    CHECK(got_quit == 1);
    CHECK(put(m, "\032"));
    settle(s);
    CHECK(got_tstp == 1);
    drain(m, buf, sizeof buf);
    CHECK(strcmp(buf, "^\\^Z") == 0);
    /* NOFLSH keeps the input. */
    struct termios t, orig;
    tcgetattr(s, &orig);
    t = orig;
    t.c_lflag |= NOFLSH;
    tcsetattr(s, TCSANOW, &t);
    CHECK(put(m, "keep\003\n"));
    settle(s);
    CHECK(got_int == 2);
    CHECK(read(s, buf, sizeof buf) == 5 && memcmp(buf, "keep\n", 5) == 0);
    /* Without ISIG they are input. */
    t.c_lflag &= ~ISIG;
    tcsetattr(s, TCSANOW, &t);
    CHECK(put(m, "\003\n"));
    settle(s);
    CHECK(got_int == 2);
    CHECK(read(s, buf, sizeof buf) == 2 && buf[0] == 3);
    tcsetattr(s, TCSANOW, &orig);
    /* Window size: set on the master, read on the slave, SIGWINCH to the
     * foreground group when it changes. */
    struct winsize w = {0}, got;
    CHECK_OK(ioctl(s, TIOCGWINSZ, &got));
    CHECK(got.ws_row == 0 && got.ws_col == 0);
    w.ws_row = 40;
    w.ws_col = 132;
    CHECK_OK(ioctl(m, TIOCSWINSZ, &w));
    CHECK(got_winch == 1);
    CHECK_OK(ioctl(s, TIOCGWINSZ, &got));
    CHECK(got.ws_row == 40 && got.ws_col == 132);
    CHECK_OK(ioctl(m, TIOCSWINSZ, &w));
    CHECK(got_winch == 1);
    w.ws_row = 41;
    CHECK_OK(ioctl(s, TIOCSWINSZ, &w));
    CHECK(got_winch == 2);
    return t_failures;
}

static int wait_stop(pid_t pid) {
    int st;
    if (waitpid(pid, &st, WUNTRACED) != pid) return -1;
    if (WIFSTOPPED(st)) return WSTOPSIG(st);
    if (WIFEXITED(st)) return 100 + WEXITSTATUS(st);
    return 200 + WTERMSIG(st);
}

/* In a background group of the terminal's session. */
static pid_t background(void (*f)(void)) {
    pid_t kid = fork();
    if (kid == 0) {
        t_failures = 0;
        setpgid(0, 0);
        f();
        _exit(t_failures ? 1 : 0);
    }
    setpgid(kid, kid);
    return kid;
}

static void bg_read(void) {
    char c;
    (void)!read(ctty_slave, &c, 1);
    _exit(9);
}
static void bg_read_ignored(void) {
    signal(SIGTTIN, SIG_IGN);
    char c;
    CHECK_ERR(read(ctty_slave, &c, 1), EIO);
}
static void bg_write(void) { CHECK(put(ctty_slave, "bg\n")); }
static void bg_write_tostop(void) {
    (void)!put(ctty_slave, "stopped\n");
    _exit(9);
}
static void bg_write_tostop_blocked(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTTOU);
    sigprocmask(SIG_BLOCK, &set, NULL);
    CHECK(put(ctty_slave, "blocked\n"));
}
static void bg_setattr(void) {
    struct termios t;
    tcgetattr(ctty_slave, &t);
    (void)tcsetattr(ctty_slave, TCSANOW, &t);
    _exit(9);
}
static void bg_setattr_ignored(void) {
    signal(SIGTTOU, SIG_IGN);
    struct termios t;
    tcgetattr(ctty_slave, &t);
    CHECK_OK(tcsetattr(ctty_slave, TCSANOW, &t));
}

static int job_control(void) {
    if (take_ctty() < 0) return 50;
    char buf[64];
    pid_t k = background(bg_read);
    CHECK(wait_stop(k) == SIGTTIN);
    kill(k, SIGKILL);
    waitpid(k, NULL, 0);
    k = background(bg_read_ignored);
    CHECK(wait_stop(k) == 100);
    k = background(bg_write);
    CHECK(wait_stop(k) == 100);
    drain(ctty_master, buf, sizeof buf);
    CHECK(strcmp(buf, "bg\r\n") == 0);
    struct termios t;
    tcgetattr(ctty_slave, &t);
    t.c_lflag |= TOSTOP;
    tcsetattr(ctty_slave, TCSANOW, &t);
    k = background(bg_write_tostop);
    CHECK(wait_stop(k) == SIGTTOU);
    /* Brought to the foreground and continued, it writes. */
    CHECK_OK(tcsetpgrp(ctty_slave, k));
    kill(k, SIGCONT);
    CHECK(wait_stop(k) == 109);
    signal(SIGTTOU, SIG_IGN);
    CHECK_OK(tcsetpgrp(ctty_slave, getpid()));
    signal(SIGTTOU, SIG_DFL);
    drain(ctty_master, buf, sizeof buf);
    CHECK(strcmp(buf, "stopped\r\n") == 0);
    k = background(bg_write_tostop_blocked);
    CHECK(wait_stop(k) == 100);
    drain(ctty_master, buf, sizeof buf);
    CHECK(strcmp(buf, "blocked\r\n") == 0);
    k = background(bg_setattr);
    CHECK(wait_stop(k) == SIGTTOU);
    kill(k, SIGKILL);
    waitpid(k, NULL, 0);
    k = background(bg_setattr_ignored);
    CHECK(wait_stop(k) == 100);
    return t_failures;
}

/* The master closes: the session leader gets SIGHUP and SIGCONT, the
 * slave reads end of file and writes fail. */
static int hang_up(void) {
    if (take_ctty() < 0) return 50;
    catch(SIGHUP);
    catch(SIGCONT);
    int s = ctty_slave;
    char buf[16];
    close(ctty_master);
    CHECK(got_hup == 1 && got_cont == 1);
    CHECK(read(s, buf, sizeof buf) == 0);
    CHECK_ERR(write(s, "x", 1), EIO);
    struct pollfd p = {s, POLLIN | POLLOUT, 0};
    CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLHUP));
    CHECK_ERR(tcgetpgrp(s), EIO);
    CHECK_ERR(open("/dev/tty", O_RDWR), ENXIO);
    return t_failures;
}

/* The slave closes: the master reads EIO once drained, polls POLLHUP. */
static void slave_closes(void) {
    int s, m = open_pair(&s);
    char buf[16];
    CHECK(put(s, "bye"));
    close(s);
    struct pollfd p = {m, POLLIN, 0};
    CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLHUP) && (p.revents & POLLIN));
    CHECK(read(m, buf, sizeof buf) == 3);
    CHECK_ERR(read(m, buf, sizeof buf), EIO);
    /* Reopened, it works again. */
    s = open(ptsname(m), O_RDWR | O_NOCTTY);
    CHECK(s >= 0);
    CHECK(put(m, "again\n"));
    CHECK(read(s, buf, sizeof buf) == 6);
    close(s);
    close(m);
}

int main(void) {
    openpt_and_names();
    termios_defaults();
    canonical_editing();
    raw_reads_and_poll();
    slave_closes();
    CHECK(in_session(controlling_terminal) == 0);
    CHECK(in_session(signal_characters) == 0);
    CHECK(in_session(job_control) == 0);
    CHECK(in_session(hang_up) == 0);
    return done();
}
