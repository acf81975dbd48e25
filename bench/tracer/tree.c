/* Tracer benchmark workload: builds complete binary trees, walks them and frees them (the shape of
 * the binary-trees benchmark), with a small payload block on every fourth node, so two allocation
 * sites interleave and lifetimes nest; a forest built first lives through the whole run. Built
 * with an explicit stack rather than recursion: on the recursive version (one call stack per path
 * of the tree) heaptrack 1.4's interpreter grows to tens of GB and dies of std::bad_alloc, which
 * would leave nothing to compare with. Usage: tree [SCALE]. */
#include "workload.h"

typedef struct node {
  struct node *left, *right;
  char *payload;
} node;

#define MAX_DEPTH 16

static node *new_node(uint64_t *rng) {
  node *n = malloc(sizeof *n);
  if (!n)
    abort();
  uint64_t r = workload_next(rng);
  n->left = n->right = NULL;
  n->payload = NULL;
  if ((r & 3) == 0) {
    n->payload = malloc(8 + (size_t)(r >> 58));
    if (!n->payload)
      abort();
    n->payload[0] = (char)r;
  }
  return n;
}

/* Depth-first, left before right, as the recursive builder would allocate. */
static node *build(int depth, uint64_t *rng) {
  struct {
    node **slot;
    int depth;
  } stack[2 * MAX_DEPTH + 2];
  node *root = NULL;
  int top = 0;
  stack[top].slot = &root;
  stack[top++].depth = depth;
  while (top > 0) {
    top--;
    node **slot = stack[top].slot;
    int d = stack[top].depth;
    node *n = *slot = new_node(rng);
    if (d > 0) {
      stack[top].slot = &n->right;
      stack[top++].depth = d - 1;
      stack[top].slot = &n->left;
      stack[top++].depth = d - 1;
    }
  }
  return root;
}

/* Counts the nodes and payloads; with `destroy`, frees each node after visiting it. */
static uint64_t visit(node *root, int destroy) {
  node *stack[2 * MAX_DEPTH + 2];
  int top = 0;
  uint64_t count = 0;
  stack[top++] = root;
  while (top > 0) {
    node *n = stack[--top];
    count += 1 + (n->payload ? 1 : 0);
    if (n->left) {
      stack[top++] = n->right;
      stack[top++] = n->left;
    }
    if (destroy) {
      free(n->payload);
      free(n);
    }
  }
  return count;
}

int main(int argc, char **argv) {
  double scale = workload_scale(argc, argv);
  int rounds = (int)(scale * 16);
  if (rounds < 1)
    rounds = 1;
  uint64_t rng = 42, total = 0;
  node *forest = build(MAX_DEPTH, &rng); /* lives through the whole run */
  for (int i = 0; i < rounds; i++) {
    for (int depth = 4; depth <= MAX_DEPTH; depth += 4) {
      int trees = 1 << (MAX_DEPTH - depth);
      for (int t = 0; t < trees; t++) {
        node *n = build(depth, &rng);
        total += visit(n, 0);
        total += visit(n, 1);
      }
    }
  }
  total += visit(forest, 1);
  printf("tree: %llu nodes and payloads\n", (unsigned long long)total);
  return 0;
}
