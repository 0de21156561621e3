// Short TCP request/response flows for scripts/bench-shared.sh: the same protocol, arrivals and CSV as
// scripts/bench/shared_flows.py's `server` and `short`, in one epoll loop per process.
//
// Why C: the Python generator's own floor hid the network's share of a short flow. With no job on the bed, its
// 10 KB flows had a p99 of 3.9-4.6 ms (a thread per flow, the GIL's 5 ms switch interval between them) where the
// kernel-stamped probe beside them had 1.6-2.2. A flow here costs a few system calls and no thread.
//
//   short_flows server --port P
//       answers each connection: reads 8 bytes (the size N wanted, big-endian), sends N bytes, closes
//   short_flows short --server IP:P --seconds S --rate R [--sizes 10000,100000,1000000] --out FILE
//                     [--seed N] [--until FILE]
//       Poisson arrivals at R flows/s for S seconds (or until FILE exists), sizes in turn, a new connection each;
//       one CSV row per flow: start_s (CLOCK_MONOTONIC, the arrival's time), size, fct_ms (connect() to the last
//       response byte), ok
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 256
#define CHUNK (1 << 16)
#define MAX_SIZES 16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static char payload[CHUNK];

// --- server -------------------------------------------------------------------------------------------------------

struct answer
{
    int fd;
    unsigned char head[8];
    int headGot;
    uint64_t left;
};

