#define _GNU_SOURCE
#include "CGatewayShims.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

int CGateway_accept(int fd, struct sockaddr_storage *addr, socklen_t *len) {
    return accept4(fd, (struct sockaddr *)addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int CGateway_socket(int family) {
    return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

int CGateway_setReuse(int fd) {
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) return -1;
    return setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
}

int CGateway_setNoDelay(int fd) {
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int CGateway_socketError(int fd) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    return err;
}

int CGateway_epollCreate(void) { return epoll_create1(EPOLL_CLOEXEC); }

int CGateway_epollAdd(int epfd, int fd, uint32_t events, uint64_t token) {
    struct epoll_event ev = { .events = events, .data.u64 = token };
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

int CGateway_epollMod(int epfd, int fd, uint32_t events, uint64_t token) {
    struct epoll_event ev = { .events = events, .data.u64 = token };
    return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
}

int CGateway_epollDel(int epfd, int fd) {
    struct epoll_event ev = { 0 };
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &ev);
}

int CGateway_epollWait(int epfd, uint64_t *tokens, uint32_t *events, int max, int timeoutMillis) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n = epoll_wait(epfd, evs, max, timeoutMillis);
    for (int i = 0; i < n; i++) {
        tokens[i] = evs[i].data.u64;
        events[i] = evs[i].events;
    }
    return n;
}

int CGateway_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

static void fillSet(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
}

int CGateway_blockSignals(void) {
    sigset_t set;
    fillSet(&set);
    sigaddset(&set, SIGPIPE);
    return pthread_sigmask(SIG_BLOCK, &set, NULL) == 0 ? 0 : -1;
}

int CGateway_waitSignal(void) {
    sigset_t set;
    fillSet(&set);
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return -1;
    return sig;
}

int CGateway_pinToCPU(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? 0 : -1;
}

int CGateway_raise(int sig) { return kill(getpid(), sig); }
