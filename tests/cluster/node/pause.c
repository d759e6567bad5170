/* The sandbox ("pause") container of the real test node: holds the pod's namespaces, reaps
 * zombies, exits on SIGINT/SIGTERM. Built statically by node.sh into a one-file OCI image, since
 * no registry is reachable to pull registry.k8s.io/pause. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
    struct sigaction q = { .sa_handler = quit }, r = { .sa_handler = reap, .sa_flags = SA_NOCLDSTOP };
    if (sigaction(SIGINT, &q, NULL) < 0 || sigaction(SIGTERM, &q, NULL) < 0 || sigaction(SIGCHLD, &r, NULL) < 0)
        return 1;
    for (;;)
        pause();
}
