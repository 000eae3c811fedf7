/* The pattern PostgreSQL's postmaster uses: a shared memory segment made
 * and attached before the workers are forked, a semaphore set guarding
 * it, the segment marked for removal while everyone is still attached (so
 * nothing leaks if all die), four workers incrementing a shared counter
 * under the semaphore, and each worker's SEM_UNDO taking back a lock it
 * held when it died. */
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define WORKERS 4
#define ROUNDS 2000

union semun {
    int val;
    struct semid_ds *buf;
    unsigned short *array;
};

struct shared {
    long counter;
    long per_worker[WORKERS];
    int in_critical;
    int overlaps;
};

static int lock_op(int semid, int num, int delta) {
    struct sembuf b = {(unsigned short)num, (short)delta, SEM_UNDO};
    return semop(semid, &b, 1);
}

int main(void) {
    int shmid = shmget(IPC_PRIVATE, sizeof(struct shared), IPC_CREAT | 0600);
    CHECK(shmid >= 0);
    struct shared *sh = shmat(shmid, NULL, 0);
    CHECK(sh != (void *)-1);
    /* Semaphore 0 guards the counter; 1 is the start line the workers
     * wait at; 2 counts the workers that finished. */
    int semid = semget(IPC_PRIVATE, 3, IPC_CREAT | 0600);
    CHECK(semid >= 0);
    CHECK_OK(semctl(semid, 0, SETVAL, (union semun){.val = 1}));
    /* Removed while attached: it lasts until the last process detaches. */
    CHECK_OK(shmctl(shmid, IPC_RMID, NULL));

    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            struct sembuf start = {1, -1, 0};
            if (semop(semid, &start, 1) != 0) _exit(1);
            for (int i = 0; i < ROUNDS; i++) {
                if (lock_op(semid, 0, -1) != 0) _exit(2);
                if (__atomic_fetch_add(&sh->in_critical, 1, __ATOMIC_SEQ_CST) != 0)
                    __atomic_fetch_add(&sh->overlaps, 1, __ATOMIC_SEQ_CST);
                long v = sh->counter;
                sh->per_worker[w]++;
                sh->counter = v + 1;
                __atomic_fetch_sub(&sh->in_critical, 1, __ATOMIC_SEQ_CST);
                if (lock_op(semid, 0, 1) != 0) _exit(3);
            }
            struct sembuf finished = {2, 1, 0};
            if (semop(semid, &finished, 1) != 0) _exit(4);
            /* Dies holding the lock: SEM_UNDO gives it back. */
            if (w == WORKERS - 1 && lock_op(semid, 0, -1) != 0) _exit(5);
            _exit(0);
        }
    }
    struct shmid_ds ds;
    CHECK_OK(shmctl(shmid, IPC_STAT, &ds));
    CHECK(ds.shm_nattch == WORKERS + 1);
    CHECK(ds.shm_perm.mode & SHM_DEST);
    /* Let them all go at once. */
    struct sembuf go = {1, WORKERS, 0};
    CHECK_OK(semop(semid, &go, 1));
    struct sembuf all_done = {2, -WORKERS, 0};
    CHECK_OK(semop(semid, &all_done, 1));
    for (int w = 0; w < WORKERS; w++) {
        int status;
        CHECK(waitpid(pids[w], &status, 0) == pids[w] && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK(sh->counter == (long)WORKERS * ROUNDS);
    for (int w = 0; w < WORKERS; w++) CHECK(sh->per_worker[w] == ROUNDS);
    CHECK(sh->overlaps == 0);
    CHECK(semctl(semid, 0, GETVAL) == 1);
    printf("counter %ld\n", sh->counter);
    CHECK_OK(shmctl(shmid, IPC_STAT, &ds));
    CHECK(ds.shm_nattch == 1);
    CHECK_OK(shmdt(sh));
    CHECK_ERR(shmctl(shmid, IPC_STAT, &ds), EINVAL);
    CHECK_OK(semctl(semid, 0, IPC_RMID));
    return done();
}
