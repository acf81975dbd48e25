/* cxx_new: C++ allocation through libstdc++: new/delete of objects and arrays, nothrow new, a
 * thrown and caught exception (whose object __cxa_allocate_exception mallocs). The
 * innermost frame of each site is the user's line, not operator new. */
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "test_program.h"

struct Oops {
  int code;
};

struct Node {
  long payload[5];
  Node *next;
};

NOINLINE static int thrower(int i) {
  if (i % 2 == 1)
    throw Oops{i}; // @expect allocs=5 frees=5 top=no
  return i;
}

int main() {
  Node *head = nullptr;
  for (int i = 0; i < 50; i++) {
    Node *n = new Node(); // @expect allocs=50 frees=50 words=300
    n->next = head;
    head = n;
  }
  while (head != nullptr) {
    Node *next = head->next;
    delete head;
    head = next;
  }

  for (int i = 0; i < 10; i++) {
    int *array = new int[100]; // @expect allocs=10 frees=10 words=500
    KEEP(array);
    delete[] array;
  }

  char *nothrow = new (std::nothrow) char[33]; // @expect allocs=1 frees=1 words=5
  KEEP(nothrow);
  delete[] nothrow;

  int caught = 0;
  for (int i = 0; i < 10; i++) {
    try {
      KEEP(thrower(i));
    } catch (const Oops &e) {
      caught += e.code % 2;
    }
  }
  std::printf("caught %d exceptions\n", caught);

  Node *kept = new Node(); // @expect allocs=1 frees=0 words=6
  KEEP(kept);
  std::printf("cxx_new done\n");
  return 0;
}
