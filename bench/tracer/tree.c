/* Tracer benchmark workload: builds complete binary trees, walks them and frees them (the shape of
 * the binary-trees benchmark), with a small payload block on every fourth node, so allocation
 * sites differ and lifetimes nest. Usage: tree [SCALE]. */
#include "workload.h"

typedef struct node {
  struct node *left, *right;
  char *payload;
} node;

static node *build(int depth, uint64_t *rng) {
  node *n = malloc(sizeof *n);
  if (!n)
    abort();
  uint64_t r = workload_next(rng);
  n->payload = NULL;
  if ((r & 3) == 0) {
    n->payload = malloc(8 + (size_t)(r >> 58));
    if (!n->payload)
      abort();
    n->payload[0] = (char)r;
  }
  if (depth > 0) {
    n->left = build(depth - 1, rng);
    n->right = build(depth - 1, rng);
  } else {
    n->left = n->right = NULL;
  }
  return n;
}

static uint64_t walk(const node *n) {
  uint64_t c = 1 + (n->payload ? 1 : 0);
  if (n->left)
    c += walk(n->left) + walk(n->right);
  return c;
}

static void destroy(node *n) {
  if (n->left) {
    destroy(n->left);
    destroy(n->right);
  }
  free(n->payload);
  free(n);
}

int main(int argc, char **argv) {
  double scale = workload_scale(argc, argv);
  int rounds = (int)(scale * 16);
  if (rounds < 1)
    rounds = 1;
  uint64_t rng = 42, total = 0;
  node *longlived = build(16, &rng); /* a tree that lives through the whole run */
  for (int i = 0; i < rounds; i++) {
    for (int depth = 4; depth <= 16; depth += 4) {
      int trees = 1 << (16 - depth);
      for (int t = 0; t < trees; t++) {
        node *n = build(depth, &rng);
        total += walk(n);
        destroy(n);
      }
    }
  }
  total += walk(longlived);
  destroy(longlived);
  printf("tree: %llu nodes and payloads\n", (unsigned long long)total);
  return 0;
}
