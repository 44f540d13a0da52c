/*
 * The loopback floor for an exchange between two processes: each sends SIZE
 * bytes to the other and receives SIZE bytes from it at the same time (a
 * sending thread beside the reading one), as a two-rank allReduce's
 * reduce-scatter + all-gather move them, with nothing else done. A two-rank
 * allReduce of SIZE bytes moves exactly that, so its bus bandwidth cannot beat
 * this rate on the same machine, whatever the library.
 *
 *   cc -O2 -pthread -o tcp_exchange tcp_exchange.c
 *   ./tcp_exchange listen PORT & ./tcp_exchange dial PORT
 *
 * The dialing side prints `tcp_exchange_GBps_<SIZE> <best GB/s each way>`.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SIZE (64L << 20)
#define ROUNDS 10

static int peer;
static char *out, *in;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *send_all(void *unused) {
  (void)unused;
  for (long at = 0; at < SIZE;) {
    ssize_t n = write(peer, out + at, SIZE - at);
    if (n <= 0) { perror("write"); exit(1); }
    at += n;
  }
  return NULL;
}

static void receive_all(void) {
  for (long at = 0; at < SIZE;) {
    ssize_t n = read(peer, in + at, SIZE - at);
    if (n <= 0) { perror("read"); exit(1); }
    at += n;
  }
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: %s listen|dial PORT\n", argv[0]); return 2; }
  int dialing = strcmp(argv[1], "dial") == 0;
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (dialing) {
    peer = socket(AF_INET, SOCK_STREAM, 0);
    for (int tries = 0; connect(peer, (struct sockaddr *)&address, sizeof address) != 0; tries++) {
      if (tries == 500) { perror("connect"); return 1; }
      usleep(10000);
    }
  } else {
    int listener = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) || listen(listener, 1)) { perror("listen"); return 1; }
    peer = accept(listener, NULL, NULL);
  }
  out = malloc(SIZE);
  in = malloc(SIZE);
  memset(out, 1, SIZE);
  memset(in, 0, SIZE);
  double best = 1e30;
  for (int round = 0; round < ROUNDS; round++) {
    double started = now_ms();
    pthread_t sender;
    pthread_create(&sender, NULL, send_all, NULL);
    receive_all();
    pthread_join(sender, NULL);
    double took = now_ms() - started;
    if (took < best) best = took;
  }
  if (dialing) printf("tcp_exchange_GBps_%ld %.3f\n", SIZE, SIZE / best / 1e6);
  return 0;
}
