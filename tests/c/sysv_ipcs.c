/* Makes one object of each System V kind with keys of its own, then runs
 * the command line given (`ipcs` and its options) while they exist, and
 * removes them. The first line says the ids, which differ from run to
 * run, so that the caller can compare the rest. */
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    key_t base = (key_t)strtol(argv[1], NULL, 0);
    int sem = semget(base + 1, 3, IPC_CREAT | IPC_EXCL | 0640);
    int msg = msgget(base + 2, IPC_CREAT | IPC_EXCL | 0620);
    int shm = shmget(base + 3, 10000, IPC_CREAT | IPC_EXCL | 0660);
    int removed = shmget(base + 4, 5000, IPC_CREAT | IPC_EXCL | 0600);
    CHECK(sem >= 0 && msg >= 0 && shm >= 0 && removed >= 0);
    struct {
        long type;
        char text[16];
    } m = {1, "hello"};
    CHECK_OK(msgsnd(msg, &m, 5, 0));
    CHECK_OK(msgsnd(msg, &m, 3, 0));
    char *at = shmat(shm, NULL, 0);
    CHECK(at != (void *)-1);
    at[0] = 1;
    CHECK(shmat(shm, NULL, SHM_RDONLY) != (void *)-1);
    CHECK(shmat(removed, NULL, 0) != (void *)-1);
    CHECK_OK(shmctl(removed, IPC_RMID, NULL));
    CHECK_OK(shmctl(shm, SHM_LOCK, NULL));
    printf("ids %d %d %d %d\n", sem, msg, shm, removed);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(semctl(sem, 0, IPC_RMID));
    CHECK_OK(msgctl(msg, IPC_RMID, NULL));
    CHECK_OK(shmctl(shm, IPC_RMID, NULL));
    return done();
}
