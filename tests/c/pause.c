/* A pod's pause program, as Kubernetes' pause container runs: it holds
 * the pod's namespaces, reaps whatever children it is handed, and exits 0
 * on SIGINT or SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void leave(int sig) {
    (void)sig;
    _exit(0);
}

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("pause (cordon tests)");
        return 0;
    }
    struct sigaction sa = {0};
    sa.sa_handler = leave;
    if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) {
        perror("pause: sigaction");
        return 1;
    }
    sa.sa_handler = reap;
    sa.sa_flags = SA_NOCLDSTOP;
    if (sigaction(SIGCHLD, &sa, NULL) < 0) {
        perror("pause: sigaction");
        return 1;
    }
    for (;;)
        pause();
}
