/* Readiness of inet sockets, over the loopback of the network the program
 * runs on (the host's, with --network=host): edge-triggered epoll reports
 * each new arrival once (EPOLLIN with EPOLLOUT, then nothing until more
 * comes, EPOLLRDHUP at the peer's end), level-triggered epoll and poll
 * report what is there, a reader blocked in recv in another thread is
 * woken by data, and a blocked accept by a connection. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t.h"

static struct sockaddr_in addr;

static void *blocked_reader(void *arg) {
    int fd = *(int *)arg;
    char buf[16];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_WAITALL);
    return (void *)n;
}

static void *late_client(void *arg) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    int r = connect(c, (struct sockaddr *)&addr, sizeof addr);
    *(int *)arg = c;
    return (void *)(long)r;
}

/* Waits for events on `ep`: the mask of the one file, 0 for none. */
static unsigned wait_events(int ep, int ms) {
    struct epoll_event ev[2];
    int n = epoll_wait(ep, ev, 2, ms);
    CHECK(n == 0 || n == 1);
    return n == 1 ? ev[0].events : 0;
}

static void drain(int fd) {
    char buf[64];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
    CHECK(errno == EAGAIN);
}

int main(void) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    addr = (struct sockaddr_in){.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_OK(bind(l, (struct sockaddr *)&addr, sizeof addr));
    socklen_t len = sizeof addr;
    CHECK_OK(getsockname(l, (struct sockaddr *)&addr, &len));
    CHECK_OK(listen(l, 4));

    /* A blocked accept, woken by a connection from another thread. */
    pthread_t t;
    int c = -1;
    CHECK(pthread_create(&t, NULL, late_client, &c) == 0);
    int s = accept(l, NULL, NULL);
    CHECK(s >= 0);
    void *r;
    pthread_join(t, &r);
    CHECK(r == 0 && c >= 0);
    CHECK_OK(fcntl(s, F_SETFL, O_NONBLOCK));

    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = s};
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
    printf("first: %#x\n", wait_events(ep, 30000));
    printf("again: %#x\n", wait_events(ep, 0));
    for (int round = 0; round < 3; round++) {
        CHECK(send(c, "abc", 3, 0) == 3);
        printf("data %d: %#x\n", round, wait_events(ep, 30000));
        drain(s);
        printf("drained %d: %#x\n", round, wait_events(ep, 0));
    }

    /* Level-triggered, and poll: reported for as long as data is there. */
    int lt = epoll_create1(0);
    ev = (struct epoll_event){.events = EPOLLIN, .data.fd = s};
    CHECK_OK(epoll_ctl(lt, EPOLL_CTL_ADD, s, &ev));
    CHECK(send(c, "level", 5, 0) == 5);
    printf("level: %#x\n", wait_events(lt, 30000));
    printf("level again: %#x\n", wait_events(lt, 0));
    struct pollfd p = {s, POLLIN | POLLOUT, 0};
    CHECK(poll(&p, 1, 0) == 1);
    printf("poll: %#x\n", p.revents);
    drain(s);
    printf("level drained: %#x\n", wait_events(lt, 0));
    printf("edge after level: %#x\n", wait_events(ep, 30000));

    /* A reader blocked in recv, woken by what comes. */
    int blocking = s;
    CHECK_OK(fcntl(blocking, F_SETFL, 0));
    CHECK(pthread_create(&t, NULL, blocked_reader, &blocking) == 0);
    CHECK(send(c, "01234567", 8, 0) == 8);
    CHECK(send(c, "89abcdef", 8, 0) == 8);
    pthread_join(t, &r);
    printf("blocked reader got %ld\n", (long)r);
    printf("edge after reader: %#x\n", wait_events(ep, 30000));

    /* The peer's end: EPOLLRDHUP with EPOLLIN, and poll's POLLRDHUP. */
    CHECK_OK(shutdown(c, SHUT_WR));
    printf("peer shut: %#x\n", wait_events(ep, 30000));
    p = (struct pollfd){s, POLLIN | POLLRDHUP, 0};
    CHECK(poll(&p, 1, 30000) == 1);
    printf("poll shut: %#x\n", p.revents);
    char b;
    CHECK(recv(s, &b, 1, 0) == 0);
    close(c);
    close(s);
    close(l);
    return done();
}
