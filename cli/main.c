/* memtap's entry point: the dispatcher (dispatch.c) does all the work. */
#include "cli.h"

int main(int argc, char **argv) {
  return mt_cli_run(argc, argv);
}
