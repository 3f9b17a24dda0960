// CGatewayShims: the few Linux interfaces Swift's Glibc module does not import (epoll, eventfd, accept4,
// signal masks) and small wrappers for C macros. Every symbol is prefixed CGateway_.
#pragma once
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

/// accept4 with SOCK_NONBLOCK|SOCK_CLOEXEC; returns the fd or -1 (errno set).
int CGateway_accept(int fd, struct sockaddr_storage *addr, socklen_t *len);
/// A non-blocking, close-on-exec TCP socket for the given family.
int CGateway_socket(int family);
/// Sets SO_REUSEADDR, SO_REUSEPORT; returns 0 or -1.
int CGateway_setReuse(int fd);
/// Sets TCP_NODELAY; returns 0 or -1.
int CGateway_setNoDelay(int fd);
/// Returns the pending socket error (SO_ERROR), or errno when getsockopt fails.
int CGateway_socketError(int fd);
/// epoll helpers (the epoll_event struct is packed on x86_64, which Swift cannot lay out).
int CGateway_epollCreate(void);
int CGateway_epollAdd(int epfd, int fd, uint32_t events, uint64_t token);
int CGateway_epollMod(int epfd, int fd, uint32_t events, uint64_t token);
int CGateway_epollDel(int epfd, int fd);
/// Waits for events; fills tokens[i] and events[i]; returns the count or -1.
int CGateway_epollWait(int epfd, uint64_t *tokens, uint32_t *events, int max, int timeoutMillis);
int CGateway_eventfd(void);

/// Event bits as plain integers.
static const uint32_t CGateway_EPOLLIN = EPOLLIN;
static const uint32_t CGateway_EPOLLOUT = EPOLLOUT;
static const uint32_t CGateway_EPOLLERR = EPOLLERR;
static const uint32_t CGateway_EPOLLHUP = EPOLLHUP;
static const uint32_t CGateway_EPOLLRDHUP = EPOLLRDHUP;
static const uint32_t CGateway_EPOLLET = EPOLLET;

/// Blocks SIGTERM, SIGINT, SIGHUP and SIGPIPE in the calling thread (and threads it starts later);
/// returns 0 or -1.
int CGateway_blockSignals(void);
/// Waits for SIGTERM, SIGINT or SIGHUP (blocked beforehand); returns the signal number or -1.
int CGateway_waitSignal(void);
/// Restricts the calling thread to one CPU; returns 0 or -1.
int CGateway_pinToCPU(int cpu);
/// Sends a signal to the current process.
int CGateway_raise(int sig);