static int serve(int port)
{
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (listener < 0) die("socket");
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY};
    if (bind(listener, (struct sockaddr *)&address, sizeof address) < 0) die("bind");
    if (listen(listener, 512) < 0) die("listen");
    int ep = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &event);
    struct epoll_event events[MAX_EVENTS];
    for (;;)
    {
        int n = epoll_wait(ep, events, MAX_EVENTS, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        for (int i = 0; i < n; i++)
        {
            struct answer *a = events[i].data.ptr;
            if (a == NULL)
            {
                int fd;
                while ((fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0)
                {
                    nodelay(fd);
                    struct answer *fresh = calloc(1, sizeof *fresh);
                    fresh->fd = fd;
                    struct epoll_event e = {.events = EPOLLIN, .data.ptr = fresh};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            int done = 0;
            if (a->headGot < 8)
            {
                ssize_t got = read(a->fd, a->head + a->headGot, 8 - a->headGot);
                if (got <= 0 && !(got < 0 && errno == EAGAIN)) done = 1;
                else if (got > 0 && (a->headGot += got) == 8)
                {
                    uint64_t size = 0;
                    for (int k = 0; k < 8; k++) size = size << 8 | a->head[k];
                    a->left = size;
                    struct epoll_event e = {.events = EPOLLOUT, .data.ptr = a};
                    epoll_ctl(ep, EPOLL_CTL_MOD, a->fd, &e);
                }
            }
            if (!done && a->headGot == 8)
            {
                while (a->left > 0)
                {
                    ssize_t sent = write(a->fd, payload, a->left < CHUNK ? a->left : CHUNK);
                    if (sent < 0 && errno == EAGAIN) break;
                    if (sent <= 0)
                    {
                        done = 1;
                        break;
                    }
                    a->left -= sent;
                }
                if (a->left == 0) done = 1;
            }
            if (done)
            {
                close(a->fd); // epoll forgets a closed descriptor by itself
                free(a);
            }
        }
    }
    return 0; // not reached: the server runs until it is killed
}

// --- short flows --------------------------------------------------------------------------------------------------

struct flow
{
    int fd;
    double start;     // the arrival's time, CLOCK_MONOTONIC s
    double connectAt; // when connect() was called
    uint64_t size;
    uint64_t got;
    int sentHead;
    double fctMs;
    int ok;
};

static uint64_t rngState;

static double uniform01(void) // xorshift64*: seeded, so a run's arrivals repeat
{
    rngState ^= rngState >> 12;
    rngState ^= rngState << 25;
    rngState ^= rngState >> 27;
    return ((rngState * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

static void finish(struct flow *f, int ok)
{
    f->fctMs = (now_s() - f->connectAt) * 1e3;
    f->ok = ok && f->got == f->size;
    close(f->fd);
    f->fd = -1;
}

static int by_start(const void *a, const void *b)
{
    const struct flow *x = *(struct flow *const *)a, *y = *(struct flow *const *)b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int run_short(const char *server, double seconds, double rate, const char *sizesText, const char *outPath,
    unsigned long seed, const char *until)
{
    char host[64];
    const char *colon = strrchr(server, ':');
    if (colon == NULL || colon - server >= (long)sizeof host) { fprintf(stderr, "--server IP:PORT\n"); return 2; }
    memcpy(host, server, colon - server);
    host[colon - server] = 0;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &address.sin_addr) != 1) { fprintf(stderr, "bad address %s\n", host); return 2; }
    uint64_t sizes[MAX_SIZES];
    int sizeCount = 0;
    char *copy = strdup(sizesText);
    for (char *token = strtok(copy, ","); token && sizeCount < MAX_SIZES; token = strtok(NULL, ","))
        sizes[sizeCount++] = strtoull(token, NULL, 10);
    free(copy);
    if (sizeCount == 0 || rate <= 0) { fprintf(stderr, "--sizes and --rate > 0 needed\n"); return 2; }
    rngState = seed * 0x9E3779B97F4A7C15ULL + 1;

    size_t capacity = 1024, count = 0;
    struct flow **flows = malloc(capacity * sizeof *flows);
    int ep = epoll_create1(0);
    struct epoll_event events[MAX_EVENTS];
    static char buffer[CHUNK];
    const double begin = now_s();
    double nextAt = 0;
    long open = 0, k = 0;
    int arriving = 1;
    double lastUntilCheck = 0;
    while (arriving || open > 0)
    {
        double now = now_s() - begin;
        if (arriving)
        {
            if (now - lastUntilCheck > 0.01)
            {
                lastUntilCheck = now;
                if (nextAt >= seconds || (until && access(until, F_OK) == 0)) arriving = 0;
            }
            while (arriving && now >= nextAt && nextAt < seconds)
            {
                struct flow *f = calloc(1, sizeof *f);
                f->start = begin + nextAt;
                f->size = sizes[k++ % sizeCount];
                f->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
                nodelay(f->fd);
                f->connectAt = now_s();
                if (connect(f->fd, (struct sockaddr *)&address, sizeof address) < 0 && errno != EINPROGRESS)
                    finish(f, 0);
                else
                {
                    struct epoll_event e = {.events = EPOLLOUT, .data.ptr = f};
                    epoll_ctl(ep, EPOLL_CTL_ADD, f->fd, &e);
                    open++;
                }
                if (count == capacity) flows = realloc(flows, (capacity *= 2) * sizeof *flows);
                flows[count++] = f;
                nextAt += -log(1.0 - uniform01()) / rate;
            }
        }
        int timeoutMs = 10;
        if (arriving)
        {
            double wait = nextAt - (now_s() - begin);
            timeoutMs = wait <= 0 ? 0 : (int)(wait * 1e3) + 1 < 10 ? (int)(wait * 1e3) + 1 : 10;
        }
        int n = epoll_wait(ep, events, MAX_EVENTS, timeoutMs);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++)
        {
            struct flow *f = events[i].data.ptr;
            if (f->fd < 0) continue;
            if (!f->sentHead)
            {
                int error = 0;
                socklen_t length = sizeof error;
                getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &error, &length);
                unsigned char head[8];
                for (int b = 0; b < 8; b++) head[b] = (unsigned char)(f->size >> (56 - 8 * b));
                if (error != 0 || write(f->fd, head, 8) != 8)
                {
                    finish(f, 0);
                    open--;
                    continue;
                }
                f->sentHead = 1;
                struct epoll_event e = {.events = EPOLLIN, .data.ptr = f};
                epoll_ctl(ep, EPOLL_CTL_MOD, f->fd, &e);
                continue;
            }
            for (;;)
            {
                ssize_t got = read(f->fd, buffer, sizeof buffer);
                if (got > 0)
                {
                    f->got += got;
                    if (f->got >= f->size)
                    {
                        finish(f, 1);
                        open--;
                        break;
                    }
                    continue;
                }
                if (got < 0 && errno == EAGAIN) break;
                finish(f, 0); // closed early or failed
                open--;
                break;
            }
        }
        if (!arriving && open > 0 && now_s() - begin > nextAt + 60) break; // stuck flows end the run as failures
    }
    FILE *out = fopen(outPath, "w");
    if (out == NULL) die(outPath);
    qsort(flows, count, sizeof *flows, by_start);
    fprintf(out, "start_s,size,fct_ms,ok\n");
    for (size_t i = 0; i < count; i++)
    {
        struct flow *f = flows[i];
        if (f->fd >= 0) { f->ok = 0; f->fctMs = (now_s() - f->connectAt) * 1e3; }
        fprintf(out, "%.4f,%llu,%.3f,%d\n", f->start, (unsigned long long)f->size, f->fctMs, f->ok);
    }
    fclose(out);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: short_flows server|short ...\n"); return 2; }
    int port = 0;
    const char *server = NULL, *sizes = "10000,100000,1000000", *out = NULL, *until = NULL;
    double seconds = 0, rate = 0;
    unsigned long seed = 1;
    for (int i = 2; i + 1 < argc; i += 2)
    {
        const char *key = argv[i], *value = argv[i + 1];
        if (!strcmp(key, "--port")) port = atoi(value);
        else if (!strcmp(key, "--server")) server = value;
        else if (!strcmp(key, "--seconds")) seconds = atof(value);
        else if (!strcmp(key, "--rate")) rate = atof(value);
        else if (!strcmp(key, "--sizes")) sizes = value;
        else if (!strcmp(key, "--out")) out = value;
        else if (!strcmp(key, "--seed")) seed = strtoul(value, NULL, 10);
        else if (!strcmp(key, "--until")) until = value;
        else { fprintf(stderr, "unknown option %s\n", key); return 2; }
    }
    if (!strcmp(argv[1], "server") && port > 0) return serve(port);
    if (!strcmp(argv[1], "short") && server && out && seconds > 0) return run_short(server, seconds, rate, sizes, out,
        seed, until);
    fprintf(stderr, "usage: short_flows server --port P | short --server IP:P --seconds S --rate R --out FILE\n");
    return 2;
}
